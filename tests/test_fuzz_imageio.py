"""Property tests of the image loader: malformed bytes give an InputError or a valid image, nothing else.

Valid PNG / JPEG / WebP / TIFF / BMP files (8- and 16-bit, palette, alpha, EXIF, ICC: every decoder path,
OpenCV's included) are mutated by Hypothesis: bytes overwritten, inserted, deleted, duplicated, the file
cut short. Whatever decodes is then encoded again, since a batch writes what it reads. A hang would stall
the run, so a watchdog kills the process with a traceback instead.
"""

from __future__ import annotations

import faulthandler
import io
from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from imagegen import encode, exif_bytes, palette_image, pixels, png_gray_alpha16, srgb_icc

from nalasr.errors import InputError
from nalasr.io.imageio import FORMATS, Picture, decode_image, encode_image, read_image, write_image

MAX_PIXELS = 1 << 16  # mutated headers may claim any size: keep what can be decoded small


def _seeds() -> dict[str, bytes]:
    icc, exif = srgb_icc(), exif_bytes(6)
    buf = io.BytesIO()
    palette_image(6, 7, transparency=True).save(buf, "PNG")
    return {
        "png-rgb8-meta": encode(pixels(6, 7, 3), "PNG", icc_profile=icc, exif=exif),
        "png-palette": buf.getvalue(),
        "png-rgba16": encode(pixels(6, 7, 4, np.uint16), "PNG"),
        "png-la16": png_gray_alpha16(pixels(6, 7, 2, np.uint16)),
        "png-gray16": encode(pixels(6, 7, 1, np.uint16), "PNG"),
        "jpeg-meta": encode(pixels(9, 7, 3), "JPEG", quality=80, icc_profile=icc, exif=exif),
        "jpeg-progressive-gray": encode(pixels(9, 7, 1), "JPEG", progressive=True),
        "webp-lossy": encode(pixels(6, 7, 3), "WEBP", quality=70, exif=exif),
        "webp-lossless-rgba": encode(pixels(6, 7, 4), "WEBP", lossless=True),
        "tiff-rgb8-deflate": encode(pixels(6, 7, 3), "TIFF", compression="tiff_adobe_deflate", exif=exif),
        "tiff-rgb16": encode(pixels(6, 7, 3, np.uint16), "TIFF"),
        "tiff-gray16": encode(pixels(6, 7, 1, np.uint16), "TIFF"),
        "bmp-rgb": encode(pixels(6, 7, 3), "BMP"),
        "bmp-gray": encode(pixels(6, 7, 1), "BMP"),
    }


SEEDS = _seeds()


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    """A decoder stuck in C code cannot be interrupted: dump every stack and exit instead of hanging."""
    faulthandler.dump_traceback_later(300, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@st.composite
def mutated(draw: st.DrawFn, seed: str) -> bytes:
    data = bytearray(SEEDS[seed])
    for _ in range(draw(st.integers(1, 6))):
        n = len(data)
        if n == 0:
            break
        # Headers decide most of what a decoder does: aim half the edits at the first 64 bytes.
        pos = draw(st.one_of(st.integers(0, min(n, 64) - 1), st.integers(0, n - 1)))
        op = draw(st.sampled_from(["set", "set", "insert", "delete", "duplicate", "truncate"]))
        if op == "set":
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 32))]
        elif op == "duplicate":
            data[pos:pos] = data[pos:pos + draw(st.integers(1, 64))]
        else:
            del data[pos:]
    return bytes(data)


def _check_decoded(pic: Picture, fmt_hint: str) -> None:
    a = pic.pixels
    assert isinstance(a, np.ndarray) and a.ndim == 3 and a.flags.c_contiguous
    assert a.dtype in (np.uint8, np.uint16) and a.shape[2] in (1, 2, 3, 4)
    assert 1 <= a.shape[0] * a.shape[1] <= MAX_PIXELS
    assert pic.format in FORMATS
    assert pic.icc is None or isinstance(pic.icc, bytes)
    assert pic.exif is None or isinstance(pic.exif, bytes)
    # What a batch reads it writes: that must not blow up either (InputError is a clean refusal).
    try:
        encode_image(pic, fmt_hint)
    except InputError:
        pass


@pytest.mark.parametrize("seed", list(SEEDS))
def test_seeds_decode(seed):
    """The unmutated seeds are valid, so every mutation starts from a file that exercises a real path."""
    _check_decoded(decode_image(SEEDS[seed], max_pixels=MAX_PIXELS), "PNG")


@pytest.mark.parametrize("seed", list(SEEDS))
@settings(max_examples=150, deadline=timedelta(seconds=10), database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_bytes_give_clean_error_or_valid_image(seed, data):
    blob = data.draw(mutated(seed))
    try:
        pic = decode_image(blob, name="fuzz.bin", max_pixels=MAX_PIXELS)
    except InputError as e:
        assert str(e).startswith("fuzz.bin: ") and "\n" not in str(e)
        return
    _check_decoded(pic, pic.format or "PNG")


@st.composite
def pictures(draw: st.DrawFn) -> tuple[str, np.ndarray]:
    fmt = draw(st.sampled_from(["PNG", "TIFF", "BMP"]))
    dtype = np.uint8 if fmt == "BMP" else draw(st.sampled_from([np.uint8, np.uint16]))
    channels = draw(st.sampled_from([1, 3] if fmt == "BMP" else [1, 2, 3, 4] if dtype == np.uint8 else [1, 3, 4]))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**16))
    return fmt, pixels(h, w, channels, dtype, seed=seed)


@settings(max_examples=60, deadline=timedelta(seconds=10), database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=pictures())
def test_lossless_formats_round_trip_any_shape(tmp_path, case):
    fmt, a = case
    path = tmp_path / f"x{FORMATS[fmt]}"
    assert write_image(path, Picture(a), overwrite=True) == []
    back = read_image(path)
    assert back.format == fmt
    np.testing.assert_array_equal(back.pixels, a)
