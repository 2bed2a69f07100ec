"""`nalasr upscale` and the Python API on tiny generated images, with random-weight models.

Two kinds of model: "shipped" weights with a random (non-zero) upsampler, as a trained network would
have, and a "bilinear" one whose residual branch is zero, so its output is exactly a bilinear upscale:
against that, every pixel of every output can be checked (channel order, orientation, bit depth, alpha).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from imagegen import (
    PALETTE_ALPHA,
    PALETTE_RGB,
    bomb_png,
    encode,
    exif_bytes,
    palette_image,
    pixels,
    srgb_icc,
)
from PIL import Image

from nalasr import settings
import nalasr
from nalasr.cli import run
from nalasr.errors import InputError
from nalasr.io.imageio import read_image
from nalasr.model import create_model
from nalasr.inference.batch import upscale_paths
from nalasr.inference.upscaling import upscale
from nalasr.io.weights import save_weights, shipped_name

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# ------------------------------------------------------------------------------------------- fixtures


def _random_model(scale: int, seed: int = 0):
    torch.manual_seed(seed)
    model = create_model("small", scale)
    with torch.no_grad():  # the upsampler starts at zero; a trained one is not
        model.upsampler[0].weight.normal_(0, 0.02)
        model.upsampler[0].bias.normal_(0, 0.02)
    return model


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("weights")
    for s in (2, 3, 4):
        save_weights(_random_model(s, seed=s), folder / shipped_name("default", s))
    save_weights(create_model("small", 2), folder / "bilinear_x2.safetensors")  # zero residual
    return folder


@pytest.fixture(autouse=True)
def shipped(weights_dir, monkeypatch) -> Path:
    monkeypatch.setenv("NALASR_WEIGHTS", str(weights_dir))
    settings.reload()  # nalasr reads the environment once
    return weights_dir


@pytest.fixture
def bilinear(weights_dir) -> Path:
    return weights_dir / "bilinear_x2.safetensors"




def cli(capsys, *args) -> tuple[int, str, str]:
    code = run(["upscale", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys, *args) -> tuple[int, dict, str]:
    code, out, err = cli(capsys, *args, "--json")
    return code, json.loads(out), err


def bilinear_reference(a: np.ndarray, scale: int) -> np.ndarray:
    """What the zero-residual model must produce for (H, W, C) colour/gray pixels."""
    maxval = 65535.0 if a.dtype == np.uint16 else 255.0
    x = torch.from_numpy(a.astype(np.float32) / maxval).permute(2, 0, 1)[None]
    if a.shape[2] == 1:  # gray goes through the network as RGB and is averaged back
        x = x.expand(-1, 3, -1, -1)
    y = F.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False).clamp(0, 1)
    if a.shape[2] == 1:
        y = y.mean(dim=1, keepdim=True)
    return np.rint(y[0].permute(1, 2, 0).numpy() * maxval).astype(a.dtype)


def bicubic_alpha(alpha: np.ndarray, scale: int) -> np.ndarray:
    maxval = 65535.0 if alpha.dtype == np.uint16 else 255.0
    f = Image.fromarray(alpha.astype(np.float32) / np.float32(maxval))
    big = np.asarray(f.resize((alpha.shape[1] * scale, alpha.shape[0] * scale), Image.Resampling.BICUBIC))
    return np.rint(np.clip(big, 0, 1) * maxval).astype(alpha.dtype)


def assert_close(actual: np.ndarray, expected: np.ndarray, lsb: int = 1) -> None:
    """Equal up to rounding (float order of operations differs between the model and the reference)."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert np.abs(actual.astype(np.int64) - expected.astype(np.int64)).max() <= lsb


# ------------------------------------------------------------------------------------------ Python API


