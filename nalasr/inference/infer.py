"""One forward pass of a whole image, shared by upscale, eval and bench.

Handles what every caller needs the same way: gray images (replicated to RGB, the output averaged back),
the precision (a non-finite half-precision output falls back to fp32), and running out of device memory
(a one-line error with the memory asked for, never a traceback).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..errors import DeviceMemoryError
from .graphs import graphed
from .runtime import PeakMemory, dtype_name, keep_freed_memory, sync


@dataclass
class ForwardStats:
    model_ms: float  # forward only, device synchronised
    peak_bytes: int  # peak memory growth during the forward (see runtime.PeakMemory)
    memory_kind: str
    dtype: str  # the precision the output was finally computed in
    fell_back: bool  # True when a half-precision output was non-finite and fp32 was used instead
    cuda_graph: bool = False  # True when the forward was replayed from a CUDA graph (a size seen before)


def run_model(model: nn.Module, lr: Tensor, dtype: torch.dtype) -> tuple[Tensor, ForwardStats]:
    """Super-resolve ``lr``: (B, C, H, W) float in [0, 1], C ∈ {1, 3}, on the model's device.

    Returns (B, C, s·H, s·W) float32 clamped to [0, 1], and the timing/memory of the forward.
    """
    device = next(model.parameters()).device
    if device.type == "cpu":
        keep_freed_memory()
    try:
        sr, stats = _forward(model, lr, dtype, device)
        if dtype != torch.float32 and not torch.isfinite(sr).all():  # checked before clamping hides inf
            sr, stats = _forward(model, lr, torch.float32, device)
            stats.fell_back = True
    except (torch.OutOfMemoryError, RuntimeError) as e:
        if not isinstance(e, torch.OutOfMemoryError) and "can't allocate memory" not in str(e):
            raise
        _release(device)
        raise DeviceMemoryError(_oom_message(e, lr, dtype, device)) from None
    return sr.clamp(0, 1), stats


@torch.inference_mode()
def _forward(model: nn.Module, lr: Tensor, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, ForwardStats]:
    x = lr.to(device=device, dtype=dtype)
    gray = x.shape[1] == 1
    if gray:
        x = x.expand(-1, 3, -1, -1)
    if device.type == "cuda":
        x = x.contiguous(memory_format=torch.channels_last)
    model_dtype = next(model.parameters()).dtype
    if model_dtype != dtype:
        model.to(dtype)
    fwd = graphed(model) if device.type == "cuda" else None  # a repeated size replays a CUDA graph
    with PeakMemory(device) as mem:
        sync(device)
        t0 = time.perf_counter()
        y = fwd(x) if fwd is not None else model(x)
        sync(device)
        ms = (time.perf_counter() - t0) * 1e3
    peak = mem.peak_bytes
    replayed = fwd is not None and fwd.last_replayed is not None
    if replayed:  # its activations live in the graph's pool
        peak = max(peak, fwd.last_replayed.peak_bytes)
    y = y.float()
    if gray:
        y = y.mean(dim=1, keepdim=True)
    return y, ForwardStats(ms, peak, mem.kind, dtype_name(dtype), False, replayed)


def _release(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _oom_message(e: BaseException, lr: Tensor, dtype: torch.dtype, device: torch.device) -> str:
    h, w = lr.shape[-2:]
    found = re.search(r"Tried to allocate ([\d.]+ [KMGT]?i?B)", str(e))  # torch's wording, e.g. "12.00 GiB"
    asked = f" (it tried to allocate {found.group(1)} more)" if found else ""
    hints = "--precision fp16" if dtype == torch.float32 and device.type == "cuda" else ""
    hints = " or ".join(h for h in (hints, "--device cpu" if device.type == "cuda" else "a smaller image") if h)
    return f"out of {device.type} memory for a {w}x{h} input in {dtype_name(dtype)}{asked}; try {hints}"
