"""Whether encoding an output holds the GIL, and what that costs a folder job's writer threads.

A folder job encodes its outputs on a pool of threads (``nalasr.inference.pipeline``): they scale with cores
only where the encoder releases the GIL. Pillow releases it when it encodes into a file and holds it when it
encodes into a BytesIO, so ``write_image`` hands Pillow the temporary file, where it used to encode to bytes
first (``encode_image``) and write those. For each format this measures, on a 4K upscaler-like picture
(a photograph resized bicubic, as ``png_encode.py`` makes them; noise resized without ../shared or --photo):

- how fast a pure-Python loop runs while one thread encodes (1.0: the encoder never blocks it), into bytes
  and into a file;
- images/s of ``--threads`` threads writing files, the old way (bytes, then the file) and ``write_image``.

    .venv/bin/python benchmarks/gil_encode.py --out benchmarks/results/gil_encode_cpu.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from nalasr.io.fsutil import atomic_path  # noqa: E402
from nalasr.io.imageio import Picture, encode_image, write_image  # noqa: E402
from png_encode import DATA, PHOTOS, load  # noqa: E402

FORMATS = {"JPEG": ".jpg", "WEBP": ".webp", "TIFF": ".tif", "PNG": ".png"}
SIZE = (3840, 2160)


def picture(photo: Path | None) -> tuple[Picture, str]:
    if photo is not None:
        return Picture(load(str(photo.resolve()), SIZE)), f"{photo.name} resized to 3840x2160"
    if (DATA / PHOTOS[0]).is_file():
        return Picture(load(PHOTOS[0], SIZE)), f"{PHOTOS[0]} resized to 3840x2160"
    rng = np.random.default_rng(0)
    small = Image.fromarray(rng.integers(0, 256, (270, 480, 3), dtype=np.uint8))
    return Picture(np.asarray(small.resize(SIZE, Image.Resampling.BICUBIC))), "random 480x270 resized to 3840x2160"


def bytes_then_file(path: Path, pic: Picture, fmt: str) -> None:
    """The write path before: encode to bytes, then write them atomically."""
    data, _ = encode_image(pic, fmt)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def loop_rate(seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            n += 1
    return n / seconds


def beside(fn, seconds: float) -> float:  # noqa: ANN001
    """Speed of a Python loop while ``fn`` runs over and over on another thread, against the loop alone."""
    alone = loop_rate(seconds)
    stop = threading.Event()

    def encode() -> None:
        while not stop.is_set():
            fn()

    t = threading.Thread(target=encode)
    t.start()
    busy = loop_rate(seconds)
    stop.set()
    t.join()
    return round(busy / alone, 2)


def rate(fn, threads: int, images: int) -> float:  # noqa: ANN001
    """Images/s of ``images`` calls of ``fn(i)`` on ``threads`` threads (after one warm-up call)."""
    fn(-1)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fn, range(images)))
    return round(images / (time.perf_counter() - t0), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--images", type=int, default=16, help="files written per measurement")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each Python-loop measurement")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--photo", type=Path, help="a photograph to resize to 4K (default: a training photo, else noise)")
    ap.add_argument("--out", type=Path, required=True, help="the .md to write (a .json beside it)")
    args = ap.parse_args()
    pic, source = picture(args.photo)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for fmt in args.formats.split(","):
            ext = FORMATS[fmt]

            def old(i: int, fmt: str = fmt, ext: str = ext) -> None:
                bytes_then_file(folder / f"old{i}{ext}", pic, fmt)

            def new(i: int, ext: str = ext) -> None:  # the format follows the extension
                write_image(folder / f"new{i}{ext}", pic, overwrite=True)

            row = {
                "format": fmt,
                "loop_beside_bytes": beside(lambda: encode_image(pic, fmt), args.seconds),
                "loop_beside_write_image": beside(lambda: new(0), args.seconds),
                "images_per_s_bytes_then_file": rate(old, args.threads, args.images),
                "images_per_s_write_image": rate(new, args.threads, args.images),
            }
            row["bytes_identical"] = (folder / f"old0{ext}").read_bytes() == (folder / f"new0{ext}").read_bytes()
            rows.append(row)
            print(json.dumps(row), flush=True)
    machine = f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores, " \
              f"Python {platform.python_version()}, Pillow {Image.__version__}"
    lines = [
        f"Machine: {machine}",
        f"Command: `python benchmarks/gil_encode.py {' '.join(sys.argv[1:])}`",
        f"Picture: {source}, quality 95 (JPEG, WebP), PNG at the default level, TIFF deflate.",
        "",
        "| format | Python loop beside one encode into bytes | beside `write_image` | images/s, bytes then file "
        f"({args.threads} threads) | images/s, `write_image` | same bytes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['format']} | {r['loop_beside_bytes']} | {r['loop_beside_write_image']} | "
                     f"{r['images_per_s_bytes_then_file']} | {r['images_per_s_write_image']} | "
                     f"{'yes' if r['bytes_identical'] else 'no'} |")
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps({"machine": machine, "picture": source,
                                                         "threads": args.threads, "rows": rows}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