@pytest.mark.parametrize("shape,dtype", [
    ((9, 11), np.uint8), ((9, 11, 1), np.uint8), ((9, 11, 2), np.uint8), ((9, 11, 3), np.uint8),
    ((9, 11, 4), np.uint8), ((9, 11), np.uint16), ((9, 11, 3), np.uint16), ((9, 11, 4), np.uint16),
])
def test_api_numpy_same_kind_back_and_exact(bilinear, shape, dtype):
    model = nalasr.load_model(2, weights=bilinear, device="cpu")
    a = pixels(9, 11, shape[2] if len(shape) == 3 else 1, dtype, seed=len(shape))
    image = a[..., 0] if len(shape) == 2 else a
    out = nalasr.upscale(image, model=model)
    assert out.shape == (18, 22, *shape[2:]) and out.dtype == dtype
    out3 = out[..., None] if out.ndim == 2 else out
    c = a.shape[2]
    colour = slice(0, 3) if c >= 3 else slice(0, 1)
    assert_close(out3[..., colour], bilinear_reference(a[..., colour], 2))
    if c in (2, 4):
        np.testing.assert_array_equal(out3[..., -1], bicubic_alpha(a[..., -1], 2))


def test_api_16bit_keeps_16bit_precision(bilinear):
    model = nalasr.load_model(2, weights=bilinear, device="cpu")
    a = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000 + 7)
    out = upscale(a, model=model)
    assert np.any(out % 257 != 0)  # not an 8-bit result scaled up
    assert_close(out[..., None], bilinear_reference(a[..., None], 2))


@pytest.mark.parametrize("mode,out_mode", [("L", "L"), ("LA", "LA"), ("RGB", "RGB"), ("RGBA", "RGBA"),
                                           ("P", "RGB"), ("1", "L"), ("I;16", "I;16"), ("CMYK", "RGB")])
def test_api_pil_images(mode, out_mode):
    src = Image.fromarray(pixels(6, 5, 3)).convert(mode) if mode != "I;16" else \
        Image.fromarray(pixels(6, 5, 1, np.uint16)[..., 0])
    out = nalasr.upscale(src, scale=3)
    assert isinstance(out, Image.Image)
    assert out.mode == out_mode and out.size == (15, 18)


def test_api_pil_palette_with_transparency_keeps_alpha():
    out = nalasr.upscale(palette_image(4, 6, transparency=True), scale=2)
    assert out.mode == "RGBA" and out.size == (12, 8)
    assert np.asarray(out)[..., 3].min() < 255  # transparency survived


def test_api_pil_keeps_icc_profile():
    src = Image.fromarray(pixels(4, 4, 3))
    src.info["icc_profile"] = srgb_icc()
    assert nalasr.upscale(src, scale=2).info["icc_profile"] == srgb_icc()


def test_api_default_weights_and_scale(shipped):
    out = nalasr.upscale(pixels(5, 4, 3))  # scale 4 and the shipped weights by default
    assert out.shape == (20, 16, 3)
    model = nalasr.load_model(2)
    assert upscale(pixels(5, 4, 3), model=model).shape == (10, 8, 3)  # scale follows the model
    assert callable(nalasr.upscale) and nalasr.upscale(pixels(2, 2, 1)[..., 0]).shape == (8, 8)


def test_api_rejects_bad_input(bilinear):
    model = nalasr.load_model(2, weights=bilinear)
    with pytest.raises(InputError, match="uint8 or uint16"):
        upscale(np.zeros((4, 4, 3), np.float32), model=model)
    with pytest.raises(InputError, match="HxW"):
        upscale(np.zeros((4, 4, 5), np.uint8), model=model)
    with pytest.raises(InputError, match="no pixels"):
        upscale(np.zeros((0, 4), np.uint8), model=model)
    with pytest.raises(InputError, match="x2, not x4"):
        upscale(np.zeros((4, 4), np.uint8), 4, model)
    with pytest.raises(InputError, match="PIL image or a numpy array"):
        upscale([[1, 2], [3, 4]], model=model)  # type: ignore[type-var]


