"""Whole-image latency and peak memory of NaLaSR, beside the same network with softmax attention.

    >>> from nalasr.bench import Sweep, BenchOptions, run_sweeps
    >>> records = run_sweeps([Sweep(sizes=((64, 64),), devices=("cpu",))], BenchOptions())

A sweep is the product devices × variants × scales × precisions × attentions × LR sizes. Every case
becomes one :class:`BenchRecord`: a measurement, an OOM, a skip or an error is a record, never an
exception, so one failing case does not end a sweep. Sizes run in ascending token order within a family
(device, variant, scale, precision, attention): that lets a family skip sizes beyond one that ran out of
memory, and predict from the last size whether the next one would run past ``max_forward_s``.

Timing: CUDA events around each forward after warm-up (the host waits on the end event only after it
was recorded, so nothing syncs inside the timed span); wall clock on CPU. Peak memory: growth above the
weights and the input during the timed forwards (:class:`nalasr.inference.runtime.PeakMemory`; the output counts).
Reports (JSON, markdown, plot, the issue's targets) are in :mod:`nalasr.bench.report`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import math
import os
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..errors import InputError, NalasrError
from ..inference.graphs import graphed
from ..model import DEFAULT_VARIANT, VARIANTS, NaLaSR, NaLaSRConfig, config_for, count_params, create_model, variant_of
from ..inference.runtime import PeakMemory, dtype_name, keep_freed_memory, resolve_device, resolve_dtype
from ..model.softmax_mixer import materialised_bytes, swap_attention

GIB = 1024**3
# LR sizes (H, W): ≈ Urban100 ×4; 1080p, 4K and 8K outputs at ×4.
GPU_SIZES: tuple[tuple[int, int], ...] = ((192, 256), (270, 480), (540, 960), (1080, 1920))
CPU_SIZES: tuple[tuple[int, int], ...] = ((48, 48),)  # softmax on 2 cores is seconds per forward already
ATTENTIONS: tuple[str, ...] = ("nala-auto", "nala-triton", "nala-reference", "softmax-sdpa", "softmax-materialised")
ALIASES: dict[str, str] = {
    "nala": "nala-auto", "sdpa": "softmax-sdpa", "flash": "softmax-sdpa", "materialised": "softmax-materialised",
    "materialized": "softmax-materialised", "softmax-materialized": "softmax-materialised",
}
DEFAULT_ATTENTIONS: tuple[str, ...] = ("nala-auto", "softmax-sdpa", "softmax-materialised")
RANDOM_WEIGHTS_NOTE = "random weights: latency and memory do not depend on the weight values"

# --------------------------------------------------------------------------------------------- records


@dataclass
class BenchRecord:
    """One case of a sweep. ``status``: ok | oom | skipped | error; the numbers are None unless ok."""

    attention: str  # nala-auto | nala-triton | nala-reference | softmax-sdpa | softmax-materialised
    backend: str  # the attention op that ran: triton | reference | sdpa | materialised
    variant: str
    params: int
    scale: int
    precision: str  # fp32 | fp16 | bf16
    device: str  # cpu | cuda:0 ...
    lr_h: int
    lr_w: int
    out_h: int
    out_w: int
    tokens: int  # LR tokens N = lr_h · lr_w, what the global attention spans
    status: str
    message: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    times_ms: list[float] = field(default_factory=list)
    warmup: int = 0
    repeats: int = 0
    mpix_per_s: float | None = None  # output megapixels per second at the median
    peak_gib: float | None = None  # growth above weights + input during the forward (output included)
    memory_kind: str = ""  # cuda-allocated | cpu-rss
    finite: bool | None = None  # whether the first warm-up output was all finite (None: not checked)
    weights: str = "random"
    find_max: bool = False  # the largest size that ran, found by growing the input
    cuda_graphs: bool = False  # the timed forwards replayed a CUDA graph (nalasr.inference.graphs)

    @property
    def size(self) -> str:
        return f"{self.lr_h}x{self.lr_w}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Sweep:
    """A product of cases. ``sizes`` None: per-device default (GPU_SIZES on CUDA, CPU_SIZES on CPU)."""

    sizes: tuple[tuple[int, int], ...] | None = None  # LR (H, W)
    scales: tuple[int, ...] = (4,)
    precisions: tuple[str, ...] = ("auto",)  # auto: fp16 on CUDA, fp32 on CPU
    devices: tuple[str, ...] = ("auto",)
    variants: tuple[str, ...] = (DEFAULT_VARIANT,)
    attentions: tuple[str, ...] = DEFAULT_ATTENTIONS
    find_max: bool = False  # then grow each family's input until it no longer runs


@dataclass(frozen=True)
class BenchOptions:
    warmup: int | None = None  # None: 3 on CUDA, 1 on CPU
    repeats: int | None = None  # None: 10 on CUDA, 3 on CPU
    weights: str | None = None  # a weights file instead of random weights (sets variant and scale)
    seed: int = 0
    max_forward_s: float = 30.0  # skip a case predicted to take longer per forward; find-max stops there
    max_case_s: float = 45.0  # warm-up and repeats of one case are cut to fit in this
    time_budget_s: float | None = None  # the whole run; later cases are recorded as skipped
    cudnn_benchmark: bool = True  # sizes are fixed per case, so cuDNN's algorithm search pays off
    cuda_graphs: bool = True  # time what run_model does on CUDA: repeated sizes replay a graph (nalasr.inference.graphs)


@dataclass(frozen=True)
class Case:
    device: torch.device
    variant: str
    scale: int
    dtype: torch.dtype
    attention: str
    lr_hw: tuple[int, int]

    @property
    def tokens(self) -> int:
        return self.lr_hw[0] * self.lr_hw[1]

    @property
    def family(self) -> tuple:
        return (str(self.device), self.variant, self.scale, self.dtype, self.attention)

    @property
    def label(self) -> str:
        h, w = self.lr_hw
        return f"{self.attention} {self.variant} x{self.scale} {dtype_name(self.dtype)} {self.device} {h}x{w}"


class Progress:
    """Callbacks of a running sweep; the default does nothing. The CLI draws a rich progress bar."""

    def start(self, total: int) -> None: ...

    def case(self, label: str) -> None: ...

    def done(self, record: BenchRecord) -> None: ...


# ------------------------------------------------------------------------------------------- parsing


def parse_size(text: str) -> tuple[int, int]:
    """'192x256' (H x W, LR) → (192, 256); InputError for anything else."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        h, w = (int(p) for p in parts)
    except ValueError:
        raise InputError(f"bad size {text!r}: use HxW, e.g. 192x256 (height x width of the LR input)") from None
    if h < 1 or w < 1:
        raise InputError(f"bad size {text!r}: height and width must be at least 1")
    return h, w


