"""PNG encode time and size per zlib level (0-9) on realistic upscaler outputs, for choosing --png-compression.

Photographs from the training data (``shared/datasets/train_extra``; never the evaluation sets) are cropped to
16:9 and resized with Pillow's bicubic filter to 3840x2160 (4K) and 7680x4320 (8K), the sizes of a x4 output of
960x540 and 1920x1080: smooth, upsampled pictures as an upscaler writes them. Each is encoded through
``nalasr.io.imageio.encode_image`` (``nalasr.io.png`` for 8-bit PNG) at every level a few times; the table gives the median
wall time and the size, beside Pillow's own PNG encoder (what ``encode_image`` used before ``nalasr.io.png``: one
thread, a filter chosen per row) and JPEG and WebP at quality 95. ``encode_image``'s PNG deflates bands on one
thread a core, so its wall time falls with cores; its CPU time and Pillow's carry to another machine roughly by
single-core speed.

    .venv/bin/python benchmarks/png_encode.py --out benchmarks/results/png_encode.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import io  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from nalasr.io.imageio import Picture, encode_image  # noqa: E402

DATA = ROOT.parent / "shared" / "datasets" / "train_extra"
# Landscape photographs (trees, water, rock, sky, city): textured like most inputs. Training data only.
PHOTOS = (
    "gh_elementary_wallpapers/backgrounds_Morskie_Oko.jpg",
    "gh_popos_wallpapers/original_tony-webster-97532.jpg",
    "gh_popos_wallpapers/original_jad-limcaco-183877.jpg",
)
SIZES = {"4K": (3840, 2160), "8K": (7680, 4320)}


def load(rel: str, size: tuple[int, int]) -> np.ndarray:
    """The photograph cropped to the aspect of ``size`` (centred) and resized to it, bicubic."""
    with Image.open(DATA / rel) as im:
        im = im.convert("RGB")
        w, h = im.size
        tw, th = size
        if w * th > h * tw:  # too wide
            cw, ch = h * tw // th, h
        else:
            cw, ch = w, w * th // tw
        left, top = (w - cw) // 2, (h - ch) // 2
        im = im.crop((left, top, left + cw, top + ch)).resize(size, Image.Resampling.BICUBIC)
        return np.asarray(im)


def pillow_png(picture: Picture, level: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(picture.pixels).save(buf, format="PNG", compress_level=level)
    return buf.getvalue()


def measure(picture: Picture, fmt: str, repeats: int, **kw) -> tuple[float, float, int]:
    """(median wall ms, median CPU ms, bytes) of ``repeats`` encodes (fmt "PILLOW": Pillow's PNG encoder)."""
    walls, cpus, size = [], [], 0
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        data = pillow_png(picture, kw["png_compression"]) if fmt == "PILLOW" else encode_image(picture, fmt, **kw)[0]
        walls.append((time.perf_counter() - t0) * 1e3)
        cpus.append((time.process_time() - c0) * 1e3)
        size = len(data)
    return statistics.median(walls), statistics.median(cpus), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--photos", type=int, default=len(PHOTOS), help="how many of the photographs (default all)")
    ap.add_argument("--sizes", default="4K,8K", help="comma-separated: 4K, 8K")
    ap.add_argument("--levels", default="0-9", help="PNG levels: 'A-B' or comma-separated")
    ap.add_argument("--pillow-levels", default="2,6", help="levels of Pillow's encoder to compare (comma-separated)")
    ap.add_argument("--repeats", type=int, default=3, help="encodes per case; the median is reported")
    ap.add_argument("--slow-repeats", type=int, default=1,
                    help="encodes per case for PNG levels 7-9 (seconds each at 8K; default 1)")
    ap.add_argument("--out", type=Path, help="markdown file to write (default: print only)")
    args = ap.parse_args()
    if "-" in args.levels:
        lo, hi = map(int, args.levels.split("-"))
        levels = list(range(lo, hi + 1))
    else:
        levels = [int(x) for x in args.levels.split(",")]
    photos = PHOTOS[: args.photos]
    sizes = [s.strip() for s in args.sizes.split(",")]
    cases = [("PNG", f"PNG level {lv}", {"png_compression": lv}, args.slow_repeats if lv >= 7 else args.repeats)
             for lv in levels]
    cases += [("PILLOW", f"Pillow PNG level {lv}", {"png_compression": lv}, args.repeats)
              for lv in (int(x) for x in args.pillow_levels.split(",") if x)]
    cases += [("JPEG", "JPEG q95", {"quality": 95}, args.repeats), ("WEBP", "WebP q95", {"quality": 95}, args.repeats)]

    # results[size][label] = list over photos of (wall ms, cpu ms, bytes)
    results: dict[str, dict[str, list[tuple[float, float, int]]]] = {s: {c[1]: [] for c in cases} for s in sizes}
    started = time.time()
    for s in sizes:
        for rel in photos:
            picture = Picture(load(rel, SIZES[s]), "PNG")
            for fmt, label, kw, repeats in cases:
                r = measure(picture, fmt, repeats, **kw)
                results[s][label].append(r)
                print(f"{s} {Path(rel).name} {label}: {r[0]:.0f} ms wall, {r[1]:.0f} ms CPU, {r[2] / 1e6:.2f} MB",
                      flush=True)

    lines = table(results, sizes, photos, cases, args, time.time() - started)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


def table(results, sizes, photos, cases, args, elapsed: float) -> list[str]:
    import PIL

    cmd = "python benchmarks/png_encode.py " + " ".join(sys.argv[1:])
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    lines = [
        "# PNG encode: time and size per compression level",
        "",
        f"Command: `{cmd}` ({elapsed:.0f} s). Machine: {_cpu()}, {os.cpu_count()} cores, "
        f"load average at the end {load_avg} (other jobs ran); Python {platform.python_version()}, "
        f"Pillow {PIL.__version__}, zlib {_zlib()}.",
        "",
        f"Pictures: {len(photos)} photographs of the training data ({', '.join(Path(p).name for p in photos)}), "
        "centre-cropped to 16:9 and resized bicubic (Pillow) to each size: 8-bit RGB. "
        f"Each case encoded {args.repeats} times ({args.slow_repeats} for levels 7-9) through `encode_image`; "
        "times are medians, then the mean over the photographs; sizes the mean over the photographs. "
        "CPU ms is the process's CPU time, summed over threads: `encode_image`'s PNG deflates bands on a thread a "
        "core, Pillow's encoder and JPEG/WebP run on one, so for those wall = CPU on an idle machine. Ratios are "
        "against Pillow's encoder at level 6, the writer's bytes before `nalasr.io.png`.",
        "",
    ]
    header = "| output |" + "".join(f" {s} CPU ms | {s} wall ms | {s} MB |" for s in sizes) + "".join(
        f" {s} vs Pillow level 6 (CPU, wall, size) |" for s in sizes)
    lines += [header, "|---" * (1 + 4 * len(sizes)) + "|"]
    for _, label, _, _ in cases:
        row = f"| {label} |"
        for s in sizes:
            rs = results[s][label]
            row += (f" {statistics.mean(r[1] for r in rs):,.0f} | {statistics.mean(r[0] for r in rs):,.0f} |"
                    f" {statistics.mean(r[2] for r in rs) / 1e6:.2f} |")
        for s in sizes:
            base = results[s].get("Pillow PNG level 6")
            if not base:
                row += " — |"
                continue
            ratio = [statistics.mean(r[k] for r in results[s][label]) / statistics.mean(r[k] for r in base)
                     for k in (1, 0, 2)]
            row += " " + ", ".join(f"{x:.2f}×" for x in ratio) + " |"
        lines.append(row)
    return lines


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _zlib() -> str:
    import zlib

    return zlib.ZLIB_RUNTIME_VERSION


if __name__ == "__main__":
    main()
