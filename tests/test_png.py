"""The banded PNG encoder (nalasr.io.png): exact pixels, a valid stream across bands, bytes independent of threads."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from imagegen import pixels, smooth_image
from PIL import Image

from nalasr.io import png
from nalasr.io.png import adler32_combine, encode_png


def _decode_pil(data: bytes) -> np.ndarray:
    im = Image.open(io.BytesIO(data))
    im.load()
    a = np.asarray(im)
    return a[..., None] if a.ndim == 2 else a


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of each chunk, checking every CRC."""
    assert data[:8] == png.SIGNATURE
    out, i = [], 8
    while i < len(data):
        n = struct.unpack(">I", data[i:i + 4])[0]
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        assert struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0] == zlib.crc32(kind + body)
        out.append((kind, body))
        i += 12 + n
    return out


@pytest.mark.parametrize("h,w,c", [(1, 1, 1), (1, 9, 3), (9, 1, 2), (17, 13, 4), (5, 3, 3)])
@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_small_images_decode_exactly(h, w, c, level):
    a = np.random.default_rng(h * w * c + level).integers(0, 256, (h, w, c), dtype=np.uint8)
    data = encode_png(a, level)
    np.testing.assert_array_equal(_decode_pil(data), a)
    back = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)  # a second, libpng decoder
    back = back[..., None] if back.ndim == 2 else back
    order = {1: [0], 2: [0, 0, 0, 1], 3: [2, 1, 0], 4: [2, 1, 0, 3]}[c]  # OpenCV decodes to BGR(A)
    expect = a[..., order]
    np.testing.assert_array_equal(back, expect)


@pytest.mark.parametrize("level", [0, 2])
def test_many_bands_join_into_one_valid_stream(monkeypatch, level):
    """Bands shrunk to a few rows, odd sizes: the sync-flushed parts and the combined Adler-32 must hold."""
    monkeypatch.setattr(png, "BAND_BYTES", 100)
    a = smooth_image(61, 23, seed=0)
    data = encode_png(a, level)
    idat = b"".join(body for kind, body in _chunks(data) if kind == b"IDAT")
    raw = zlib.decompress(idat)  # checks the zlib header and the Adler-32 of the whole stream
    assert len(raw) == 61 * (23 * 3 + 1)
    np.testing.assert_array_equal(_decode_pil(data), a)


def test_bytes_do_not_depend_on_threads(monkeypatch):
    monkeypatch.setattr(png, "BAND_BYTES", 1000)
    a = pixels(200, 37, 4, seed=3)
    one = encode_png(a, 2, threads=1)
    assert encode_png(a, 2, threads=3) == one == encode_png(a, 2)  # None: the shared pool


def test_writer_threads_share_the_pool(monkeypatch):
    """The pipeline's writers encode at once on one shared pool: each gets its own image back, whole."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(png, "BAND_BYTES", 500)
    images = [smooth_image(90 + 7 * i, 31, seed=i) for i in range(8)]
    alone = [encode_png(a, 1, threads=1) for a in images]
    with ThreadPoolExecutor(8) as writers:
        together = list(writers.map(lambda a: encode_png(a, 1), images))
    assert together == alone


def test_filter_is_up_and_the_header_names_the_level():
    a = smooth_image(30, 20, seed=0)
    for level, flevel in ((1, 0), (2, 1), (6, 2), (9, 3)):
        idat = b"".join(body for kind, body in _chunks(encode_png(a, level)) if kind == b"IDAT")
        assert idat[0] == 0x78 and (idat[0] * 256 + idat[1]) % 31 == 0 and idat[1] >> 6 == flevel
        raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(30, 61)
        assert set(raw[:, 0]) == {png.FILTER_UP}
        np.testing.assert_array_equal(raw[1:, 1:], (a[1:] - a[:-1]).reshape(29, 60))
    raw0 = np.frombuffer(zlib.decompress(b"".join(b for k, b in _chunks(encode_png(a, 0)) if k == b"IDAT")), np.uint8)
    assert set(raw0.reshape(30, 61)[:, 0]) == {png.FILTER_NONE}


def test_metadata_chunks_come_before_the_pixels():
    a = smooth_image(4, 5, seed=0)
    icc, exif = b"\x00" * 128 + b"profile", b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x00"
    kinds = [k for k, _ in _chunks(encode_png(a, 2, icc=icc, exif=exif))]
    assert kinds == [b"IHDR", b"iCCP", b"eXIf", b"IDAT", b"IEND"]
    chunks = dict(_chunks(encode_png(a, 2, icc=icc, exif=exif)))
    name, rest = chunks[b"iCCP"].split(b"\0", 1)
    assert name == b"ICC Profile" and rest[0] == 0 and zlib.decompress(rest[1:]) == icc
    assert chunks[b"eXIf"] == exif[6:]  # PNG's eXIf holds the TIFF block without JPEG's "Exif\0\0"
    im = Image.open(io.BytesIO(encode_png(a, 2, icc=icc)))
    assert im.info["icc_profile"] == icc


def test_adler32_combine_matches_zlib():
    rng = np.random.default_rng(0)
    for n1, n2 in ((1, 1), (5, 70_000), (65_521, 65_521), (3, 2_100_007)):
        x, y = rng.bytes(n1), rng.bytes(n2)
        assert adler32_combine(zlib.adler32(x), zlib.adler32(y), n2) == zlib.adler32(x + y)


@pytest.mark.parametrize("bad", [np.zeros((4, 4, 3), np.uint16), np.zeros((4, 4), np.uint8),
                                 np.zeros((4, 4, 5), np.uint8)])
def test_refuses_what_it_cannot_write(bad):
    with pytest.raises(ValueError, match="uint8"):
        encode_png(bad, 2)