def test_upscale_paths_with_a_given_model(tmp_path, bilinear):
    model = nalasr.load_model(2, weights=bilinear)
    a = pixels(5, 6, 3)
    (tmp_path / "a.png").write_bytes(encode(a, "PNG"))
    seen: list[str] = []
    report = upscale_paths([tmp_path / "a.png"], tmp_path / "out", scale=2, model=model,
                           on_start=lambda n: seen.append(f"start {n}"), on_item=lambda i: seen.append(i.status))
    assert report.weights is None and report.count("ok") == 1 and seen == ["start 1", "ok"]
    assert_close(read_image(tmp_path / "out" / "a_x2.png").pixels, bilinear_reference(a, 2))
    with pytest.raises(InputError, match="x2, not x4"):
        upscale_paths([tmp_path / "a.png"], scale=4, model=model)


def test_fallback_to_fp32_is_reported(tmp_path, capsys):
    model = create_model("small", 2)
    with torch.no_grad():
        model.upsampler[0].bias.fill_(1e5)  # fine in fp32, inf in fp16
    save_weights(model, tmp_path / "overflow.safetensors")
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(6, 6, 3), "PNG"))
    code, report, err = cli_json(capsys, src, "--weights", tmp_path / "overflow.safetensors", "--scale", 2,
                                 "--precision", "fp16", "--device", "cpu")
    assert code == 0
    item = report["items"][0]
    assert item["fell_back"] is True and item["precision"] == "fp32"
    assert "recomputed in fp32" in err


def test_out_of_memory_is_a_clean_failure(tmp_path, monkeypatch):
    from nalasr.model import NaLaSR

    def oom(self, x):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 ...")

    monkeypatch.setattr(NaLaSR, "forward", oom)
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(6, 6, 3), "PNG"))
    report = upscale_paths([src], scale=2)
    item = report.items[0]
    assert item.status == "failed"
    assert "out of cpu memory" in item.error and "12.00 GiB" in item.error
    assert not (tmp_path / "a_x2.png").exists()


# ------------------------------------------------------------------------------------------------- CLI


def test_single_file_default_output_and_report(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short paths: the table is 80 columns wide when not on a terminal
    src = tmp_path / "photo.png"
    src.write_bytes(encode(pixels(12, 16, 3), "PNG"))
    code, out, err = cli(capsys, "photo.png")
    assert code == 0, err
    dst = tmp_path / "photo_x4.png"
    assert read_image(dst).size == (64, 48)
    assert "1 ok" in out and "photo.png" in out and "16x12→64x48" in out and "photo_x4.png" in out
    assert "cpu, fp32" in out and "MiB" in out


def test_json_report(tmp_path, capsys, shipped):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(8, 10, 3), "PNG"))
    code, report, _ = cli_json(capsys, src, "-s", 3)
    assert code == 0
    assert report["scale"] == 3 and report["device"] == "cpu" and report["precision"] == "fp32"
    assert report["weights"] == str(shipped / shipped_name("default", 3))
    assert (report["ok"], report["skipped"], report["failed"]) == (1, 0, 0)
    item = report["items"][0]
    assert item["input"] == str(src) and item["output"] == str(tmp_path / "a_x3.png")
    assert item["input_size"] == [10, 8] and item["output_size"] == [30, 24]
    assert item["pixels"] == "RGB 8-bit" and item["status"] == "ok" and item["error"] is None
    assert 0 < item["model_ms"] <= item["total_ms"]
    assert isinstance(item["peak_memory_bytes"], int) and item["memory_kind"] == "cpu-peak-rss"


def test_output_file_ext_and_quality(tmp_path, capsys):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(16, 16, 3), "PNG"))
    assert cli(capsys, src, "-o", tmp_path / "named.jpg", "-s", 2)[0] == 0
    assert read_image(tmp_path / "named.jpg").format == "JPEG"
    assert cli(capsys, src, "-o", tmp_path / "lo", "--ext", "jpg", "--quality", 5, "-s", 2)[0] == 0
    assert cli(capsys, src, "-o", tmp_path / "hi", "--ext", "JPG", "--quality", 100, "-s", 2)[0] == 0
    lo, hi = tmp_path / "lo" / "a_x2.jpg", tmp_path / "hi" / "a_x2.jpg"
    assert read_image(lo).format == "JPEG" and lo.stat().st_size < hi.stat().st_size
    assert cli(capsys, src, "-o", tmp_path / "x.png", "--ext", "webp")[0] == 2  # contradiction