def parse_attention(text: str) -> str:
    name = ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in ATTENTIONS:
        raise InputError(f"unknown attention {text!r}: use {', '.join(ATTENTIONS)} (or nala, sdpa, materialised)")
    return name


def split_attention(attention: str) -> tuple[str, str]:
    """'nala-auto' → ('nala', 'auto'); 'softmax-sdpa' → ('sdpa', 'sdpa')."""
    family, _, rest = attention.partition("-")
    return ("nala", rest) if family == "nala" else (rest, rest)


# ------------------------------------------------------------------------------------------- presets


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    sweeps: tuple[Sweep, ...]
    options: BenchOptions


PRESETS: dict[str, Preset] = {
    "cpu": Preset(
        "cpu",
        "the CPU target: 256x256 LR, x4, default variant, fp32, NaLa only (softmax over 65K tokens would "
        "need 64 GiB materialised and minutes with SDPA on a small CPU)",
        (Sweep(sizes=((256, 256),), precisions=("fp32",), devices=("cpu",), attentions=("nala-auto",)),),
        BenchOptions(warmup=1, repeats=3, max_case_s=240.0),  # a loaded 2-core machine: let 3 repeats fit
    ),
    "h200": Preset(
        "h200",
        "the GPU targets of issue 6: x4 default variant at 192x256, 270x480, 540x960, 1080x1920 LR against "
        "softmax (SDPA and materialised) in fp16; bf16/fp32, x2/x3 and the small variant with NaLa; "
        "the largest LR that fits",
        (
            Sweep(sizes=GPU_SIZES, precisions=("fp16",), devices=("cuda",),
                  attentions=("nala-auto", "softmax-sdpa", "softmax-materialised", "nala-reference")),
            Sweep(sizes=GPU_SIZES, precisions=("bf16", "fp32"), devices=("cuda",), attentions=("nala-auto",)),
            Sweep(sizes=GPU_SIZES, scales=(2, 3), precisions=("fp16",), devices=("cuda",), attentions=("nala-auto",)),
            Sweep(sizes=GPU_SIZES, precisions=("fp16",), devices=("cuda",), variants=("small",),
                  attentions=("nala-auto",)),
            Sweep(sizes=((1080, 1920),), precisions=("fp16",), devices=("cuda",), attentions=("nala-auto",),
                  find_max=True),
        ),
        BenchOptions(warmup=3, repeats=10, max_forward_s=20.0, max_case_s=40.0, time_budget_s=270.0),
    ),
}


