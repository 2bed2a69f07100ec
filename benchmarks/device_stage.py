"""The device stage of a folder job (to the GPU, forward, back to host integers), piece by piece, on CUDA.

What it answers: of the device stage's time per image, how much is the forward and how much the conversions and
the copy back, with the host's cores idle and with them busy encoding JPEGs as a folder job's writers are; and
how many images a second the stage gives with the copy back waited for at once (``upscale_pixels``) against
the copy left in flight for a writer thread to wait for (``upscale_deferred`` with ``HostStaging``).

    python benchmarks/device_stage.py --out $OUT        # on a CUDA machine, the shipped x4 weights
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from nalasr.inference.infer import run_model
from nalasr.inference.loading import load_model
from nalasr.inference.staging import HostStaging
from nalasr.inference.upscaling import device_ints, device_lr_tensor, upscale_deferred, upscale_pixels
from nalasr.io.imageio import Picture, write_image


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median ms of ``fn`` with the device synchronised around each call."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(times), 3)


class BusyWriters:
    """``n`` threads writing a 4K JPEG over and over, as a folder job's writers do while the device works: through
    :func:`write_image` (Pillow encodes into the temporary file, releasing the GIL), each to its own file."""

    def __init__(self, n: int, picture: Picture, folder: Path) -> None:
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(picture, folder / f"busy{i}.jpg"), daemon=True)
                        for i in range(n)]

    def _run(self, picture: Picture, path: Path) -> None:
        while not self.stop.is_set():
            write_image(path, picture, format="JPEG", quality=95, overwrite=True)

    def __enter__(self) -> "BusyWriters":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


def pieces(model, pixels: np.ndarray, repeats: int) -> dict[str, float]:  # noqa: ANN001
    dtype = torch.float16
    lr, maxval = device_lr_tensor(pixels, torch.device("cuda"))
    sr, _ = run_model(model, lr, dtype)
    ints = device_ints(sr[0], maxval)
    pinned = torch.empty(ints.shape, dtype=torch.uint8, pin_memory=True)
    steps = {
        "to_device_and_floats": lambda: device_lr_tensor(pixels, torch.device("cuda")),
        "forward": lambda: run_model(model, lr, dtype),
        "round_to_uint8_hwc": lambda: device_ints(sr[0], maxval),
        "copy_back_pageable": lambda: ints.cpu().numpy(),
        "copy_back_pinned": lambda: pinned.copy_(ints),
        "whole_upscale_pixels": lambda: upscale_pixels(pixels, model, dtype),
    }
    out = {}
    for name, fn in steps.items():  # printed as measured: a call cut off by its time limit still reports
        out[name] = timed(fn, repeats)
        print(f"  {name}: {out[name]} ms", flush=True)
    return out


def throughput(model, images: list[np.ndarray], deferred: bool) -> float:  # noqa: ANN001
    """Images/s of the device stage over ``images``; the deferred outputs are waited for on a writer thread."""
    staging = HostStaging(torch.device("cuda")) if deferred else None
    waiter = ThreadPoolExecutor(2)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    futures = []
    for pixels in images:
        if deferred:
            out, _ = upscale_deferred(pixels, model, torch.float16, staging)
            futures.append(waiter.submit(out.result))
        else:
            upscale_pixels(pixels, model, torch.float16)
    for f in futures:
        f.result()
    waiter.shutdown()
    return round(len(images) / (time.perf_counter() - t0), 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", default="960x540")
    ap.add_argument("--writers", type=int, default=12, help="busy encoding threads (a 16-core host's folder job)")
    ap.add_argument("--repeats", type=int, default=10)
    opts = ap.parse_args()
    w, h = (int(v) for v in opts.size.split("x"))
    model = load_model(4, device="cuda")
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(16)]
    for _ in range(3):  # compile, capture the graph, replay
        upscale_pixels(images[0], model, torch.float16)
    big = Picture(upscale_pixels(images[0], model, torch.float16)[0], "PNG")
    result: dict = {"gpu": torch.cuda.get_device_name(), "size": opts.size, "scale": 4, "precision": "fp16",
                    "writers_busy": opts.writers, "pieces_ms": {}, "images_per_s": {}}
    opts.out.mkdir(parents=True, exist_ok=True)
    for label, busy in (("idle host", 0), (f"{opts.writers} threads encoding JPEG", opts.writers)):
        print(f"{label}:", flush=True)
        with tempfile.TemporaryDirectory() as folder, BusyWriters(busy, big, Path(folder)):
            result["pieces_ms"][label] = pieces(model, images[0], opts.repeats)
            result["images_per_s"][label] = rates = {}
            for name, deferred in (("upscale_pixels (copy back waited for)", False),
                                   ("upscale_deferred (copy back in flight)", True)):
                rates[name] = throughput(model, images, deferred)
                print(f"  {name}: {rates[name]} images/s", flush=True)
        (opts.out / "device_stage.json").write_text(json.dumps(result, indent=1))  # after each label, kept if cut off


if __name__ == "__main__":
    main()
