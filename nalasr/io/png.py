"""PNG encoding of 8-bit pictures with the deflate split into bands that compress on threads (as pigz does).

Why not Pillow's encoder: it is one thread, and it picks each row's filter by trying all five, so a 4K SR
output at zlib level 2 costs ~0.6 s of one core and an 8K one ~2 s: most of a one-image job's time after
the network. Here every row takes the Up filter (row minus the row above: one numpy subtraction; on photos
the files come out 1-7 % larger than Pillow's at the same level, `benchmarks/results/png_encode.md`),
and the filtered rows are cut into bands of a fixed number of rows. Each band is deflated on its own and
ended with a sync flush, so the bands join into one valid zlib stream, and the Adler-32 checksums of the
bands combine into the stream's. The bands depend on the image alone, so the bytes are the same whatever the
number of threads. No library on the package index does this for PNG (pigz does it for gzip files).

    encode_png(a, level, icc=None, exif=None, threads=None) -> bytes
        a: (H, W, C) uint8, C in 1..4 (gray, gray+alpha, RGB, RGBA); level: zlib level 0-9.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["BAND_BYTES", "adler32_combine", "encode_png"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels → PNG colour type (gray, gray+alpha, RGB, RGBA)
FILTER_NONE, FILTER_UP = 0, 2
# Raw bytes a band holds: bands of 2 MiB cut a 4K RGB image into 12 and an 8K one into 48, enough to keep 16
# cores busy, while a deflate window restarting every 2 MiB costs under 0.1% of the size.
BAND_BYTES = 2 * 2**20
_ADLER_BASE = 65521

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def encode_png(a: np.ndarray, level: int, icc: bytes | None = None, exif: bytes | None = None,
               threads: int | None = None) -> bytes:
    """The PNG file of ``a`` (H, W, C) uint8 at zlib ``level``, with an iCCP and an eXIf chunk when given.

    ``threads``: None deflates the bands on a pool shared by the process (one thread a core), 1 in the
    calling thread; the bytes are the same either way.
    """
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in COLOR_TYPES:
        raise ValueError(f"encode_png takes (H, W, 1-4) uint8, got {a.dtype} {a.shape}")
    h, w, c = a.shape
    rows = np.ascontiguousarray(a).reshape(h, w * c)
    per_band = max(1, BAND_BYTES // (w * c + 1))
    starts = list(range(0, h, per_band))
    last = len(starts) - 1

    def band(i: int) -> tuple[bytes, int, int]:
        """(deflated bytes, Adler-32, raw length) of band i."""
        r0, r1 = starts[i], min(starts[i] + per_band, h)
        raw = np.empty((r1 - r0, w * c + 1), np.uint8)
        raw[:, 1:] = rows[r0:r1]
        if level == 0:  # stored: filtering would only cost time
            raw[:, 0] = FILTER_NONE
        else:
            raw[:, 0] = FILTER_UP  # the first image row's "row above" is zeros: it stays as it is
            np.subtract(rows[r0 + (r0 == 0):r1], rows[r0 - (r0 > 0):r1 - 1], out=raw[(r0 == 0):, 1:])
        data = raw.data.cast("B")  # flat bytes: len() of a 2-D memoryview counts rows
        z = zlib.compressobj(level, zlib.DEFLATED, -15)  # raw deflate: the zlib header and trailer are ours
        out = z.compress(data) + z.flush(zlib.Z_FINISH if i == last else zlib.Z_SYNC_FLUSH)
        return out, zlib.adler32(data), len(data)

    parts = _map(band, len(starts), threads)
    check = parts[0][1]
    for _, adler, n in parts[1:]:
        check = adler32_combine(check, adler, n)
    # zlib header: deflate with a 32K window; FLEVEL as zlib writes it for this level; FCHECK makes it % 31 == 0
    cmf, flevel = 0x78, (0 if level < 2 else 1 if level < 6 else 2 if level == 6 else 3)
    flg = flevel << 6
    flg |= 31 - (cmf * 256 + flg) % 31
    chunks = [_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, COLOR_TYPES[c], 0, 0, 0))]
    if icc:
        chunks.append(_chunk(b"iCCP", b"ICC Profile\0\0" + zlib.compress(icc)))
    if exif:
        chunks.append(_chunk(b"eXIf", exif[6:] if exif.startswith(b"Exif\0\0") else exif))
    idat = [bytes([cmf, flg])] + [p[0] for p in parts] + [struct.pack(">I", check)]
    chunks += [_chunk(b"IDAT", b"".join(idat)), _chunk(b"IEND", b"")]
    return SIGNATURE + b"".join(chunks)


def adler32_combine(adler1: int, adler2: int, len2: int) -> int:
    """The Adler-32 of A + B from those of A and B and B's length (zlib's adler32_combine, which Python lacks)."""
    rem = len2 % _ADLER_BASE
    s1, s2 = adler1 & 0xFFFF, adler1 >> 16
    t1, t2 = adler2 & 0xFFFF, adler2 >> 16
    sum1 = (s1 + t1 - 1) % _ADLER_BASE
    sum2 = (rem * s1 + s2 + t2 - rem) % _ADLER_BASE
    return sum1 | (sum2 << 16)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def _map(fn: Callable[[int], tuple[bytes, int, int]], n: int, threads: int | None) -> list[tuple[bytes, int, int]]:
    """[fn(0), ..., fn(n - 1)]: in this thread (threads=1 or one band), else on the shared pool or a new one.

    zlib and numpy release the GIL, so the bands compress in parallel. Pipeline writer threads share one
    pool, so several images being written at once never run more deflate threads than there are cores.
    """
    if threads == 1 or n == 1:
        return [fn(i) for i in range(n)]
    if threads is not None:
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(fn, range(n)))
    return list(_shared_pool().map(fn, range(n)))


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="nalasr-png")
        return _pool