# ---------------------------------------------------------------------------------------------- sweep


def expand(sweep: Sweep, weights_cfg: NaLaSRConfig | None = None) -> list[Case]:
    """The cases of ``sweep`` in run order (each family's sizes ascending by token count).

    Raises InputError for a bad device, precision, scale, variant or attention.
    """
    if weights_cfg is not None:
        if any(s != weights_cfg.scale for s in sweep.scales):
            raise InputError(f"--weights holds a x{weights_cfg.scale} model: use --scales {weights_cfg.scale}")
        variants: tuple[str, ...] = (variant_of(weights_cfg) or "custom",)
    else:
        for v in sweep.variants:
            if v not in VARIANTS:
                raise InputError(f"unknown variant {v!r}: use {', '.join(VARIANTS)}")
        variants = sweep.variants
    for s in sweep.scales:
        if s not in (2, 3, 4):
            raise InputError(f"unsupported scale {s}: use 2, 3 or 4")
    attentions = [parse_attention(a) for a in sweep.attentions]
    cases = []
    for dev_name in dict.fromkeys(sweep.devices):
        device = resolve_device(dev_name)
        sizes = sweep.sizes or (GPU_SIZES if device.type == "cuda" else CPU_SIZES)
        sizes = tuple(sorted(dict.fromkeys(sizes), key=lambda hw: (hw[0] * hw[1], hw)))
        for variant in variants:
            for scale in dict.fromkeys(sweep.scales):
                for dtype in dict.fromkeys(resolve_dtype(p, device) for p in sweep.precisions):
                    for attention in dict.fromkeys(attentions):
                        cases.extend(Case(device, variant, scale, dtype, attention, hw) for hw in sizes)
    return cases


def run_sweeps(
    sweeps: Sequence[Sweep], options: BenchOptions = BenchOptions(), progress: Progress | None = None
) -> list[BenchRecord]:
    """Run every case of every sweep; returns one record per case (plus one per find-max family).

    Arguments are checked before anything runs (InputError). Restores the cuDNN benchmark flag.
    """
    progress = progress or Progress()
    weights_cfg = _weights_config(options.weights)
    plans = [(s, expand(s, weights_cfg)) for s in sweeps]
    if any(s.find_max and any(c.device.type != "cuda" for c in cases) for s, cases in plans):
        raise InputError("--find-max grows the input until the device runs out of memory: CUDA only")
    unique = list(dict.fromkeys(c for _, cases in plans for c in cases))  # a case two sweeps share runs once
    progress.start(len(unique) + sum(len({c.family for c in cases}) for s, cases in plans if s.find_max))
    runner = _Runner(options, weights_cfg, progress)
    seen: set[Case] = set()
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = options.cudnn_benchmark
    try:
        for sweep, cases in plans:
            for case in cases:
                if case not in seen:
                    seen.add(case)
                    runner.record(case)
            if sweep.find_max:
                for family in dict.fromkeys(c.family for c in cases):
                    runner.find_max([c for c in cases if c.family == family])
    finally:
        torch.backends.cudnn.benchmark = saved
    return runner.records


def run_sweep(sweep: Sweep, options: BenchOptions = BenchOptions(), progress: Progress | None = None) -> list[BenchRecord]:
    return run_sweeps([sweep], options, progress)


def _weights_config(path: str | None) -> NaLaSRConfig | None:
    if path is None:
        return None
    from ..io.weights import read_header

    return read_header(path)[0]


