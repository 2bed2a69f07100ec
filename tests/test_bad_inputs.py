"""Inputs that used to hang, traceback or silently drop files in `nalasr upscale` (issue 39's defects)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nalasr.cli import run
from nalasr.errors import InputError
from nalasr.inference.batch import upscale_paths
from nalasr.model import create_model


@pytest.fixture(scope="module")
def tiny_x2():
    torch.manual_seed(0)
    return create_model("small", 2).eval()


def _png(path: Path, seed: int = 0) -> Path:
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (9, 11, 3), dtype=np.uint8)).save(path)
    return path


def test_empty_input_is_an_error_not_the_current_folder(tmp_path, monkeypatch, tiny_x2):
    _png(tmp_path / "here.png")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="empty"):
        upscale_paths([""], scale=2, model=tiny_x2)
    assert run(["upscale", "", "-s", "2"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here.png"]  # nothing was upscaled


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_input_is_refused_without_blocking(tmp_path):
    """Run in a child process with a timeout: before the fix, opening the FIFO blocked forever."""
    fifo = tmp_path / "f.png"
    os.mkfifo(fifo)
    good = _png(tmp_path / "g.png")
    code = (
        "import sys, torch; from nalasr.inference.batch import upscale_paths; from nalasr.model import create_model;"
        "torch.manual_seed(0); m = create_model('small', 2).eval();"
        f"r = upscale_paths([{str(fifo)!r}, {str(tmp_path / '*.png')!r}], scale=2, model=m);"
        "print([(i.input, i.status, i.error) for i in r.items])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stdout and done.stdout.count("not a regular file") == 2  # by name, by glob
    assert (tmp_path / "g_x2.png").is_file() and good.is_file()


def test_symlink_beside_its_target_hides_nothing(tmp_path, tiny_x2):
    target = _png(tmp_path / "valid.png")
    (tmp_path / "link.png").symlink_to(target.name)
    report = upscale_paths([tmp_path], scale=2, model=tiny_x2)
    assert sorted(Path(i.input).name for i in report.items) == ["link.png", "valid.png"]
    assert (tmp_path / "valid_x2.png").is_file() and (tmp_path / "link_x2.png").is_file()


def test_same_file_by_path_and_glob_is_done_once(tmp_path, tiny_x2):
    _png(tmp_path / "a.png")
    report = upscale_paths([tmp_path / "a.png", str(tmp_path / "*.png")], tmp_path / "out", scale=2, model=tiny_x2)
    assert [Path(i.input).name for i in report.items] == ["a.png"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any folder; needs a normal user")
def test_unreadable_folder_is_a_failed_item(tmp_path, tiny_x2):
    locked = tmp_path / "locked"
    locked.mkdir()
    _png(locked / "x.png")
    locked.chmod(0)
    try:
        report = upscale_paths([locked, _png(tmp_path / "ok.png")], scale=2, model=tiny_x2)
    finally:
        locked.chmod(0o755)
    assert [i.status for i in report.items] == ["failed", "ok"] and "cannot read" in report.items[0].error


def test_eval_save_dir_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    hr = tmp_path / "set"
    hr.mkdir()
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(hr / "a.png")
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file" / "sub"):
        assert run(["eval", str(hr), "-s", "2", "--model", "bicubic", "--save-dir", str(bad)]) == 2
        err = capsys.readouterr().err
        assert "--save-dir" in err and "Traceback" not in err
    assert (tmp_path / "file").read_text() == "x"


def test_train_out_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    data = tmp_path / "hr"
    data.mkdir()
    _png(data / "a.png")
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file" / "run"):
        assert run(["train", "--data", str(data), "-o", str(bad), "--steps", "1", "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert "--out" in err and "Traceback" not in err
    assert (tmp_path / "file").read_text() == "x"
