"""Devices, precisions and peak-memory measurement shared by upscale, eval, train and bench."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import resource
import threading
import time
from dataclasses import dataclass
from typing import Literal

import torch

from ..errors import InputError
from ..model import SCALES

Precision = Literal["auto", "fp32", "fp16", "bf16"]
PRECISIONS: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def check_scale(scale: int) -> int:
    """``scale`` if the network has weights for it (2, 3 or 4); InputError otherwise. Every entry point that
    takes a scale (upscale, eval, load_model) checks it here, once."""
    if isinstance(scale, bool) or not isinstance(scale, int) or scale not in SCALES:
        raise InputError(f"scale must be one of {', '.join(map(str, SCALES))}, got {scale}")
    return scale


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """'auto' → first CUDA device if any, else CPU. 'cuda:N' is checked to exist."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise InputError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device {device!r} asked for but no CUDA GPU is visible: use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(f"device {device!r} does not exist: {torch.cuda.device_count()} CUDA device(s) visible")
    elif dev.type != "cpu":
        raise InputError(f"unsupported device {device!r}: use auto, cpu, cuda or cuda:N")
    return dev


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """'auto' → fp16 on CUDA (bf16 where fp16 is unsupported), fp32 on CPU."""
    if precision == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}: use auto, fp32, fp16 or bf16")
    return PRECISIONS[precision]


def dtype_name(dtype: torch.dtype) -> str:
    return {v: k for k, v in PRECISIONS.items()}[dtype]


def set_threads(threads: int | None) -> None:
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the lifetime peak is the best there is
        return process_peak_rss()


@dataclass
class MemoryReading:
    peak_bytes: int = 0  # peak above the level at entry
    kind: str = "cpu-rss"  # "cuda-allocated" or "cpu-rss"


class PeakMemory:
    """Context manager measuring peak memory growth of the code inside.

    CUDA: ``torch.cuda.max_memory_allocated`` above the allocation at entry (exact, the allocator's count).
    CPU: resident set size sampled every 2 ms by a thread, above the RSS at entry (an estimate: a peak
    shorter than the sampling interval can be missed).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.reading = MemoryReading(kind="cuda-allocated" if device.type == "cuda" else "cpu-rss")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryReading:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            self._base = _rss_bytes()
            self._peak = self._base
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self.reading

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, _rss_bytes())
            time.sleep(0.002)

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.reading.peak_bytes = torch.cuda.max_memory_allocated(self.device) - self._base
        else:
            self._stop.set()
            assert self._thread is not None
            self._thread.join()
            self._peak = max(self._peak, _rss_bytes())
            self.reading.peak_bytes = max(0, self._peak - self._base)


def sync(device: torch.device) -> None:
    """Wait for the work queued on ``device``'s current stream: a forward's clock, not the outputs still copying
    back to the host on a side stream (staging.HostStaging), which run beside the next image's forward."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


@functools.cache
def keep_freed_memory() -> bool:
    """Stop glibc from returning every large freed block to the OS (Linux/glibc only; True if applied).

    A CPU forward allocates and frees (B, H, W, C) buffers of tens of MB; by default glibc serves each from a
    fresh mmap and unmaps it on free, so every buffer is page-faulted in again: measured at 30–40 % of a
    256×256 forward's time on 2 cores. Keeping freed memory in the process costs RSS staying at its peak.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # musl or another libc: leave it alone
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok_mmap = libc.mallopt(m_mmap_threshold, 32 << 20)  # glibc's largest allowed value on 64-bit
    ok_trim = libc.mallopt(m_trim_threshold, (1 << 31) - 1)
    return bool(ok_mmap and ok_trim)


def process_peak_rss() -> int:
    """The process's peak resident set size so far (bytes): VmHWM on Linux, ru_maxrss elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux kilobytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