def test_input_without_extension_gets_its_formats_extension(tmp_path, capsys):
    src = tmp_path / "scan"
    src.write_bytes(encode(pixels(6, 6, 3), "TIFF"))
    assert cli(capsys, src, "-s", 2)[0] == 0
    assert read_image(tmp_path / "scan_x2.tif").format == "TIFF"


def test_existing_output(tmp_path, capsys):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(6, 6, 3), "PNG"))
    dst = tmp_path / "a_x2.png"
    dst.write_bytes(b"old")
    code, _, err = cli(capsys, src, "-s", 2)
    assert code == 2 and "output exists" in err and "--overwrite" in err  # one bad input: its own code
    assert dst.read_bytes() == b"old"
    code, report, _ = cli_json(capsys, src, "-s", 2, "--skip-existing")
    assert code == 0 and report["items"][0]["status"] == "skipped" and dst.read_bytes() == b"old"
    assert cli(capsys, src, "-s", 2, "--overwrite")[0] == 0
    assert read_image(dst).size == (12, 12)
    assert cli(capsys, src, "--skip-existing", "--overwrite")[0] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "a_x2.png"]  # no temp files


def test_inputs_are_never_overwritten(tmp_path, capsys):
    a, a2 = tmp_path / "a.png", tmp_path / "a_x2.png"
    a.write_bytes(encode(pixels(6, 6, 3), "PNG"))
    a2.write_bytes(encode(pixels(6, 6, 3, seed=1), "PNG"))
    before = (a.read_bytes(), a2.read_bytes())
    code, report, _ = cli_json(capsys, a, "-o", a, "--overwrite", "-s", 2)
    assert code == 2 and "one of the inputs" in report["items"][0]["error"]
    # a's default output is a_x2.png, which is itself an input of this batch
    code, report, _ = cli_json(capsys, a, a2, "--overwrite", "-s", 2)
    assert code == 1
    assert [i["status"] for i in report["items"]] == ["failed", "ok"]
    assert (a.read_bytes(), a2.read_bytes()) == before
    assert (tmp_path / "a_x2_x2.png").exists()


def test_folder_and_recursive_mirror_the_tree(tmp_path, capsys):
    src = tmp_path / "in"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.png").write_bytes(encode(pixels(5, 6, 3), "PNG"))
    (src / "notes.txt").write_text("not an image, and not picked up from a folder")
    (src / ".hidden.png").write_bytes(b"hidden files are skipped")
    (src / "sub" / "b.JPG").write_bytes(encode(pixels(5, 6, 3), "JPEG"))
    (src / "sub" / "deeper" / "c.webp").write_bytes(encode(pixels(5, 6, 4), "WEBP", lossless=True))
    code, report, _ = cli_json(capsys, src, "-o", tmp_path / "flat", "-s", 2)
    assert code == 0 and [i["input"] for i in report["items"]] == [str(src / "a.png")]
    code, report, _ = cli_json(capsys, src, "-o", tmp_path / "out", "-r", "-s", 2)
    assert code == 0 and report["ok"] == 3
    out = tmp_path / "out"
    got = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert got == ["a_x2.png", "sub/b_x2.JPG", "sub/deeper/c_x2.webp"]
    assert read_image(out / "sub" / "deeper" / "c_x2.webp").describe() == "RGBA 8-bit"
    empty = tmp_path / "empty"
    empty.mkdir()
    code, report, _ = cli_json(capsys, empty)
    assert code == 2 and "--recursive" in report["items"][0]["error"]


def test_glob_inputs(tmp_path, capsys):
    for name in ("x1.png", "x2.png", "y.png"):
        (tmp_path / name).write_bytes(encode(pixels(4, 4, 3), "PNG"))
    code, report, _ = cli_json(capsys, str(tmp_path / "x*.png"), "-o", tmp_path / "out", "-s", 2)
    assert code == 0 and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x1_x2.png", "x2_x2.png"]
    code, report, _ = cli_json(capsys, str(tmp_path / "z*.png"), "-s", 2)
    assert code == 2 and "no file matches" in report["items"][0]["error"]