class _Runner:
    """Runs cases in order, remembering per family the last size that ran and whether one ran out of memory."""

    def __init__(self, options: BenchOptions, weights_cfg: NaLaSRConfig | None, progress: Progress) -> None:
        self.options = options
        self.weights_cfg = weights_cfg
        self.progress = progress
        self.records: list[BenchRecord] = []
        self.t0 = time.perf_counter()
        self.last_ok: dict[tuple, BenchRecord] = {}
        self.failed_at: dict[tuple, BenchRecord] = {}

    def record(self, case: Case) -> BenchRecord:
        self.progress.case(case.label)
        rec = self.measure(case)
        self.records.append(rec)
        self.progress.done(rec)
        return rec

    def measure(self, case: Case) -> BenchRecord:
        """Skip checks, then one measured case; updates the family's memory."""
        reason = self._skip_reason(case)
        if reason:
            return _blank(case, self._cfg(case), self.options, "skipped", reason)
        rec = measure_case(case, self.options, self._cfg(case))
        if rec.status == "ok":
            self.last_ok[case.family] = rec
        elif rec.status in ("oom", "error"):
            self.failed_at.setdefault(case.family, rec)
        return rec

    def _cfg(self, case: Case) -> NaLaSRConfig:
        return self.weights_cfg or config_for(case.variant, case.scale)

    def _skip_reason(self, case: Case) -> str:
        o = self.options
        if o.time_budget_s is not None and time.perf_counter() - self.t0 > o.time_budget_s:
            return f"time budget of {o.time_budget_s:.0f} s spent"
        failed = self.failed_at.get(case.family)
        if failed is not None and failed.tokens <= case.tokens:
            return f"{failed.status.upper()} already at {failed.size}"
        kind, backend = split_attention(case.attention)
        if kind == "nala" and backend == "triton" and case.device.type == "cuda" and not triton_ok()[0]:
            return f"triton backend unavailable ({triton_ok()[1]})"
        if kind == "materialised":
            need = materialised_bytes(1, self._cfg(case).heads, case.tokens, _elem_bytes(case.dtype))
            free = free_bytes(case.device)
            if need > free:
                return f"needs >= {need / GIB:,.0f} GiB for the N x N scores, {free / GIB:,.0f} GiB free"
        last = self.last_ok.get(case.family)
        if last is not None and last.median_ms is not None and last.tokens < case.tokens:
            # softmax attention is quadratic in N; the rest of the network (and NaLa) linear
            power = 1 if kind == "nala" else 2
            predicted = last.median_ms / 1e3 * (case.tokens / last.tokens) ** power
            if predicted > o.max_forward_s:
                return f"predicted ~{predicted:,.0f} s per forward from {last.size} (> {o.max_forward_s:g} s limit)"
        return ""

    def find_max(self, cases: list[Case]) -> None:
        """Grow the family's largest size (aspect kept, area x2 per step) until a forward fails or is too
        slow, bisect the last step three times, and record the largest size that ran (one warm-up)."""
        base = cases[-1]
        self.progress.case(f"find-max {base.label}")
        start = self.last_ok.get(base.family)
        if start is None:
            rec = _blank(base, self._cfg(base), self.options, "skipped", "find-max: no size of this family ran")
        else:
            rec = self._grow(base, start)
        rec.find_max = True
        self.records.append(rec)
        self.progress.done(rec)

    def _grow(self, base: Case, start: BenchRecord) -> BenchRecord:
        h0, w0 = start.lr_h, start.lr_w
        kind, _ = split_attention(base.attention)

        def at(f: float) -> Case:
            return dataclasses.replace(base, lr_hw=(max(1, round(h0 * f)), max(1, round(w0 * f))))

        def probe(f: float) -> tuple[bool, str]:
            case = at(f)
            if self.options.time_budget_s is not None and time.perf_counter() - self.t0 > self.options.time_budget_s:
                return False, "time budget spent"
            self.progress.case(f"find-max probe {case.label}")
            if kind == "materialised":
                need = materialised_bytes(1, self._cfg(case).heads, case.tokens, _elem_bytes(case.dtype))
                if need > free_bytes(case.device):
                    return False, f"{case.lr_hw[0]}x{case.lr_hw[1]}: N x N scores do not fit"
            r = measure_case(case, self.options, self._cfg(case), warmup=0, repeats=1)
            if r.status != "ok":
                return False, f"{r.size}: {r.status.upper()} ({r.message[:160]})"
            if (r.median_ms or 0) / 1e3 > self.options.max_forward_s:
                return False, f"{r.size}: {r.median_ms / 1e3:.0f} s per forward (> {self.options.max_forward_s:g} s limit)"
            return True, ""

        lo, hi, why = 1.0, None, ""
        f = math.sqrt(2)
        for _ in range(12):  # 2^12 x the area: far past any device
            ok, reason = probe(lo * f)
            if not ok:
                hi, why = lo * f, reason
                break
            lo *= f
        if hi is not None and "time budget" not in why:
            for _ in range(3):
                mid = math.sqrt(lo * hi)
                ok, _reason = probe(mid)
                lo, hi = (mid, hi) if ok else (lo, mid)
        # A few repeats are enough here, and at the largest size each forward is the slowest of the sweep.
        rec = measure_case(at(lo), self.options, self._cfg(base), warmup=1, repeats=min(3, self.options.repeats or 3))
        rec.message = (f"largest that ran; next tried: {why}" if hi is not None else "grew to 4096x the area without failing") + (
            f"; {rec.message}" if rec.message else "")
        return rec


