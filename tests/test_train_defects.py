"""`nalasr train` on bad data and bad run folders, its stale temp files, resume and --help (issue 39, items 5, 7,
9, 10). Tiny CPU runs of a step or two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from nalasr.cli import run
from nalasr.errors import InputError
from nalasr.eval.datasets import BadFile
from nalasr.io import fsutil
from nalasr.train.checkpoint import list_checkpoints
from nalasr.train.config import to_toml
from nalasr.train.data import MAX_BAD_SHARE, TrainingImages, check_bad_share
from imagegen import bomb_png, smooth_image

TINY = {"dim": 8, "groups": 1, "blocks": 1, "heads": 2}


def _good(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(smooth_image(30, 34, i)).save(folder / f"img{i:02d}.png")
    return folder


def _corrupt(folder: Path, n: int) -> list[str]:
    """``n`` files named as images that do not decode, of several kinds."""
    good = next(folder.glob("*.png")).read_bytes()
    kinds = [b"", b"not an image at all", good[: len(good) // 3], bomb_png(20000, 20000), os.urandom(300),
             b"\x89PNG\r\n\x1a\n" + b"\0" * 40]
    names = []
    for i in range(n):
        name = f"bad{i:02d}.{'png' if i % 2 else 'jpg'}"
        (folder / name).write_bytes(kinds[i % len(kinds)])
        names.append(name)
    return names


def _train(capsys, tmp_path: Path, *args, **config) -> tuple[int, str, str]:
    """``nalasr train`` of the tiny model on CPU (x2, batch 2, LR patch 8, no validation); ``config``: more keys."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(to_toml({"model_overrides": TINY, "val_set": "", "log_every": 1, **config}))
    code = run(["train", "--config", str(cfg), "--scale", "2", "--batch", "2", "--patch", "8", "--device", "cpu",
                *map(str, args)])
    got = capsys.readouterr()
    return code, got.out, got.err


def _one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------------ item 5: bad images


def test_mostly_corrupt_data_is_refused_naming_the_files(tmp_path, capsys):
    data = _good(tmp_path / "data", 4)
    bad = _corrupt(data, 6)
    code, _, err = _train(capsys, tmp_path, "--data", data, "-o", tmp_path / "run", "--steps", 1)
    assert code == InputError.exit_code
    line = _one_error(err)
    assert "6 of 10 training images could not be decoded" in line and "10%" in line
    assert all(name in line for name in sorted(bad)[:3]) and "and 3 more" in line
    assert not list_checkpoints(tmp_path / "run" / "checkpoints")


def test_a_few_corrupt_images_are_left_out_and_named(tmp_path, capsys):
    data = _good(tmp_path / "data", 10)
    (bad,) = _corrupt(data, 1)
    code, out, err = _train(capsys, tmp_path, "--data", data, "-o", tmp_path / "run", "--steps", 1)
    assert code == 0, err
    said = " ".join((out + err).split())
    assert f"left out 1 of 11 training images that could not be decoded: {bad} (empty file)" in said


def test_bad_share_boundary():
    def found(good: int, bad: int) -> TrainingImages:
        return TrainingImages([], good + bad, [BadFile(f"b{i}.png", "empty file") for i in range(bad)], [])

    assert MAX_BAD_SHARE == 0.10  # --help says 10%
    assert check_bad_share(found(10, 0)) is None
    assert "left out 1 of 10" in check_bad_share(found(9, 1))  # exactly 10%: a warning
    with pytest.raises(InputError, match="2 of 11 training images"):
        check_bad_share(found(9, 2))


# ----------------------------------------------------------------------------- item 7: bad run folders


def test_out_unwritable_or_a_file_is_one_line(tmp_path, capsys):
    data = _good(tmp_path / "data", 2)
    (tmp_path / "file").write_text("x")
    places = [tmp_path / "file", tmp_path / "file" / "run"]
    if Path("/proc/self").is_dir():
        places.append(Path("/proc/self/nalasr_run"))  # no one may create a folder there, root included
    for place in places:
        for resume in ([], ["--resume"]):
            code, _, err = _train(capsys, tmp_path, "--data", data, "-o", place, "--steps", 1, *resume)
            assert code == InputError.exit_code, (place, resume, err)
            assert "--out" in _one_error(err), (place, resume)
    assert (tmp_path / "file").read_text() == "x"