def test_same_output_twice_in_one_run_fails_the_second(tmp_path, capsys):
    for d in ("d1", "d2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "a.png").write_bytes(encode(pixels(4, 4, 3), "PNG"))
    code, report, _ = cli_json(capsys, tmp_path / "d1" / "a.png", tmp_path / "d2" / "a.png", "-o", tmp_path / "o")
    assert code == 1 and [i["status"] for i in report["items"]] == ["ok", "failed"]
    assert "already written in this run" in report["items"][1]["error"]


def test_batch_carries_on_past_bad_files(tmp_path, capsys):
    good = encode(pixels(8, 8, 3), "PNG")
    files = {
        "good1.png": good,
        "corrupt.png": good[: good.index(b"IDAT") + 4] + bytes(range(256)),
        "truncated.jpg": encode(pixels(16, 16, 3), "JPEG")[:200],
        "text.png": b"definitely not an image",
        "empty.png": b"",
        "bomb.png": bomb_png(60_000, 60_000),
        "good2.tif": encode(pixels(8, 8, 1, np.uint16), "TIFF"),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    args = [tmp_path / n for n in files] + [tmp_path / "missing.png", "-o", tmp_path / "out", "-s", 2]
    code, out, err = cli(capsys, *args)
    assert code == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good1_x2.png", "good2_x2.tif"]
    for bad in ("corrupt.png", "truncated.jpg", "text.png", "empty.png", "bomb.png", "missing.png"):
        assert f"failed: {tmp_path / bad}" in err, bad
    assert "decompression-bomb" in err and "empty file" in err and "corrupt or truncated" in err
    assert "error: 6 of 8 inputs failed" in err
    assert "2 ok" in out


def test_max_pixels(tmp_path, capsys):
    (tmp_path / "big.png").write_bytes(bomb_png(30, 20))
    code, report, _ = cli_json(capsys, tmp_path / "big.png", "--max-pixels", 599, "-s", 2)
    assert code == 2 and "over the limit of 599" in report["items"][0]["error"]
    code, report, _ = cli_json(capsys, tmp_path / "big.png", "--max-pixels", 600, "-s", 2)
    assert code == 0 and report["items"][0]["output_size"] == [60, 40]


# --- every kind of image, checked pixel by pixel against the bilinear model


def _kind_cases() -> dict[str, tuple[bytes, str]]:
    """name → (input file bytes, expected output description)."""
    buf = io.BytesIO()
    palette_image(6, 7, transparency=True).save(buf, "PNG")
    return {
        "rgb16.png": (encode(pixels(6, 7, 3, np.uint16), "PNG"), "RGB 16-bit"),
        "rgba16.png": (encode(pixels(6, 7, 4, np.uint16), "PNG"), "RGBA 16-bit"),
        "rgb16.tif": (encode(pixels(6, 7, 3, np.uint16), "TIFF"), "RGB 16-bit"),
        "gray16.tif": (encode(pixels(6, 7, 1, np.uint16), "TIFF"), "gray 16-bit"),
        "gray16.png": (encode(pixels(6, 7, 1, np.uint16), "PNG"), "gray 16-bit"),
        "gray.png": (encode(pixels(6, 7, 1), "PNG"), "gray 8-bit"),
        "gray_alpha.png": (encode(pixels(6, 7, 2), "PNG"), "gray+alpha 8-bit"),
        "rgba.png": (encode(pixels(6, 7, 4), "PNG"), "RGBA 8-bit"),
        "palette.png": (buf.getvalue(), "RGBA 8-bit"),
        "rgb.bmp": (encode(pixels(6, 7, 3), "BMP"), "RGB 8-bit"),
    }


@pytest.mark.parametrize("name", list(_kind_cases()))
def test_every_kind_of_image(tmp_path, capsys, bilinear, name):
    data, kind = _kind_cases()[name]
    src = tmp_path / name
    src.write_bytes(data)
    code, report, err = cli_json(capsys, src, "--weights", bilinear, "-s", 2)
    assert code == 0, err
    dst = Path(report["items"][0]["output"])
    assert dst.suffix == src.suffix
    a, out = read_image(src).pixels, read_image(dst)
    assert out.describe() == kind and out.format == read_image(src).format
    c = a.shape[2]
    colour = slice(0, 3) if c >= 3 else slice(0, 1)
    assert_close(out.pixels[..., colour], bilinear_reference(a[..., colour], 2))
    if c in (2, 4):
        np.testing.assert_array_equal(out.pixels[..., -1], bicubic_alpha(a[..., -1], 2))


def test_palette_colours_and_alpha_survive(tmp_path, capsys, bilinear):
    im = palette_image(6, 7, transparency=True)
    idx = np.asarray(im)
    src = tmp_path / "p.png"
    im.save(src)
    assert cli(capsys, src, "--weights", bilinear, "-s", 2)[0] == 0
    rgba = np.concatenate([PALETTE_RGB[idx], PALETTE_ALPHA[idx][..., None]], axis=2)
    out = read_image(tmp_path / "p_x2.png").pixels
    assert_close(out[..., :3], bilinear_reference(rgba[..., :3], 2))


def test_gray_jpeg_stays_gray(tmp_path, capsys):
    src = tmp_path / "g.jpg"
    src.write_bytes(encode(pixels(8, 8, 1), "JPEG"))
    assert cli(capsys, src, "-s", 2)[0] == 0
    assert read_image(tmp_path / "g_x2.jpg").describe() == "gray 8-bit"


def test_exif_rotated_input(tmp_path, capsys, bilinear):
    a = pixels(6, 10, 3)  # stored landscape, shown portrait (orientation 6: rotate 90° clockwise)
    src = tmp_path / "rotated.png"
    src.write_bytes(encode(a, "PNG", exif=exif_bytes(6)))
    assert cli(capsys, src, "--weights", bilinear, "-s", 2)[0] == 0
    out = Image.open(tmp_path / "rotated_x2.png")
    assert out.size == (12, 20)  # upright: 6 wide, 10 tall, times 2
    exif = out.getexif()
    assert 0x0112 not in exif and exif[0x010E] == "nalasr test"
    assert_close(np.asarray(out), bilinear_reference(np.rot90(a, -1), 2))


@pytest.mark.parametrize("fmt,ext", [("JPEG", ".jpg"), ("PNG", ".png"), ("WEBP", ".webp"), ("TIFF", ".tif")])
def test_icc_and_exif_carried_to_output(tmp_path, capsys, fmt, ext):
    src = tmp_path / f"meta{ext}"
    src.write_bytes(encode(pixels(6, 6, 3), fmt, icc_profile=srgb_icc(), exif=exif_bytes()))
    assert cli(capsys, src, "-s", 2)[0] == 0
    out = Image.open(tmp_path / f"meta_x2{ext}")
    assert out.info.get("icc_profile") == srgb_icc()
    assert out.getexif()[0x010E] == "nalasr test"


def test_format_limits_are_said(tmp_path, capsys):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(6, 6, 4, np.uint16), "PNG"))
    code, report, err = cli_json(capsys, src, "--ext", "jpg", "-s", 2)
    assert code == 0
    notes = report["items"][0]["notes"]
    assert any("8 bits" in n for n in notes) and any("alpha" in n for n in notes)
    assert "note:" in err