# ----------------------------------------------------------------------------------------- one case


def measure_case(
    case: Case, options: BenchOptions, cfg: NaLaSRConfig, *, warmup: int | None = None, repeats: int | None = None
) -> BenchRecord:
    """Build the model, run warm-up and timed forwards, and fill a record. Never raises for OOM or errors."""
    cuda = case.device.type == "cuda"
    warmup = warmup if warmup is not None else options.warmup if options.warmup is not None else (3 if cuda else 1)
    repeats = repeats if repeats is not None else options.repeats if options.repeats is not None else (10 if cuda else 3)
    rec = _blank(case, cfg, options, "ok")
    model: nn.Module | None = None
    x: torch.Tensor | None = None
    fwd = None
    try:
        model, rec.backend, note = build_model(case, options)
        h, w = case.lr_hw
        # Made on the device (seeded by build_model): no host copy of a find-max-sized image.
        x = torch.rand(1, 3, h, w, device=case.device, dtype=case.dtype)
        if cuda:  # the layout the upscale path feeds (nalasr.inference.infer)
            x = x.contiguous(memory_format=torch.channels_last)
        # CUDA events record on the current device's stream: make that the case's device
        with torch.cuda.device(case.device) if cuda else contextlib.nullcontext():
            fwd = graphed(model) if cuda and options.cuda_graphs else None
            times, used_warmup, finite, peak, kind, cut = _time(fwd or model, x, case.device, warmup, repeats,
                                                                options.max_case_s)
            if fwd is not None and fwd.last_replayed is not None:  # activations live in the graph's pool
                rec.cuda_graphs = True
                peak = max(peak, fwd.last_replayed.peak_bytes)
        rec.times_ms = [round(t, 4) for t in times]
        rec.median_ms = statistics.median(times)
        rec.min_ms = min(times)
        rec.warmup, rec.repeats = used_warmup, len(times)
        rec.mpix_per_s = rec.out_h * rec.out_w / 1e6 / max(rec.median_ms / 1e3, 1e-9)
        rec.peak_gib = peak / GIB
        rec.memory_kind = kind
        rec.finite = finite
        rec.message = "; ".join(m for m in (note, cut, "" if finite is not False else "non-finite output") if m)
    except NalasrError:
        raise  # bad weights file etc.: not a result of this case
    except Exception as e:  # noqa: BLE001 — a case's failure is its result
        rec.status = "oom" if _is_oom(e) else "error"
        rec.message = (f"out of {case.device.type} memory at LR {case.lr_hw[0]}x{case.lr_hw[1]} "
                       f"({case.tokens:,} tokens){_asked(e)}" if rec.status == "oom" else _first_line(e))
    finally:
        del model, x, fwd  # the graphs' memory too, before the next case
        _release(case.device)
    return rec


def build_model(case: Case, options: BenchOptions) -> tuple[nn.Module, str, str]:
    """The network of ``case`` on its device and dtype, eval mode: (model, backend that runs, note)."""
    torch.manual_seed(options.seed)
    if options.weights is not None:
        from ..io.weights import load_weights

        model = load_weights(options.weights, scale=case.scale)
    else:
        model = create_model(case.variant, case.scale)
    kind, backend = split_attention(case.attention)
    swap_attention(model, kind)  # type: ignore[arg-type]
    note = ""
    if kind == "nala":
        resolved = backend
        if backend == "auto":
            ok, why = triton_ok()
            resolved = "triton" if case.device.type == "cuda" and ok else "reference"
            if case.device.type == "cuda" and not ok:
                note = f"auto ran the reference: {why}"
        # The resolved name, not 'auto': the bench decides once, safely, and says which op it timed.
        model.set_attention_backend(resolved)  # type: ignore[operator]
        backend = resolved
    return model.to(device=case.device, dtype=case.dtype).eval(), backend, note