def test_resume_of_a_new_folder_says_no_checkpoint(tmp_path, capsys):
    new = tmp_path / "newdir"
    code, _, err = _train(capsys, tmp_path, "-o", new, "--resume")
    assert code == InputError.exit_code
    line = _one_error(err)
    assert f"no checkpoint in {new}" in line and "no training data" not in line
    assert not new.exists()  # nothing created for a run that did not start


# ------------------------------------------------------------------------------- item 9: stale temp files


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.skipif(os.name != "posix", reason="process liveness is checked with POSIX signals")
def test_start_removes_our_stale_temps_and_nothing_else(tmp_path, capsys):
    data = _good(tmp_path / "data", 2)
    out = tmp_path / "run"
    dead, host = _dead_pid(), fsutil._HOST
    ours = [out / f".config.nalasr-{dead}-{host}-a1b2c3d4.tmp.toml",
            out / "checkpoints" / f".ckpt_00000001.nalasr-{dead}-{host}-x9y8z7w6.tmp.pt",
            out / "weights" / f".nalasr_default_x2.nalasr-{dead}-{host}-k3j_9x0a.tmp.safetensors"]
    others = [out / ".config.a1b2c3d4.tmp.toml",  # another program's (or an old) name without our tag
              out / "weights" / ".nalasr_default_x2.safetensors.swp",
              out / "checkpoints" / f".ckpt_00000001.nalasr-{os.getpid()}-{host}-livelive.tmp.pt"]  # writer alive
    for p in ours + others:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half written")
    code, out_text, err = _train(capsys, tmp_path, "--data", data, "-o", out, "--steps", 1)
    assert code == 0, err
    assert not any(p.exists() for p in ours), [p for p in ours if p.exists()]
    assert all(p.read_bytes() == b"half written" for p in others)
    assert "removed 1 temporary file" in " ".join((out_text + err).split())


# ------------------------------------------------------------------------------- item 10: resume, threads


def test_restart_before_the_first_checkpoint_does_not_duplicate_log_steps(tmp_path, capsys):
    """A run killed before its first checkpoint leaves log lines; the restart (from step 0) must drop them."""
    data = _good(tmp_path / "data", 2)
    out = tmp_path / "run"
    out.mkdir()
    (out / "log.jsonl").write_text("".join(json.dumps({"step": s, "loss": 1.0, "lr": 0.0}) + "\n" for s in (1, 2, 3))
                                   + '{"step": 4, "lo')  # and a line cut by the kill
    code, _, err = _train(capsys, tmp_path, "--data", data, "-o", out, "--steps", 2, "--resume")
    assert code == 0, err
    steps = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert steps == [1, 2]


def test_resume_truncates_the_log_to_the_checkpoint(tmp_path, capsys):
    data = _good(tmp_path / "data", 2)
    out = tmp_path / "run"
    assert _train(capsys, tmp_path, "--data", data, "-o", out, "--steps", 3, ckpt_every=2, keep_last=5)[0] == 0
    (last,) = [p for s, p in list_checkpoints(out / "checkpoints") if s == 3]
    last.unlink()  # as if killed after logging step 3, before its checkpoint: the newest is step 2
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [2]
    code, _, err = _train(capsys, tmp_path, "-o", out, "--resume", ckpt_every=2, keep_last=5)
    assert code == 0, err
    steps = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_threads_option_sets_torch_threads(tmp_path, capsys):
    data = _good(tmp_path / "data", 2)
    before = torch.get_num_threads()
    try:
        code, _, err = _train(capsys, tmp_path, "--data", data, "-o", tmp_path / "run", "--steps", 1, "--threads", 1)
        assert code == 0, err
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    code, _, err = _train(capsys, tmp_path, "--data", data, "-o", tmp_path / "r2", "--steps", 1, "--threads", 0)
    assert code == 2 and "--threads" in err


def test_help_shows_the_defaults(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # rich reads it for the help's width: no option's row wraps
    assert run(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for option, shown in (("--steps", "100000"), ("--batch", "64"), ("--patch", "48"), ("--lr", "0.0005"),
                          ("--val-set", "set5"), ("--out", "runs/nalasr"), ("--scale", "4"), ("--seed", "0")):
        assert option in text and (f"[default: ({shown})]" in text or f"[default: {shown}]" in text), option
    assert "--threads" in text and "10%" in text


def test_config_default_variant_is_the_models():
    from nalasr.model import DEFAULT_VARIANT
    from nalasr.train import config

    assert config.DEFAULT_VARIANT == DEFAULT_VARIANT  # written out in config.py so that it imports no torch
