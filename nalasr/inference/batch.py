"""Upscaling files, folders and globs: :func:`upscale_paths`, the engine of ``nalasr upscale``.

The inputs and outputs follow the rules of :mod:`.jobs`; one device runs them as the pipeline of
:mod:`.pipeline`; several (``cuda`` with more than one GPU visible, or a list such as ``cuda:0,cuda:1``) share
them out to one worker process each (:mod:`.shard`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import InputError, WeightsError
from ..io.fsutil import remove_stale_temps, writable_folder
from ..io.imageio import DEFAULT_MAX_PIXELS, DEFAULT_PNG_COMPRESSION, DEFAULT_QUALITY, normalise_ext
from ..io.weights import read_header, shipped_path
from ..model import NaLaSR
from ..ops import BACKENDS, triton_available
from .ensemble import SelfEnsemble, ensemble_of
from .jobs import BatchReport, Existing, ItemResult, Job, Outputs, collect
from .loading import load_model
from .pipeline import Stages, WriteOptions, run_jobs
from .runtime import check_scale, dtype_name, resolve_device, resolve_dtype

if TYPE_CHECKING:
    from .warm import ModelCache


@dataclass(frozen=True)
class ModelChoice:
    """Which network a worker builds: everything needed to load it again in another process."""

    scale: int
    variant: str | None
    weights: str | None
    precision: str
    attention_backend: str
    self_ensemble: bool

    def load(self, device: torch.device) -> NaLaSR | SelfEnsemble:
        model = load_model(self.scale, self.variant, self.weights, device)
        model.set_attention_backend(self.attention_backend)  # type: ignore[arg-type]
        return ensemble_of(model) if self.self_ensemble else model


def upscale_paths(
    inputs: Sequence[str | os.PathLike],
    output: str | os.PathLike | None = None,
    *,
    scale: int = 4,
    model: NaLaSR | None = None,
    weights: str | os.PathLike | None = None,
    variant: str | None = None,
    device: str | torch.device = "auto",
    precision: str = "auto",
    attention_backend: str = "auto",
    recursive: bool = False,
    ext: str | None = None,
    quality: int = DEFAULT_QUALITY,
    png_compression: int = DEFAULT_PNG_COMPRESSION,
    existing: Existing = "fail",
    max_pixels: int = DEFAULT_MAX_PIXELS,
    self_ensemble: bool = False,
    onnx: str | os.PathLike | None = None,
    cache: ModelCache | None = None,
    on_start: Callable[[int], None] | None = None,
    on_item: Callable[[ItemResult], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_interrupt: Callable[[BatchReport], None] | None = None,
) -> BatchReport:
    """Upscale files, folders and globs; a bad input fails alone and the batch carries on.

    Outputs are ``{stem}_x{scale}{ext}`` beside each input, or in the ``output`` folder (mirroring the
    tree of a folder input with ``recursive``); ``output`` is a file path when there is one input file and
    it has an image extension. Inputs are never overwritten. An existing output fails its item unless
    ``existing`` is "skip" or "overwrite". Every file is written atomically.

    ``device``: auto, cpu, cuda, cuda:N, or a comma list (``cuda:0,cuda:1``); ``cuda`` (and auto) with more than
    one GPU visible uses them all, one worker process each. Raises only for problems with the whole run (bad
    options, weights, device); per-input failures are in the report (``report.failures``). ``on_start(n)`` and
    ``on_item(result)`` drive a progress display, ``on_warning(text)`` hears advice before the work starts.
    On Ctrl-C the files in flight are finished, ``on_interrupt(report)`` gets what was done, and the
    KeyboardInterrupt goes on up carrying it as ``e.report``. ``self_ensemble``: average the network over the 8 flips/rotations of each image
    (8× the time). ``onnx``: run this exported model (``nalasr export``) with onnxruntime. ``cache``: take the
    network from (and leave it in) this cache, as a resident worker does; a job over several devices loads its own.
    """
    t0 = time.perf_counter()
    _check_options(scale, existing, quality, png_compression, max_pixels, attention_backend)
    if weights is not None and variant is not None:
        raise InputError("--variant picks a shipped model and --weights gives one (its file carries its variant): "
                         "drop one of them")
    if onnx is not None:
        if model is not None or weights is not None or variant is not None:
            raise InputError("--model FILE.onnx is the whole model: leave out --weights and --variant")
        from ..interop.onnx import OnnxModel

        model = OnnxModel(onnx, device=str(device))  # type: ignore[assignment]
    suffix = normalise_ext(ext) if ext else None
    entries, left_out = collect(inputs, output, recursive, suffix)
    jobs = [e for e in entries if isinstance(e, Job)]
    devices = [next(model.parameters()).device] if model is not None else resolve_devices(device)
    dtype = resolve_dtype(precision, devices[0])
    if attention_backend == "triton" and not (devices[0].type == "cuda" and triton_available()):
        raise InputError("--attention-backend triton needs a CUDA device and the triton package; use auto or reference")
    if model is not None and model.cfg.scale != scale:
        raise InputError(f"the model upscales x{model.cfg.scale}, not x{scale}")
    if jobs and output is not None and jobs[0].out_file is None:  # a bad -o fails now, not after the first forward
        writable_folder(output, "-o")
    if weights is not None and model is None:  # the header alone: a wrong file fails before any image is read
        cfg, _ = read_header(weights)
        if cfg.scale != scale:
            raise WeightsError(f"{weights}: these weights are for x{cfg.scale}, not x{scale}; "
                               f"pick --scale {cfg.scale} or other weights")
    choice = ModelChoice(scale, variant, None if weights is None else str(weights), precision, attention_backend,
                         self_ensemble)
    label = str(onnx) if onnx is not None else None if model is not None else str(
        weights if weights is not None else shipped_path(scale, variant))
    report = BatchReport(scale, ",".join(map(str, devices)), dtype_name(dtype), label, self_ensemble)
    report.warnings += _advice(dtype, devices, left_out) + _clean_stale_temps(jobs)
    for text in report.warnings:
        if on_warning:
            on_warning(text)
    if on_start:
        on_start(len(entries))
    write = WriteOptions(quality, png_compression, existing == "overwrite")
    outputs = Outputs(jobs, scale, suffix, existing)

    def item_done(_: int, item: ItemResult) -> None:
        if on_item:
            on_item(item)

    try:
        if len(devices) > 1 and len(jobs) > 1:
            from .shard import run_sharded

            report.items = run_sharded(entries, outputs, devices, choice, write, max_pixels, item_done)
        elif jobs:
            net = _net(model, choice, attention_backend, self_ensemble, devices[0], cache)
            report.items = run_jobs(entries, outputs, net, dtype, write, max_pixels=max_pixels,
                                    stages=Stages.for_device(devices[0]), worker=str(devices[0]), on_item=item_done)
        else:
            report.items = [e for e in entries if isinstance(e, ItemResult)]
            for i, item in enumerate(report.items):
                item_done(i, item)
    except KeyboardInterrupt as e:
        report.items = [r for r in getattr(e, "partial_results", []) if r is not None]
        report.interrupted = True
        report.wall_s = time.perf_counter() - t0
        e.report = report  # type: ignore[attr-defined]
        if on_interrupt:
            on_interrupt(report)
        raise
    report.wall_s = time.perf_counter() - t0
    return report


def resolve_devices(device: str | torch.device) -> list[torch.device]:
    """'cuda' or 'auto' → every visible GPU (one worker each), 'a,b' → those; anything else → one device."""
    if isinstance(device, torch.device):
        return [device]
    names = [d.strip() for d in device.split(",") if d.strip()]
    if len(names) > 1:
        return [resolve_device(d) for d in names]
    dev = resolve_device(names[0] if names else device)
    if dev.type == "cuda" and dev.index is None and torch.cuda.device_count() > 1:
        return [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return [dev]


def _net(model: NaLaSR | None, choice: ModelChoice, backend: str, ensemble: bool,
         device: torch.device, cache: ModelCache | None = None) -> NaLaSR | SelfEnsemble | Future:
    """The network, or a Future of it: the weights load on a thread while the first images decode."""
    if model is not None:
        if backend != "auto":  # a given model keeps its own backend unless one is asked for
            model.set_attention_backend(backend)  # type: ignore[arg-type]
        return ensemble_of(model) if ensemble else model
    loader = ThreadPoolExecutor(1, thread_name_prefix="nalasr-load")
    future = loader.submit(choice.load, device) if cache is None else loader.submit(cache.get, choice, device)
    loader.shutdown(wait=False)  # the thread ends with the load
    return future


def _advice(dtype: torch.dtype, devices: list[torch.device], left_out: list[Path]) -> list[str]:
    notes = []
    if devices[0].type == "cpu" and dtype != torch.float32:
        notes.append(f"{dtype_name(dtype)} on the CPU is emulated and about 75x slower than fp32; "
                     "leave --precision at auto (fp32 on the CPU)")
    if left_out:
        names = ", ".join(p.name for p in left_out[:3]) + (f" and {len(left_out) - 3} more" if len(left_out) > 3 else "")
        notes.append(f"left out {len(left_out)} file(s) named as outputs of this tool beside their inputs ({names}); "
                     "name them explicitly to upscale them again")
    return notes


def _clean_stale_temps(jobs: list[Job]) -> list[str]:
    """Remove what killed runs of this tool left in the output folders (its own temp files only: fsutil)."""
    removed = [p for folder in dict.fromkeys(j.out_dir for j in jobs) for p in remove_stale_temps(folder)]
    if not removed:
        return []
    return [f"removed {len(removed)} temp file(s) an interrupted earlier run left behind "
            f"({', '.join(p.name for p in removed[:2])}{' ...' if len(removed) > 2 else ''})"]


def _check_options(scale: int, existing: str, quality: int, png_compression: int, max_pixels: int, backend: str) -> None:
    check_scale(scale)
    if existing not in ("fail", "skip", "overwrite"):
        raise InputError(f"existing must be fail, skip or overwrite, got {existing!r}")
    if not 1 <= quality <= 100:
        raise InputError(f"--quality must be between 1 and 100, got {quality}")
    if not 0 <= png_compression <= 9:
        raise InputError(f"--png-compression must be between 0 (fastest) and 9 (smallest), got {png_compression}")
    if max_pixels < 1:
        raise InputError(f"--max-pixels must be at least 1, got {max_pixels}")
    if backend not in BACKENDS:
        raise InputError(f"unknown attention backend {backend!r}: use {', '.join(BACKENDS)}")
