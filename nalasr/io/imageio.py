"""Image files in and out: read by content, keep bit depth, channels, alpha and metadata where the format can.

In memory an image is a :class:`Picture`: an (H, W, C) uint8 or uint16 array with C = 1 (gray),
2 (gray + alpha), 3 (RGB) or 4 (RGBA), plus the ICC profile and EXIF block to carry to the output.

Pillow does the work, except for 16-bit colour (RGB, RGBA, gray + alpha), which Pillow can only hold at
8 bits: those PNG/TIFF files are decoded and encoded with OpenCV so 16-bit in stays 16-bit out; and 8-bit
PNG output, which :mod:`.png` encodes on threads.
Every failure to read a file is an :class:`InputError` naming the file; nothing else escapes the decoders.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from ..errors import InputError
# Defined in defaults.py and formats.py (imported without numpy/cv2); re-exported here for the rest of the code.
from .defaults import DEFAULT_MAX_PIXELS, DEFAULT_PNG_COMPRESSION, DEFAULT_QUALITY
from .formats import EXTENSIONS, FORMATS, check_regular_file, check_regular_mode
from .fsutil import atomic_path
from .png import encode_png

_SUPPORTED = "PNG, JPEG, WebP, TIFF or BMP"
_NAMES = {"PNG": "PNG", "JPEG": "JPEG", "WEBP": "WebP", "TIFF": "TIFF", "BMP": "BMP"}  # for messages
_PIL_LOCK = threading.Lock()  # Image.MAX_IMAGE_PIXELS is process-global

# Pillow mode → the mode our arrays use (8-bit). Modes not listed are refused.
_MODES_8BIT = {
    "1": "L", "L": "L", "LA": "LA", "La": "LA", "P": "RGB", "PA": "RGBA",
    "RGB": "RGB", "RGBX": "RGB", "RGBA": "RGBA", "RGBa": "RGBA", "CMYK": "RGB", "YCbCr": "RGB",
}
_MODES_16BIT = ("I;16", "I;16L", "I;16B", "I;16N")
# TIFF tags that describe the pixel layout of *this* file: never carried as EXIF to another file.
_TIFF_LAYOUT_TAGS = frozenset({
    254, 255, 256, 257, 258, 259, 262, 266, 273, 277, 278, 279, 280, 281, 284, 290, 291, 292, 293, 317,
    320, 322, 323, 324, 325, 330, 338, 339, 340, 341, 347, 530, 531, 532, 34675,
})
_ORIENTATION = 0x0112


@dataclass
class Picture:
    """Decoded pixels plus what is carried to the output."""

    pixels: np.ndarray  # (H, W, C) uint8 or uint16; C: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
    format: str | None = None  # format it was read from: a key of FORMATS
    icc: bytes | None = None
    exif: bytes | None = None  # orientation already applied, so the tag is removed
    notes: list[str] = field(default_factory=list)  # what reading changed, for the report

    @property
    def size(self) -> tuple[int, int]:
        """(width, height)."""
        return self.pixels.shape[1], self.pixels.shape[0]

    @property
    def channels(self) -> int:
        return self.pixels.shape[2]

    @property
    def bits(self) -> int:
        return 16 if self.pixels.dtype == np.uint16 else 8

    def describe(self) -> str:
        kind = {1: "gray", 2: "gray+alpha", 3: "RGB", 4: "RGBA"}[self.channels]
        return f"{kind} {self.bits}-bit"


# ------------------------------------------------------------------------------------------------ reading


def read_image(path: str | os.PathLike, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Picture:
    """Read an image file by its content (the extension is not trusted). InputError names the file."""
    path = Path(path)
    check_regular_file(path)  # before opening: opening a FIFO blocks until a writer comes, a device may never end
    try:
        # O_NONBLOCK: should a FIFO be put in its place after the check, the open still returns at once, and
        # the fstat below refuses it. For a regular file the flag changes nothing.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"{path}: broken symbolic link (to {os.readlink(path)}); nothing to read") from None
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not an image file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        check_regular_mode(path, st.st_mode)
        if st.st_size == 0:
            raise InputError(f"{path}: empty file; expected a {_SUPPORTED} image")
        return _decode(f, str(path), max_pixels)


def decode_image(data: bytes, *, name: str = "<bytes>", max_pixels: int = DEFAULT_MAX_PIXELS) -> Picture:
    """Decode image bytes (what :func:`read_image` does after opening the file)."""
    if not data:
        raise InputError(f"{name}: empty file; expected a {_SUPPORTED} image")
    return _decode(io.BytesIO(data), name, max_pixels)


def _decode(fp: BinaryIO, name: str, max_pixels: int) -> Picture:
    try:
        with _pil_limits(max_pixels):
            im = Image.open(fp, formats=list(FORMATS))
    except Image.DecompressionBombError as e:  # over twice Pillow's own limit: it refuses before we can look
        count = re.search(r"\((\d+) pixels\)", str(e))
        raise InputError(_bomb_message(name, int(count.group(1)) if count else None, max_pixels)) from None
    except UnidentifiedImageError:
        dims = _png_header_size(fp)
        if dims is not None and 0 in dims:  # Pillow refuses a PNG of no pixels as "unidentified"
            raise InputError(f"{name}: image has no pixels ({dims[0]}x{dims[1]} in its PNG header)") from None
        raise InputError(f"{name}: not an image, or not one in a supported format ({_SUPPORTED})") from None
    except Exception as e:  # a plugin's header parser failing on bad bytes (any type): the file is bad
        raise InputError(_corrupt_message(name, e)) from None
    with im:
        w, h = im.size
        if w * h > max_pixels:  # checked before any pixel is decoded
            raise InputError(_bomb_message(name, w * h, max_pixels, f"{w}x{h} = "))
        if w < 1 or h < 1:
            raise InputError(f"{name}: image has no pixels ({w}x{h})")
        fmt = "JPEG" if im.format == "MPO" else im.format
        try:
            # Pillow's decoders raise many undocumented exception types on malformed data (OSError,
            # SyntaxError, ValueError, struct.error, IndexError, ...): all of them mean "bad file".
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "possibly corrupt EXIF" etc.: we report what matters
                pixels, notes = _pixels(im, fp, w, h)
                icc = im.info.get("icc_profile") or None
                frames = getattr(im, "n_frames", 1)  # TIFF counts by walking its IFDs: may fail too
        except InputError as e:
            raise InputError(f"{name}: {e}") from None
        except Exception as e:
            raise InputError(_corrupt_message(name, e)) from None
        if frames > 1:
            notes.append(f"{frames} frames or pictures in the file: the first is used")
        orientation, exif = _exif(im, fmt, notes)
    pixels = _orient(pixels, orientation)
    if icc is not None and not icc_fits(icc, pixels.shape[2]):
        notes.append(f"ICC profile ({_icc_space(icc)}) dropped: it does not describe {_kind(pixels.shape[2])} pixels")
        icc = None
    return Picture(np.ascontiguousarray(pixels), fmt, icc, exif, notes)


def _png_header_size(fp: BinaryIO) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR, or None if ``fp`` does not start like a PNG."""
    try:
        fp.seek(0)
        head = fp.read(24)
    except (OSError, ValueError):
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@contextlib.contextmanager
def _pil_limits(max_pixels: int) -> Iterator[None]:
    """Let Pillow open images up to ``max_pixels`` (its own guard errors at 2x its limit) without warnings.

    The pixel limit itself is checked by us right after the header is read.
    """
    with _PIL_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bomb warnings, "corrupt EXIF", "tag data larger than file": we judge
        old = Image.MAX_IMAGE_PIXELS
        if old is not None and max_pixels > old:
            Image.MAX_IMAGE_PIXELS = max_pixels
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = old


