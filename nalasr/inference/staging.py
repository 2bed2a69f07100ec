"""Outputs brought back from a CUDA device while the next image is computed (folder jobs).

Why: a 4K output is 25 MB of uint8. Copied into pageable memory, the copy runs on the calling thread through the
driver's bounce buffer into freshly faulted pages, and the device waits for it before the next image; in a JPEG
folder job on an H100 the device stage took 48 ms an image against a 22 ms forward
(benchmarks/results/e2e_upscale_h100_worker.md). Here the copy goes into pinned memory on a side stream (the copy
engine, not the SMs), the scheduling thread goes on to the next image at once, and the writer thread that encodes
the image waits for its copy, takes the pixels out (one host memcpy, in parallel with the other writers) and frees
the buffer: only ``slots`` buffers are pinned, however long the folder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor


class Deferred:
    """An (H, W, C) output on its way to the host; :meth:`result` waits for it. Either ready (an array) or a
    pinned buffer whose copy completes at ``done``; ``release`` gives the buffer's slot back."""

    def __init__(self, ready: np.ndarray | None = None, *, staged: Tensor | None = None,
                 done: "torch.cuda.Event | None" = None, release: Callable[[], None] | None = None) -> None:
        self._array, self._staged, self._done, self._release = ready, staged, done, release
        self.shape: tuple[int, ...] = ready.shape if ready is not None else tuple(staged.shape)  # type: ignore[union-attr]

    def result(self) -> np.ndarray:
        """The pixels as a host array of their own (the pinned buffer is freed); safe to call again."""
        if self._array is None:
            assert self._staged is not None and self._done is not None
            try:
                self._done.synchronize()  # releases the GIL while it waits
                self._array = self._staged.numpy().copy()
            finally:
                self.discard()
        return self._array

    def discard(self) -> None:
        """Free the buffer without reading it (a write that will not happen); idempotent."""
        self._staged = None
        release, self._release = self._release, None
        if release is not None:
            release()


class HostStaging:
    """At most ``slots`` pinned host buffers in flight from ``device`` (CUDA); a further :meth:`send_back` waits
    until a writer has taken its pixels out of one. Freed buffers go back to PyTorch's pinned-memory cache, which
    hands them to the next output of the same size without a new pinning."""

    def __init__(self, device: torch.device, slots: int = 3) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self._slots = threading.BoundedSemaphore(slots)

    def send_back(self, ints: Tensor) -> Deferred:
        """Start copying ``ints`` ((H, W, C) uint8, contiguous, on ``device``, computed on the current stream)
        to the host; returns at once."""
        self._slots.acquire()
        try:
            host = torch.empty(ints.shape, dtype=ints.dtype, pin_memory=True)
            done = torch.cuda.Event()
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                host.copy_(ints, non_blocking=True)
                done.record(self.stream)
            ints.record_stream(self.stream)  # its memory is not reused by the next image before the copy ends
        except BaseException:
            self._slots.release()
            raise
        return Deferred(staged=host, done=done, release=self._slots.release)
