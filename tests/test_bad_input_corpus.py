"""One generated corpus of good, odd and bad inputs through `upscale`, `eval` and `train`, each in a new process
with a timeout: no traceback, no hang, the documented exit codes, inputs byte-identical afterwards, no temp files.

The cases are issue 39's defects plus the inputs that already worked (truncated, 0-byte, bombs, 16-bit,
palette + tRNS, CMYK, EXIF rotation, ICC, animated)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nalasr.io.fsutil import is_temp_name
from nalasr.io.weights import save_weights
from nalasr.model import create_model
from nalasr.train.config import to_toml
from imagegen import bomb_png, encode, exif_bytes, palette_image, pixels, smooth_image, srgb_icc

TIMEOUT_S = 300  # a hang fails the test instead of the suite

# name → what upscale must make of it ("ok", or a piece of its one-line error)
EXPECTED = {
    "rgb.png": "ok", "deep16.png": "ok", "palette_trns.png": "ok", "cmyk.jpg": "ok", "rotated.jpg": "ok",
    "icc.png": "ok", "animated.png": "ok", "link_to_rgb.png": "ok",
    "truncated.png": "truncated.png", "empty.png": "empty file", "text.png": "not an image",
    "bomb.png": "decompression-bomb guard", "fifo.png": "not a regular file", "null.png": "not a regular file",
    "dangling.png": "broken symbolic link", ("a" * 250) + ".png": "output name is",
}


def _corpus(folder: Path) -> None:
    folder.mkdir()
    Image.fromarray(smooth_image(24, 28, 0)).save(folder / "rgb.png")
    (folder / "deep16.png").write_bytes(encode(pixels(20, 22, 3, np.uint16), "PNG"))
    palette_image(18, 20, transparency=True).save(folder / "palette_trns.png")
    Image.fromarray(smooth_image(20, 24, 1)).convert("CMYK").save(folder / "cmyk.jpg")
    Image.fromarray(smooth_image(20, 26, 2)).save(folder / "rotated.jpg", exif=exif_bytes(orientation=6))
    Image.fromarray(smooth_image(22, 22, 3)).save(folder / "icc.png", icc_profile=srgb_icc())
    frames = [Image.fromarray(smooth_image(16, 16, s)) for s in (4, 5)]
    frames[0].save(folder / "animated.png", save_all=True, append_images=frames[1:])
    (folder / "link_to_rgb.png").symlink_to("rgb.png")
    good = (folder / "rgb.png").read_bytes()
    (folder / "truncated.png").write_bytes(good[: len(good) // 2])
    (folder / "empty.png").write_bytes(b"")
    (folder / "text.png").write_text("not an image")
    (folder / "bomb.png").write_bytes(bomb_png(20000, 20000))
    os.mkfifo(folder / "fifo.png")
    (folder / "null.png").symlink_to(os.devnull)
    (folder / "dangling.png").symlink_to(folder / "missing.png")
    (folder / (("a" * 250) + ".png")).write_bytes(good)
    (folder / "rgb_x2.png").write_bytes(good)  # named as an earlier run's output of rgb.png: left out


def _state(folder: Path) -> dict[str, str]:
    """Every entry's kind and content hash (links by their target, FIFOs and devices by kind alone)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p)] = "link:" + os.readlink(p)
        elif p.is_fifo():
            out[str(p)] = "fifo"
        elif p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _nalasr(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nalasr", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=TIMEOUT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})


def _temps(*folders: Path) -> list[Path]:
    return [p for f in folders if f.exists() for p in f.rglob("*") if is_temp_name(p.name)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    root = tmp_path_factory.mktemp("corpus")
    _corpus(root / "c")
    torch.manual_seed(0)
    save_weights(create_model("small", 2), root / "w.safetensors")
    return root


def test_upscale_reports_every_input_and_goes_on(corpus, tmp_path):
    folder, before = corpus / "c", _state(corpus / "c")
    done = _nalasr("upscale", str(folder), "-o", str(tmp_path / "out"), "-s", "2", "--weights",
                   str(corpus / "w.safetensors"), "--device", "cpu", "--json", cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr  # some failed, the others were written
    items = {Path(i["input"]).name: i for i in json.loads(done.stdout)["items"]}
    assert set(items) == set(EXPECTED), sorted(items)  # rgb_x2.png left out, nothing else dropped
    for name, expect in EXPECTED.items():
        item = items[name]
        if expect == "ok":
            assert item["status"] == "ok" and Path(item["output"]).is_file(), item
        else:
            assert item["status"] == "failed" and expect in item["error"] and item["exit_code"] == 2, item
    assert "left out 1 file" in done.stderr
    failed_lines = [ln for ln in done.stderr.splitlines() if ln.startswith("failed: ")]
    assert len(failed_lines) == sum(e != "ok" for e in EXPECTED.values())
    assert _state(folder) == before and _temps(folder, tmp_path / "out") == []


def test_eval_lists_what_it_cannot_score_and_exits_4(corpus, tmp_path):
    folder, before = corpus / "c", _state(corpus / "c")
    done = _nalasr("eval", str(folder), "-s", "2", "--model", "bicubic", "--device", "cpu", "--json",
                   cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 4, done.stderr
    unscored = {u["name"] for u in json.loads(done.stdout)["unscored"]}
    assert {"truncated.png", "empty.png", "text.png", "bomb.png", "fifo.png", "null.png"} <= unscored
    assert _state(folder) == before


def test_train_refuses_a_folder_this_bad_in_one_line(corpus, tmp_path):
    folder, before = corpus / "c", _state(corpus / "c")
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(to_toml({"model_overrides": {"dim": 8, "groups": 1, "blocks": 1, "heads": 2}, "val_set": ""}))
    done = _nalasr("train", "--config", str(cfg), "--data", str(folder), "--scale", "2", "--batch", "2", "--patch",
                   "8", "--steps", "2", "--device", "cpu", "-o", str(tmp_path / "run"), cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "could not be decoded" in errors[0], done.stderr
    assert _state(folder) == before and _temps(folder, tmp_path / "run") == []