def _pixels(im: Image.Image, fp: BinaryIO, w: int, h: int) -> tuple[np.ndarray, list[str]]:
    """Decode ``im`` to an (H, W, C) array; notes say what was converted."""
    deep = _deep_colour(im, fp)
    im.load()  # also for 16-bit colour: a corrupt file then fails here, the same way as every other file
    if deep:
        return _decode_cv2(fp, w, h, gray_alpha=deep == "gray+alpha"), []
    return pil_to_array(im)


def pil_to_array(im: Image.Image) -> tuple[np.ndarray, list[str]]:
    """A loaded PIL image as an (H, W, C) uint8/uint16 array, with notes on any conversion made."""
    mode = im.mode
    notes: list[str] = []
    if mode in _MODES_16BIT:
        return np.asarray(im).astype(np.uint16)[..., None], notes
    if mode == "I":  # 32-bit integer: 16-bit data in Pillow's older representation is fine
        a = np.asarray(im)
        if a.size and (a.min() < 0 or a.max() > 65535):
            raise InputError("32-bit integer pixels are not supported; convert the image to 8 or 16 bits")
        return a.astype(np.uint16)[..., None], notes
    if mode not in _MODES_8BIT:
        raise InputError(f"pixel mode {mode} is not supported; convert the image to 8/16-bit gray or RGB(A)")
    target = _MODES_8BIT[mode]
    transparent = im.info.get("transparency") is not None
    if mode == "P" and (transparent or (im.palette is not None and im.palette.mode == "RGBA")):
        target = "RGBA"
    elif mode in ("L", "RGB") and transparent:  # a tRNS colour key becomes a real alpha channel
        target = "LA" if mode == "L" else "RGBA"
    if mode in ("P", "PA"):
        notes.append(f"palette image converted to {target}")
    elif mode == "CMYK":
        notes.append("CMYK converted to RGB without colour management")
    elif mode == "1":
        notes.append("1-bit image converted to 8-bit gray")
    arr = np.asarray(im if mode == target else im.convert(target))
    return (arr[..., None] if arr.ndim == 2 else arr), notes