@torch.inference_mode()
def _time(
    model: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, device: torch.device, warmup: int, repeats: int, max_case_s: float
) -> tuple[list[float], int, bool | None, int, str, str]:
    """Warm-up, then ``repeats`` timed forwards: (times ms, warm-ups run, finite, peak bytes, memory kind, note).

    Warm-ups are timed by the wall clock (synchronised) so that slow cases fit ``max_case_s``: warm-up
    stops once it would pass a quarter of it, and repeats are cut to what the rest allows. It runs at least
    two forwards when two or more are asked for: the first pays compilation (Triton autotuning, cuDNN's search:
    tens of seconds for a fresh process on the GPU), so it neither estimates the cost nor is the steady state,
    and a graphed forward (nalasr.inference.graphs) captures its graph only on the second call. Stopping after the first
    had timed the capture (237 ms for a 1.1 ms case, session 9).
    """
    cuda = device.type == "cuda"
    if not cuda:
        keep_freed_memory()  # as every CPU inference path does (infer.run_model)
    finite: bool | None = None
    used, spent, per, cut = 0, 0.0, 0.0, ""
    for i in range(warmup):
        t0 = time.perf_counter()
        y = model(x)
        if i == 0:
            finite = bool(torch.isfinite(y).all())  # a host sync, but warm-up is not timed
        del y
        if cuda:
            torch.cuda.synchronize(device)
        # The latest forward is the cost estimate: the first one also pays kernel compilation and cuDNN's search.
        per = time.perf_counter() - t0
        spent += per
        used += 1
        if used >= min(warmup, 2) and spent + per > 0.25 * max_case_s:
            break
    if used:
        fit = max(1, int((max_case_s - spent) / max(per, 1e-6)))
        if fit < repeats:
            repeats, cut = fit, f"repeats cut to {fit} to fit {max_case_s:g} s"
    times: list[float] = []
    with PeakMemory(device) as mem:
        if cuda:
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(x)  # the output is dropped at once: one output alive, as in a real call
                end.record()
                end.synchronize()  # after the end event: a single-image latency, not back-to-back throughput
                times.append(start.elapsed_time(end))
        else:
            for _ in range(repeats):
                t0 = time.perf_counter()
                model(x)
                times.append((time.perf_counter() - t0) * 1e3)
    return times, used, finite, mem.peak_bytes, mem.kind, cut


def _blank(case: Case, cfg: NaLaSRConfig, options: BenchOptions, status: str, message: str = "") -> BenchRecord:
    h, w = case.lr_hw
    _, backend = split_attention(case.attention)
    return BenchRecord(
        attention=case.attention, backend=backend, variant=case.variant, params=_params_of(cfg), scale=case.scale,
        precision=dtype_name(case.dtype), device=str(case.device), lr_h=h, lr_w=w, out_h=h * case.scale,
        out_w=w * case.scale, tokens=h * w, status=status, message=message,
        weights=str(options.weights) if options.weights else "random",
    )


@functools.lru_cache(maxsize=32)
def _params_of(cfg: NaLaSRConfig) -> int:
    return count_params(NaLaSR(cfg))


# ------------------------------------------------------------------------------------------- helpers


def triton_ok() -> tuple[bool, str]:
    """(whether the fused kernels can run here, why not). Never raises, whatever state the kernels are in."""
    try:
        from ..ops import triton_available

        return (True, "") if triton_available() else (False, "no CUDA device or no triton package")
    except Exception as e:  # noqa: BLE001 — a half-installed kernels package must not end the sweep
        return False, _first_line(e)


def free_bytes(device: torch.device) -> int:
    """Memory a new allocation can still get: CUDA free plus what the caching allocator holds unused;
    CPU MemAvailable."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _elem_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _is_oom(e: BaseException) -> bool:
    if isinstance(e, torch.OutOfMemoryError):
        return True
    text = str(e)
    return isinstance(e, RuntimeError) and any(
        s in text for s in ("out of memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED"))


def _asked(e: BaseException) -> str:
    m = re.search(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)", str(e))
    return f"; tried to allocate {m.group(1)}" if m else ""


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:300]}" if lines else type(e).__name__


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