# --- the output folder cannot be written


def test_read_only_output_folder(tmp_path, capsys):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(6, 6, 3), "PNG"))
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() != 0:
        os.chmod(locked, 0o555)
        try:
            code, out, err = cli(capsys, src, "-o", locked, "-s", 2, "--json")
            report = json.loads(out) if out.strip() else None
        finally:
            os.chmod(locked, 0o755)
    else:
        code, report, err = _run_with_read_only_folder(locked, ["upscale", str(src), "-o", str(locked), "-s", "2",
                                                                 "--json"])
    assert code == 2 and report is None, err  # refused before the model: one line, no report
    assert "cannot write there" in err and ("Permission denied" in err or "Read-only file system" in err)
    assert list(locked.iterdir()) == []  # nothing written, no temporary file left


def _run_with_read_only_folder(folder: Path, argv: list[str]) -> tuple[int, dict, str]:
    """Root writes through permission bits, so make ``folder`` truly read-only: a read-only bind mount in a
    private mount namespace of a child process (the host's mounts are untouched)."""
    if not (shutil.which("unshare") and shutil.which("mount")):
        pytest.skip("root, and no unshare/mount to make a read-only folder")
    script = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} || exit 99; "
              f'exec "$0" -c "$1"')
    code = f"import sys; from nalasr.cli import run; sys.exit(run({argv!r}))"
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                             sys.executable, code], capture_output=True, text=True, timeout=300)
    if result.returncode == 99 or "unshare failed" in result.stderr:
        pytest.skip(f"root, and a read-only bind mount is not allowed here: {result.stderr.strip()[:200]}")
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr


def test_unwritable_output_parent_fails_before_the_model(tmp_path, capsys):
    """A path component that is a file cannot become a folder: said in one line before any work."""
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(4, 4, 3), "PNG"))
    (tmp_path / "blocker").write_text("a file")
    code, _, err = cli(capsys, src, "-o", tmp_path / "blocker" / "out/", "-s", 2)
    assert code == 2 and "cannot write there" in err and err.count("\n") == 1  # before the model runs


# --- options and whole-run errors


def test_weights_errors(tmp_path, capsys, monkeypatch, shipped):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(4, 4, 3), "PNG"))
    code, _, err = cli(capsys, src, "--weights", tmp_path / "nope.safetensors")
    assert code == 3 and "not found" in err
    code, _, err = cli(capsys, src, "--weights", shipped / shipped_name("default", 2), "-s", 4)
    assert code == 3 and "x2, not x4" in err
    monkeypatch.setenv("NALASR_WEIGHTS", str(tmp_path))
    settings.reload()  # nalasr reads the environment once
    code, _, err = cli(capsys, src)
    assert code == 3 and "no shipped weights" in err and "--weights" in err


def test_device_precision_backend_threads(tmp_path, capsys):
    src = tmp_path / "a.png"
    src.write_bytes(encode(pixels(4, 4, 3), "PNG"))
    if not torch.cuda.is_available():
        code, _, err = cli(capsys, src, "--device", "cuda")
        assert code == 2 and "--device cpu" in err
        code, _, err = cli(capsys, src, "--attention-backend", "triton")
        assert code == 2 and "triton" in err
    assert cli(capsys, src, "--device", "tpu")[0] == 2
    assert cli(capsys, src, "--precision", "fp8")[0] == 2  # not a choice
    assert cli(capsys, src, "--scale", 5)[0] == 2
    torch.set_num_threads(2)
    code, report, _ = cli_json(capsys, src, "-s", 2, "--device", "cpu", "--precision", "bf16",
                               "--attention-backend", "reference", "--threads", 1, "--overwrite")
    assert code == 0 and report["precision"] == "bf16" and report["items"][0]["precision"] == "bf16"
    assert torch.get_num_threads() == 1


def test_output_is_an_existing_file_for_many_inputs(tmp_path, capsys):
    for n in ("a.png", "b.png"):
        (tmp_path / n).write_bytes(encode(pixels(4, 4, 3), "PNG"))
    (tmp_path / "out.png").write_bytes(b"x")
    code, _, err = cli(capsys, tmp_path / "a.png", tmp_path / "b.png", "-o", tmp_path / "out.png")
    assert code == 2 and "inputs are several files: give a folder" in err


def test_outputs_get_normal_file_permissions(tmp_path, capsys, shipped):
    """Atomic writes go through a 0600 temp file; the output must still be readable as a plain write's is."""
    src = tmp_path / "in.png"
    Image.fromarray(pixels(6, 5, 3)).save(src)
    assert run(["upscale", str(src), "--scale", "2", "--device", "cpu"]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "in_x2.png").stat().st_mode & 0o777 == 0o666 & ~umask