def _deep_colour(im: Image.Image, fp: BinaryIO) -> str | None:
    """"colour" or "gray+alpha" for 16-bit PNG/TIFF that Pillow would cut to 8 bits, else None."""
    if im.mode not in ("RGB", "RGBA", "RGBX", "LA"):
        return None
    if im.format == "PNG":
        fp.seek(0)
        head = fp.read(26)  # signature, IHDR length and type, width, height, bit depth, colour type
        if len(head) == 26 and head[24] == 16:
            return "gray+alpha" if head[25] == 4 else "colour"  # Pillow calls 16-bit gray+alpha "RGBA"
        return None
    if im.format == "TIFF":
        bits = im.tag_v2.get(258, (8,))
        bits = bits if isinstance(bits, tuple) else (bits,)
        if max(bits) == 16:
            return "gray+alpha" if im.mode == "LA" else "colour"
    return None


def _decode_cv2(fp: BinaryIO, w: int, h: int, *, gray_alpha: bool) -> np.ndarray:
    fp.seek(0)
    buf = np.frombuffer(fp.read(), np.uint8)
    with _quiet_opencv():
        a = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)  # BGR(A) or gray; ignores EXIF orientation
    if a is None or a.shape[:2] != (h, w) or a.dtype not in (np.uint8, np.uint16):
        raise ValueError("the 16-bit decoder could not read the pixel data")
    if a.ndim == 2:
        a = a[..., None]
    if gray_alpha:  # OpenCV expands gray + alpha to BGRA: keep one gray channel
        return a[..., [0, 3]] if a.shape[2] == 4 else a
    if a.shape[2] == 3:
        return a[..., ::-1]
    if a.shape[2] == 4:
        return a[..., [2, 1, 0, 3]]
    return a


