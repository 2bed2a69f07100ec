"""Small images generated in the tests (never read from disk): arrays, encoded bytes, metadata."""

from __future__ import annotations

import functools
import io
import struct
import zlib

import cv2
import numpy as np
from PIL import Image, ImageCms


def pixels(h: int, w: int, c: int, dtype: type = np.uint8, seed: int = 0) -> np.ndarray:
    """Random (H, W, C) pixels using the full range of ``dtype``."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(dtype).max + 1, size=(h, w, c), dtype=np.int64).astype(dtype)


def encode(a: np.ndarray, fmt: str, **kwargs) -> bytes:
    """Encode (H, W, C) pixels with Pillow, or OpenCV for 16-bit colour (Pillow cannot hold it)."""
    if a.dtype == np.uint16 and a.shape[2] in (3, 4):
        bgr = a[..., ::-1] if a.shape[2] == 3 else a[..., [2, 1, 0, 3]]
        ok, buf = cv2.imencode({"PNG": ".png", "TIFF": ".tif"}[fmt], np.ascontiguousarray(bgr))
        assert ok
        return buf.tobytes()
    im = Image.fromarray(a[..., 0] if a.shape[2] == 1 else a)
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def png(width: int, height: int, bit_depth: int, colour_type: int, raw: bytes, *, compress: bool = True) -> bytes:
    """A PNG assembled chunk by chunk: for layouts neither Pillow nor OpenCV writes (16-bit gray + alpha)
    and for headers that lie (a decompression bomb's huge IHDR over a tiny IDAT)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0)
    idat = zlib.compress(raw, 9) if compress else raw
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def png_gray_alpha16(a: np.ndarray) -> bytes:
    """(H, W, 2) uint16 → a 16-bit gray + alpha PNG (colour type 4)."""
    h, w, _ = a.shape
    be = a.astype(">u2")
    return png(w, h, 16, 4, b"".join(b"\x00" + be[y].tobytes() for y in range(h)))


def bomb_png(width: int, height: int) -> bytes:
    """A 1-bit gray PNG whose header claims width x height over a few KB of data (at most 500 rows are
    stored: Pillow fills missing rows with zeros, and a refused bomb is never decoded anyway)."""
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    return png(width, height, 1, 0, zlib.compress(row * min(height, 500), 9), compress=False)


def exif_bytes(orientation: int | None = None, description: str = "nalasr test") -> bytes:
    exif = Image.Exif()
    exif[0x010E] = description  # ImageDescription: a tag that must be carried to the output
    if orientation is not None:
        exif[0x0112] = orientation
    return exif.tobytes()


def exif_libtiff_refuses() -> bytes:
    """EXIF as a damaged file can carry it (found by test_fuzz_imageio): tag 0x0120 as a LONG, which libtiff
    refuses when the TIFF writer turns EXIF into tags."""
    return (b"Exif\x00\x00II*\x00\x08\x00\x00\x00\x01\x00"  # one IFD entry:
            b" \x01\x04\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00")  # 0x0120, LONG, 1 value


@functools.cache  # the profile embeds its creation time: build it once so copies compare equal
def srgb_icc() -> bytes:
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def palette_image(h: int, w: int, *, transparency: bool) -> Image.Image:
    """A P-mode image with 4 colours; with ``transparency`` colour 0 is clear and colour 1 half-transparent."""
    idx = (np.arange(h * w).reshape(h, w) % 4).astype(np.uint8)
    im = Image.frombytes("P", (w, h), idx.tobytes())
    im.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0])
    if transparency:
        im.info["transparency"] = bytes([0, 128, 255, 255])
    return im


PALETTE_RGB = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]], np.uint8)
PALETTE_ALPHA = np.array([0, 128, 255, 255], np.uint8)


def smooth_image(h: int, w: int, seed: int) -> np.ndarray:
    """(H, W, 3) uint8 with structure at several scales (something a model can learn from)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    out = np.zeros((h, w, 3))
    for _ in range(6):
        f, ph = rng.uniform(1, 12, size=2), rng.uniform(0, 2 * np.pi, size=3)
        out += np.sin(2 * np.pi * (f[0] * x + f[1] * y)[..., None] + ph) * rng.uniform(10, 40)
    return np.clip(out + 128 + rng.normal(0, 4, size=out.shape), 0, 255).astype(np.uint8)
