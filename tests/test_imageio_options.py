"""PNG compression as a choice (issue 38 item 2) and the read path's refusals of non-regular files (issue 39)."""

from __future__ import annotations

import io
import os
import socket
import stat
import subprocess
import sys
import threading

import cv2
import numpy as np
import pytest
from imagegen import exif_bytes, exif_libtiff_refuses, pixels, png, srgb_icc
from PIL import Image

from nalasr.errors import InputError
from nalasr.io import defaults, imageio
from nalasr.io.imageio import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_PNG_COMPRESSION,
    DEFAULT_QUALITY,
    Picture,
    decode_image,
    encode_image,
    read_image,
    write_image,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs, devices and sockets are POSIX files")


def _smooth(h: int, w: int, c: int, dtype=np.uint8) -> np.ndarray:
    """A gradient with a little noise: compresses like a photograph, so the levels give different sizes."""
    top = np.iinfo(dtype).max
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 3 + y * 2)[..., None] + np.arange(c)[None, None] * 17
    noise = np.random.default_rng(c).integers(0, 4, size=(h, w, c))
    return ((base * (top // 400) + noise) % (top + 1)).astype(dtype)


def _old_pillow_png(a: np.ndarray, icc: bytes | None, exif: bytes | None, level: int) -> bytes:
    """What the writer did before nalasr.io.png: Pillow's save at zlib ``level``."""
    kwargs = {k: v for k, v in (("icc_profile", icc), ("exif", exif), ("compress_level", level)) if v is not None}
    buf = io.BytesIO()
    Image.fromarray(a[..., 0] if a.shape[2] == 1 else a).save(buf, format="PNG", **kwargs)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------ defaults


def test_defaults_live_in_a_module_without_heavy_imports():
    assert (DEFAULT_MAX_PIXELS, DEFAULT_QUALITY, DEFAULT_PNG_COMPRESSION) == (
        defaults.DEFAULT_MAX_PIXELS, defaults.DEFAULT_QUALITY, defaults.DEFAULT_PNG_COMPRESSION)
    assert 0 <= DEFAULT_PNG_COMPRESSION <= 9 and type(DEFAULT_PNG_COMPRESSION) is int
    code = "import sys, nalasr.io.defaults; print(sorted({'numpy', 'cv2', 'torch', 'PIL'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr  # --help imports it


def test_write_image_uses_the_default_level(tmp_path):
    a = _smooth(40, 50, 3)
    write_image(tmp_path / "x.png", Picture(a))
    assert (tmp_path / "x.png").read_bytes() == encode_image(Picture(a), "PNG",
                                                             png_compression=DEFAULT_PNG_COMPRESSION)[0]


# ------------------------------------------------------------------------------------------ PNG levels


@pytest.mark.parametrize("c", [1, 2, 3, 4])
@pytest.mark.parametrize("level", [0, 2, 6, 9])
def test_8bit_png_holds_what_pillows_writer_holds(tmp_path, c, level):
    """The banded encoder (nalasr.io.png) writes other bytes than Pillow did before it, never other pixels or
    metadata, and about the same size at each level (Up filter against Pillow's per-row choice)."""
    a = _smooth(48, 64, c)
    icc = srgb_icc() if c >= 3 else None
    pic = Picture(a, icc=icc, exif=exif_bytes())
    ours = encode_image(pic, "PNG", png_compression=level)[0]
    old = _old_pillow_png(a, icc, exif_bytes(), level)
    back, before = decode_image(ours), decode_image(old)
    np.testing.assert_array_equal(back.pixels, before.pixels)
    assert (back.icc, back.exif) == (before.icc, before.exif) and back.exif
    if level:
        assert 0.8 < len(ours) / len(old) < 1.25
    write_image(tmp_path / "x.png", pic, png_compression=level)
    assert (tmp_path / "x.png").read_bytes() == ours


def test_the_level_reaches_zlib():
    a = _smooth(64, 80, 3)
    sizes = [len(encode_image(Picture(a), "PNG", png_compression=level)[0]) for level in (0, 1, 9)]
    assert sizes[0] > sizes[1] > sizes[2]


@pytest.mark.parametrize("c,dtype", [(1, np.uint8), (3, np.uint8), (4, np.uint8),
                                     (1, np.uint16), (2, np.uint16), (3, np.uint16), (4, np.uint16)])
@pytest.mark.parametrize("level", [0, 1, 9])
def test_png_round_trip_at_levels(tmp_path, c, dtype, level):
    a = _smooth(33, 47, c, dtype)
    path = tmp_path / f"x{level}.png"
    notes = write_image(path, Picture(a, icc=srgb_icc() if c >= 3 else None), png_compression=level)
    back = read_image(path)
    assert back.bits == (16 if dtype == np.uint16 else 8)
    expected = a[..., [0, 0, 0, 1]] if (c == 2 and dtype == np.uint16) else a  # 16-bit gray+alpha → RGBA, noted
    np.testing.assert_array_equal(back.pixels, expected)
    assert bool(notes) == (c == 2 and dtype == np.uint16)
    if c >= 3:
        assert back.icc == srgb_icc()


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_higher_levels_are_smaller(dtype):
    pic = Picture(_smooth(96, 128, 3, dtype))
    size = {lv: len(encode_image(pic, "PNG", png_compression=lv)[0]) for lv in (0, 1, 9)}
    assert size[0] > size[1] >= size[9]
    assert size[0] > pic.pixels.nbytes  # level 0 stores the filtered rows: no smaller than the raw pixels


def test_16bit_level_reaches_opencv():
    a = _smooth(40, 30, 3, np.uint16)
    for level in (0, 1, 9):
        ok, buf = cv2.imencode(".png", np.ascontiguousarray(a[..., ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, level])
        assert ok and encode_image(Picture(a), "PNG", png_compression=level)[0] == buf.tobytes()


def test_16bit_level_with_metadata():
    a = _smooth(20, 24, 4, np.uint16)
    pic = Picture(a, icc=srgb_icc(), exif=exif_bytes())
    small, large = (encode_image(pic, "PNG", png_compression=lv)[0] for lv in (9, 0))
    assert len(small) < len(large)
    for data in (small, large):
        back = decode_image(data)
        np.testing.assert_array_equal(back.pixels, a)
        assert back.icc == srgb_icc() and back.exif


@pytest.mark.parametrize("bad", [-1, 10, 100, 1.5, 6.0, True, "6", None])
def test_png_compression_out_of_range_is_an_input_error(tmp_path, bad):
    pic = Picture(pixels(4, 4, 3))
    with pytest.raises(InputError, match="png-compression"):
        encode_image(pic, "PNG", png_compression=bad)
    with pytest.raises(InputError, match="png-compression"):  # checked for every format, like --quality
        encode_image(pic, "JPEG", png_compression=bad)
    with pytest.raises(InputError, match="png-compression"):
        write_image(tmp_path / "x.png", pic, png_compression=bad)
    assert os.listdir(tmp_path) == []


def test_png_compression_accepts_numpy_integers():
    pic = Picture(pixels(4, 4, 3))
    assert encode_image(pic, "PNG", png_compression=np.int64(1))[0] == encode_image(pic, "PNG", png_compression=1)[0]


def test_png_compression_does_not_change_other_formats():
    pic = Picture(_smooth(24, 24, 3))
    for fmt in ("JPEG", "WEBP", "TIFF", "BMP"):
        assert encode_image(pic, fmt, png_compression=0)[0] == encode_image(pic, fmt, png_compression=9)[0]


# ------------------------------------------------------------------------------------------ write path
# write_image hands Pillow the open temporary file (Pillow releases the GIL only then; benchmarks/gil_encode.py),
# encode_image a BytesIO: the two must give the same file.


@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "TIFF", "BMP", "PNG"])
@pytest.mark.parametrize("c,dtype", [(1, np.uint8), (3, np.uint8), (4, np.uint8), (1, np.uint16), (3, np.uint16)])
def test_the_written_file_is_the_encoded_bytes(tmp_path, fmt, c, dtype):
    pic = Picture(_smooth(37, 53, c, dtype), icc=srgb_icc() if c >= 3 else None, exif=exif_bytes())
    kw = {"quality": 83, "png_compression": 3}
    data, notes = encode_image(pic, fmt, **kw)
    path = tmp_path / f"x{imageio.FORMATS[fmt]}"
    assert write_image(path, pic, **kw) == notes
    assert path.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it


def test_an_exif_retry_rewrites_the_file_from_its_start(tmp_path):
    """The TIFF encoder refuses this EXIF (see test_imageio) after writing part of the file: the retry must not
    leave those bytes in front of the file it writes."""
    bad_exif = exif_libtiff_refuses()
    a = _smooth(20, 30, 3)
    notes = write_image(tmp_path / "x.tif", Picture(a, exif=bad_exif))
    assert any("EXIF" in n and "dropped" in n for n in notes)
    assert (tmp_path / "x.tif").read_bytes() == encode_image(Picture(a), "TIFF")[0]


@pytest.mark.parametrize("kw,match", [({"quality": 0}, "--quality"), ({"png_compression": 10}, "--png-compression"),
                                      ({"format": "GIF"}, "cannot write format")])
def test_bad_write_options_fail_before_a_file_is_made(tmp_path, kw, match):
    with pytest.raises(InputError, match=match):
        write_image(tmp_path / "x.jpg", Picture(_smooth(8, 8, 3)), **kw)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ read path


@posix_only
@pytest.mark.skipif(not os.path.exists("/dev/urandom"), reason="no /dev/urandom")
def test_a_character_device_is_not_a_regular_file_not_an_empty_one(tmp_path):
    for path in ("/dev/urandom", "/dev/null"):
        with pytest.raises(InputError) as e:
            read_image(path)
        msg = str(e.value)
        assert msg.startswith(f"{path}: ") and "not a regular file" in msg and "character device" in msg
        assert "empty" not in msg
    link = tmp_path / "random.png"
    link.symlink_to("/dev/urandom")  # by a name that looks like an image
    with pytest.raises(InputError, match=r"random\.png: not a regular file \(a character device\)"):
        read_image(link)


def _read_in_thread(path) -> BaseException | None:
    """read_image(path) in a thread; fails the test (not hangs it) if it blocks."""
    result: list = []

    def run():
        try:
            read_image(path)
            result.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            result.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # unblock the reader so the thread ends, then fail
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5)
        pytest.fail(f"read_image({path}) blocked")
    return result[0]


@posix_only
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    e = _read_in_thread(fifo)
    assert isinstance(e, InputError)
    assert str(e) == f"{fifo}: not a regular file (a FIFO); give an image file"


@posix_only
def test_a_fifo_put_in_place_after_the_check_does_not_block(tmp_path, monkeypatch):
    """The type is checked before opening, and again on the open file (opened non-blocking): a race that swaps
    in a FIFO between the two cannot hang the reader."""
    fifo, regular = tmp_path / "pipe.png", tmp_path / "real.png"
    os.mkfifo(fifo)
    regular.write_bytes(b"x")
    real_stat = os.stat
    monkeypatch.setattr(imageio.os, "stat",
                        lambda p, *a, **k: real_stat(regular) if str(p) == str(fifo) else real_stat(p, *a, **k))
    e = _read_in_thread(fifo)
    assert isinstance(e, InputError) and "not a regular file (a FIFO)" in str(e)


@posix_only
def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.png"
    if len(os.fsencode(path)) > 100:
        pytest.skip("path too long for a unix socket")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        with pytest.raises(InputError, match=r"not a regular file \(a socket\)"):
            read_image(path)
    finally:
        s.close()


@posix_only
def test_broken_symlink_says_so(tmp_path):
    link = tmp_path / "gone.png"
    link.symlink_to(tmp_path / "missing.png")
    with pytest.raises(InputError, match=r"gone\.png: broken symbolic link"):
        read_image(link)


def test_a_folder_and_an_empty_file_keep_their_messages(tmp_path):
    with pytest.raises(InputError, match="is a folder, not an image file"):
        read_image(tmp_path)
    (tmp_path / "e.png").write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        read_image(tmp_path / "e.png")


@posix_only
def test_unreadable_file_says_cannot_read(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    path = tmp_path / "locked.png"
    path.write_bytes(png(1, 1, 8, 0, b"\x00\x00"))
    path.chmod(0)
    try:
        with pytest.raises(InputError, match="cannot read"):
            read_image(path)
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize("w,h", [(0, 0), (0, 7), (9, 0)])
def test_png_of_no_pixels_shows_its_real_size(tmp_path, w, h):
    data = png(w, h, 8, 2, b"", compress=True)
    path = tmp_path / "zero.png"
    path.write_bytes(data)
    with pytest.raises(InputError) as e:
        read_image(path)
    assert str(e.value) == f"{path}: image has no pixels ({w}x{h} in its PNG header)"


def test_png_header_size_helper():
    assert imageio._png_header_size(io.BytesIO(png(3, 2, 8, 0, b"\x00abc\x00def"))) == (3, 2)
    assert imageio._png_header_size(io.BytesIO(b"GIF89a" + b"\0" * 30)) is None
    assert imageio._png_header_size(io.BytesIO(b"\x89PNG\r\n\x1a\n")) is None