@contextlib.contextmanager
def _quiet_opencv() -> Iterator[None]:
    """OpenCV logs its own decoding problems to stderr; ours is the one-line InputError."""
    log = getattr(getattr(cv2, "utils", None), "logging", None)
    if log is None or not hasattr(log, "getLogLevel"):
        yield
        return
    level = log.getLogLevel()
    log.setLogLevel(log.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        log.setLogLevel(level)


def _exif(im: Image.Image, fmt: str, notes: list[str]) -> tuple[int, bytes | None]:
    """(orientation 1..8, EXIF bytes to carry without the orientation tag). Bad EXIF is dropped, not fatal."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exif = im.getexif()
            orientation = exif.get(_ORIENTATION, 1)
            orientation = orientation if isinstance(orientation, int) and 1 <= orientation <= 8 else 1
            exif.pop(_ORIENTATION, None)
            if fmt == "TIFF":  # a TIFF's "EXIF" is its whole first IFD, strip layout included
                for tag in _TIFF_LAYOUT_TAGS & set(exif):
                    del exif[tag]
            data = exif.tobytes() if len(exif) else None
    except Exception:  # unreadable metadata should not cost the user the picture
        notes.append("EXIF metadata unreadable: ignored")
        return 1, None
    return orientation, data


def _orient(a: np.ndarray, orientation: int) -> np.ndarray:
    """Apply an EXIF orientation (same result as PIL.ImageOps.exif_transpose) to an (H, W, C) array."""
    if orientation == 2:
        return a[:, ::-1]
    if orientation == 3:
        return a[::-1, ::-1]
    if orientation == 4:
        return a[::-1]
    if orientation == 5:
        return a.transpose(1, 0, 2)
    if orientation == 6:
        return np.rot90(a, -1)
    if orientation == 7:
        return a[::-1, ::-1].transpose(1, 0, 2)
    if orientation == 8:
        return np.rot90(a, 1)
    return a


def _icc_space(icc: bytes) -> str:
    return icc[16:20].decode("latin-1").strip() if len(icc) >= 20 else "?"


def icc_fits(icc: bytes, channels: int) -> bool:
    return _icc_space(icc) == ("GRAY" if channels <= 2 else "RGB")


def _kind(channels: int) -> str:
    return "gray" if channels <= 2 else "RGB"


def _bomb_message(name: str, pixels: int | None, max_pixels: int, dims: str = "") -> str:
    what = f"{dims}{pixels:,} pixels" if pixels is not None else "the image size"
    return f"{name}: {what} is over the limit of {max_pixels:,} pixels (decompression-bomb guard); " \
           f"raise --max-pixels if you trust this file"


def _corrupt_message(name: str, e: BaseException) -> str:
    detail = str(e).strip().splitlines()
    reason = detail[0][:160] if detail else type(e).__name__
    return f"{name}: corrupt or truncated image ({reason}); re-export or replace the file"


# ------------------------------------------------------------------------------------------------ writing


def format_for_path(path: str | os.PathLike) -> str:
    """The format an output path asks for, by its extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise InputError(f"{path}: unknown image extension {suffix or '(none)'!r}; use one of {', '.join(EXTENSIONS)}")
    return EXTENSIONS[suffix]


def normalise_ext(ext: str) -> str:
    """'png', '.PNG' → '.png'; InputError for an extension we cannot write."""
    suffix = "." + ext.lower().lstrip(".")
    if suffix not in EXTENSIONS:
        raise InputError(f"unknown --ext {ext!r}: use one of {', '.join(s[1:] for s in EXTENSIONS)}")
    return suffix


def write_image(
    path: str | os.PathLike,
    picture: Picture,
    *,
    format: str | None = None,
    quality: int = DEFAULT_QUALITY,
    png_compression: int = DEFAULT_PNG_COMPRESSION,
    overwrite: bool = False,
) -> list[str]:
    """Encode ``picture`` (format from the extension unless given) and write it atomically.

    ``png_compression`` is the zlib level (0-9) of a PNG output; see :func:`encode_image`.
    With ``overwrite=False`` an existing file is never replaced (FileExistsError). Returns notes on what the
    format could not hold (alpha, 16 bits, metadata).

    Pillow's encoders write straight into the temporary file: given a file, Pillow releases the GIL while it
    encodes, and given a BytesIO it holds the GIL throughout, so a folder job's writer threads would take turns
    (a 4K JPEG at quality 95: a Python thread beside the encoder ran at 0.50 of its speed into BytesIO and 1.07
    into a file; ``benchmarks/results/gil_encode_cpu.md``). The bytes are the same either way.
    """
    job = _EncodeJob.prepare(picture, format or format_for_path(path), quality, png_compression)
    with atomic_path(path, overwrite=overwrite) as tmp, open(tmp, "wb") as f:
        job.run(f)
    return job.notes


def encode_image(
    picture: Picture,
    format: str,
    *,
    quality: int = DEFAULT_QUALITY,
    png_compression: int = DEFAULT_PNG_COMPRESSION,
) -> tuple[bytes, list[str]]:
    """Encode to bytes in ``format`` (a key of FORMATS). Returns (bytes, notes).

    ``quality`` (1-100) is for JPEG and WebP; ``png_compression`` (zlib level 0-9: 0 stores, 1 is fastest,
    9 smallest) for PNG: 8-bit through :func:`nalasr.io.png.encode_png` (Up filter, bands deflated on threads;
    the pixels Pillow would write, in other bytes), 16-bit gray through Pillow's ``compress_level`` and 16-bit
    colour through OpenCV's ``IMWRITE_PNG_COMPRESSION``. Both are checked whatever the format, so a bad value
    fails the same way for every output. To write a file, :func:`write_image` is faster from threads.
    """
    job = _EncodeJob.prepare(picture, format, quality, png_compression)
    buf = io.BytesIO()
    job.run(buf)
    return buf.getvalue(), job.notes


@dataclass
class _EncodeJob:
    """What to encode, checked and converted to what the format holds, before any file is opened."""

    a: np.ndarray  # (H, W, C) uint8/uint16, channels the format can hold
    format: str
    icc: bytes | None
    exif: bytes | None
    quality: int
    png_compression: int
    notes: list[str]

    @classmethod
    def prepare(cls, picture: Picture, format: str, quality: int, png_compression: int) -> "_EncodeJob":
        if format not in FORMATS:
            raise InputError(f"cannot write format {format!r}; use one of {', '.join(FORMATS)}")
        if not 1 <= quality <= 100:
            raise InputError(f"--quality must be between 1 and 100, got {quality}")
        if isinstance(png_compression, bool) or not isinstance(png_compression, (int, np.integer)) \
                or not 0 <= png_compression <= 9:
            raise InputError(f"--png-compression must be between 0 (fastest) and 9 (smallest), got {png_compression!r}")
        a, notes = _fit(picture.pixels, format)
        icc, exif = picture.icc, picture.exif
        if format == "BMP":
            if icc or exif:
                notes.append("BMP cannot hold ICC/EXIF metadata: not written")
            icc = exif = None
        if icc is not None and not icc_fits(icc, a.shape[2]):
            notes.append(f"ICC profile ({_icc_space(icc)}) dropped: the {_NAMES[format]} output is {_kind(a.shape[2])}")
            icc = None
        return cls(a, format, icc, exif, quality, int(png_compression), notes)

    def run(self, fp: BinaryIO) -> None:
        """Write the encoded file to ``fp`` (empty, seekable); notes on what was dropped go to ``self.notes``."""
        a, format = self.a, self.format
        if a.dtype == np.uint16 and a.shape[2] in (3, 4):
            fp.write(_encode_cv2(a, format, self.icc, self.exif, self.notes, self.png_compression))
            return
        if format == "PNG" and a.dtype == np.uint8:  # banded deflate on threads: see nalasr.io.png for why
            fp.write(encode_png(a, self.png_compression, self.icc, self.exif))
            return
        im = Image.fromarray(a[..., 0] if a.shape[2] == 1 else a)
        kwargs: dict = {}
        if self.icc:
            kwargs["icc_profile"] = self.icc
        if self.exif:
            kwargs["exif"] = self.exif
        if format in ("JPEG", "WEBP"):
            kwargs["quality"] = self.quality
        if format == "PNG":
            kwargs["compress_level"] = self.png_compression
        if format == "TIFF":
            kwargs["compression"] = "tiff_adobe_deflate"  # lossless and much smaller than raw
        try:
            im.save(fp, format=format, **kwargs)
        except (ValueError, OSError) as e:
            # EXIF read from a damaged file can hold a tag the encoder refuses (libtiff: "Tag value does not match
            # libtiff field definition"); the pixels are still good, so they are written without it.
            if "exif" not in kwargs:
                raise
            del kwargs["exif"]
            self.notes.append(f"EXIF metadata dropped: the {_NAMES[format]} encoder refused it ({e})")
            fp.seek(0)
            fp.truncate()
            im.save(fp, format=format, **kwargs)


def _fit(a: np.ndarray, format: str) -> tuple[np.ndarray, list[str]]:
    """Convert channels/bit depth to what ``format`` can hold; notes say what was lost."""
    notes: list[str] = []
    c = a.shape[2]
    if format in ("JPEG", "WEBP", "BMP") and a.dtype == np.uint16:
        a = np.rint(a / 257.0).astype(np.uint8)
        notes.append(f"{_NAMES[format]} holds 8 bits per channel: written as 8-bit")
    if format in ("JPEG", "BMP") and c in (2, 4):
        a = a[..., : c - 1]
        notes.append(f"{_NAMES[format]} cannot hold alpha: transparency dropped")
    elif format == "WEBP" and c in (1, 2):
        a = np.concatenate([a[..., :1]] * 3 + ([a[..., 1:]] if c == 2 else []), axis=2)
        notes.append("WebP has no grayscale: written as RGB")
    elif format in ("PNG", "TIFF") and c == 2 and a.dtype == np.uint16:
        # Neither Pillow nor OpenCV writes 16-bit gray + alpha: keep the 16 bits, spend two extra channels.
        a = np.concatenate([a[..., :1]] * 3 + [a[..., 1:]], axis=2)
        notes.append(f"16-bit gray+alpha written as 16-bit RGBA ({format} writers here lack gray+alpha at 16 bits)")
    return np.ascontiguousarray(a), notes


def _encode_cv2(
    a: np.ndarray, format: str, icc: bytes | None, exif: bytes | None, notes: list[str], png_compression: int
) -> bytes:
    """16-bit RGB(A) PNG/TIFF through OpenCV (Pillow holds colour at 8 bits only).

    For PNG the zlib level is always given: OpenCV's unset default is its own (Z_RLE strategy, which no
    level reproduces), and setting the level selects zlib's default strategy, as Pillow uses.
    """
    bgr = np.ascontiguousarray(a[..., ::-1] if a.shape[2] == 3 else a[..., [2, 1, 0, 3]])
    ext = FORMATS[format]
    meta_types, meta = [], []
    if format == "PNG":  # OpenCV writes metadata chunks for PNG only
        for kind, blob in ((cv2.IMAGE_METADATA_ICCP, icc), (cv2.IMAGE_METADATA_EXIF, exif)):
            if blob:
                meta_types.append(kind)
                meta.append(np.frombuffer(blob, np.uint8))
    elif icc or exif:
        notes.append("16-bit colour TIFF is written without ICC/EXIF (the 16-bit writer has no metadata support)")
    params = [cv2.IMWRITE_PNG_COMPRESSION, png_compression] if format == "PNG" else []
    if meta:
        ok, buf = cv2.imencodeWithMetadata(ext, bgr, meta_types, meta, params)
    else:
        ok, buf = cv2.imencode(ext, bgr, params)
    if not ok:
        raise InputError(f"could not encode a {a.shape[1]}x{a.shape[0]} 16-bit image as {format}")
    return buf.tobytes()


def array_to_pil(a: np.ndarray) -> Image.Image:
    """(H, W, C) uint8/uint16 → L, LA, RGB, RGBA or I;16 (16-bit colour cannot be a PIL image: error)."""
    c = a.shape[2]
    if a.dtype == np.uint16 and c != 1:
        raise InputError("PIL holds 16-bit pixels only for grayscale; pass a numpy array for 16-bit colour")
    return Image.fromarray(np.ascontiguousarray(a[..., 0] if c == 1 else a))
