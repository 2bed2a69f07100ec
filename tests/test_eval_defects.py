"""`nalasr eval` on sets with files it cannot score, and on bad --save-dir places (issue 39, items 4 and 7).

Before the fix a decompression bomb aborted the run with a traceback, and 0-byte, non-image and unreadable files
were left out of a set's mean without a word (exit 0).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nalasr.cli import run
from nalasr.errors import DatasetError, InputError
from nalasr.eval.evaluate import UnscoredFiles, evaluate
from imagegen import bomb_png

GOOD = ("g0.png", "g1.png")


def _good(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(GOOD):
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (40, 44, 3), dtype=np.uint8)).save(folder / name)
    return folder


def _bad_set(folder: Path) -> Path:
    """Two good images, a bomb, a 0-byte file, text named .png, a broken link, and a stray notes.txt."""
    _good(folder)
    (folder / "bomb.png").write_bytes(bomb_png(20000, 20000))  # 4e8 pixels, a few hundred bytes
    (folder / "empty.png").write_bytes(b"")
    (folder / "text.png").write_text("not an image")
    (folder / "gone.png").symlink_to(folder / "missing.png")
    (folder / "notes.txt").write_text("a note, not part of the set")
    return folder


BAD = {"bomb.png": "decompression-bomb guard", "empty.png": "empty file", "text.png": "not an image",
       "gone.png": "not a regular file"}


def _eval(capsys, *args) -> tuple[int, str, str]:
    code = run(["eval", *map(str, args), "-s", "2", "--model", "bicubic", "--device", "cpu"])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_bad_files_are_listed_and_exit_4_after_the_scores(tmp_path, capsys):
    s = _bad_set(tmp_path / "set")
    code, out, err = _eval(capsys, s)
    assert code == DatasetError.exit_code == 4
    assert "Traceback" not in out + err
    assert "g0" in out and "g1" in out and "mean (2 of 6)" in out  # what was scored is printed first
    for name in BAD:  # each in the table with its reason (the JSON test checks the reasons: a table wraps them)
        assert f"{name}: not scored" in out, name
    assert "notes.txt" in out  # a stray file is not part of the set, but it is said to be ignored
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: 4 image files could not be scored") and "--skip-bad" in lines[0]
    named = sorted(BAD)[:3]  # the one line names the first three, then counts the rest
    assert all(f"set/{n}: " in lines[0] for n in named) and "and 1 more" in lines[0]


def test_skip_bad_exits_0_and_json_lists_the_unscored(tmp_path, capsys):
    s = _bad_set(tmp_path / "set")
    code, out, err = _eval(capsys, s, "--skip-bad", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert sorted(b["name"] for b in rep["unscored"]) == sorted(BAD) and {b["set"] for b in rep["unscored"]} == {"set"}
    (one,) = rep["sets"]
    assert one["scored"] == 2 and one["files"] == 6 and sorted(b["name"] for b in one["unscored"]) == sorted(BAD)
    assert one["ignored"] == ["notes.txt"]
    assert all(BAD[b["name"]] in b["reason"] for b in one["unscored"])
    # without --skip-bad the JSON is printed too, then the one-line error
    code, out, err = _eval(capsys, s, "--json")
    assert code == 4 and len(json.loads(out)["unscored"]) == 4 and err.strip().startswith("error: ")


def test_means_leave_the_unscored_out(tmp_path):
    good = evaluate("bicubic", [_good(tmp_path / "good")], 2, device="cpu")
    with pytest.raises(UnscoredFiles) as e:
        evaluate("bicubic", [_bad_set(tmp_path / "bad")], 2, device="cpu")
    mixed = e.value.report
    assert isinstance(e.value, DatasetError)
    assert [i.name for i in mixed.sets[0].images] == ["g0", "g1"]
    assert mixed.sets[0].psnr == good.sets[0].psnr and mixed.sets[0].ssim == good.sets[0].ssim
    skipped = evaluate("bicubic", [tmp_path / "bad"], 2, device="cpu", skip_bad=True)
    assert {b.name for b in skipped.sets[0].unscored} == set(BAD)
    rows = [r for r in skipped.rows() if r["error"]]
    assert sorted(r["image"] for r in rows) == sorted(BAD)  # the CSV says so too


def _deny_reading(monkeypatch, locked: Path) -> None:
    """Opening ``locked`` fails with EACCES, whichever call opens it (root reads any file, so chmod cannot)."""
    import builtins

    real_open, real_os_open = builtins.open, os.open

    def denied(path) -> bool:
        return isinstance(path, (str, os.PathLike)) and os.path.abspath(path) == str(locked)

    def py_open(path, *a, **k):
        if denied(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    def os_open(path, *a, **k):
        if denied(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_os_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", py_open)
    monkeypatch.setattr(os, "open", os_open)


def test_unreadable_file_is_unscored(tmp_path, capsys, monkeypatch):
    s = _good(tmp_path / "set")
    locked = s / "locked.png"
    locked.write_bytes((s / "g0.png").read_bytes())
    _deny_reading(monkeypatch, locked)
    code, out, err = _eval(capsys, s)
    monkeypatch.undo()
    assert code == 4 and "locked.png" in err and "cannot read" in err and "Traceback" not in out + err
    assert "mean (2 of 3)" in out


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file; needs a normal user")
def test_unreadable_file_is_unscored_for_real(tmp_path, capsys):
    s = _good(tmp_path / "set")
    locked = s / "locked.png"
    locked.write_bytes((s / "g0.png").read_bytes())
    locked.chmod(0)
    try:
        code, out, err = _eval(capsys, s)
    finally:
        locked.chmod(0o644)
    assert code == 4 and "locked.png" in err and "cannot read" in err


def test_a_set_of_only_bad_files_is_a_dataset_error(tmp_path, capsys):
    s = tmp_path / "set"
    s.mkdir()
    (s / "empty.png").write_bytes(b"")
    (s / "bomb.png").write_bytes(bomb_png(20000, 20000))
    code, out, err = _eval(capsys, s, "--skip-bad")
    assert code == 4 and "none of its 2 image files can be scored" in err and "Traceback" not in out + err


def test_max_pixels_option_sets_the_guard(tmp_path, capsys):
    s = _good(tmp_path / "set")
    code, _, err = _eval(capsys, s, "--max-pixels", 1000)  # 40x44 = 1760 pixels each: both refused
    assert code == 4 and "over the limit of 1,000 pixels" in err


def test_save_dir_bad_places_fail_before_the_model_loads(tmp_path, capsys):
    s = _good(tmp_path / "set")
    (tmp_path / "file").write_text("x")
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / "set").write_text("a file where the set's folder goes")
    places = [tmp_path / "file", tmp_path / "file" / "sub", holder]
    if Path("/proc/self").is_dir():
        places.append(Path("/proc/self/nalasr_out"))  # no one may create a folder there, root included
    for place in places:
        code = run(["eval", str(s), "-s", "2", "--weights", str(tmp_path / "missing.safetensors"), "--device", "cpu",
                    "--save-dir", str(place)])
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == InputError.exit_code, (place, err)  # 2, not the 3 of the missing weights: checked first
        assert len(lines) == 1 and "--save-dir" in lines[0] and "Traceback" not in err, (place, err)
    assert (tmp_path / "file").read_text() == "x" and (holder / "set").is_file()


def test_too_small_names_the_real_size(tmp_path, capsys):
    s = _good(tmp_path / "set")
    Image.fromarray(np.zeros((1, 1, 3), np.uint8)).save(s / "dot.png")
    code, out, err = _eval(capsys, s, "--skip-bad", "--json")
    assert code == 0
    (reason,) = [u["reason"] for u in json.loads(out)["unscored"] if u["name"] == "dot.png"]
    assert reason.startswith("1x1 (0x0 after cropping to a multiple of 2) is too small"), reason
