"""CUDA-graph replay of a whole-image forward, for inputs whose size comes back (a folder of same-size photos,
video frames, an evaluation set, a benchmark's repeats).

Why: below about half a megapixel of LR input the network's few hundred small kernels take less GPU time than
eager PyTorch needs to launch them. On the H200 a ×4 forward at 192×256 is 3.9 ms of GPU work but 15-20 ms of
Python (benchmarks/results/h200/kernel_diag_2026-11-29.json); replaying a captured graph costs only the GPU part.

Policy: the first forward of a shape runs eagerly (it also compiles the Triton kernels, or loads them from Triton's cache, and picks cuDNN's algorithms); the second
captures a graph and replays it, and later ones replay. At most ``keep`` graphs are held (each holds its
forward's activation memory, reported as the peak of a replayed call); inputs above ``max_pixels`` LR pixels
run eagerly, where the GPU time dwarfs the launches. ``NALASR_CUDA_GRAPHS=0`` turns it off.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .. import settings

MAX_PIXELS = 1 << 19  # 524,288 LR pixels, e.g. 540×960 (a 4K output at ×4)
KEEP = 2


@dataclass
class CapturedGraph:
    graph: "torch.cuda.CUDAGraph"
    x: Tensor  # static input
    y: Tensor  # static output
    pool_bytes: int  # memory the capture allocated (activations held by the graph's pool)

    @property
    def peak_bytes(self) -> int:
        """Device memory a replayed call holds at its peak: the graph's pool plus the output copy it returns."""
        return self.pool_bytes + self.y.numel() * self.y.element_size()


def enabled() -> bool:
    return settings.get().cuda_graphs


class GraphedForward:
    """``model(x)`` that replays CUDA graphs for repeated (shape, dtype, layout) inputs on CUDA; eager otherwise.

    x: (B, C, H, W) on the model's device. The output is a fresh tensor (the graph's own buffer is copied), so
    callers may keep it across calls. The model's parameters must not be replaced while graphs are held; a
    cast or move (new parameter storage) is noticed and drops them.
    """

    def __init__(self, model: nn.Module, max_pixels: int = MAX_PIXELS, keep: int = KEEP) -> None:
        # A weak reference: graphed() keeps one of these per model in a WeakKeyDictionary, whose values must
        # not keep their keys alive (the model, and the graphs' memory with it, go when the caller drops it).
        self._model = weakref.ref(model)
        self.max_pixels = max_pixels
        self.keep = keep
        self.graphs: OrderedDict[tuple, CapturedGraph] = OrderedDict()
        self.seen: set[tuple] = set()
        self._owner: int | None = None  # data_ptr of the first parameter the graphs and sightings belong to
        self.last_replayed: CapturedGraph | None = None  # the graph the latest call replayed (None: it ran eagerly)
        self.failed: str | None = None  # why a capture failed; this object then stays eager

    @property
    def model(self) -> nn.Module:
        model = self._model()
        if model is None:
            raise RuntimeError("the model of this GraphedForward was deleted")
        return model

    def eligible(self, x: Tensor) -> bool:
        return x.is_cuda and enabled() and self.failed is None and x.shape[-1] * x.shape[-2] <= self.max_pixels

    def __call__(self, x: Tensor) -> Tensor:
        self.last_replayed = None
        if not self.eligible(x):
            return self.model(x)
        params = next(self.model.parameters(), None)
        owner = params.data_ptr() if params is not None else 0
        if owner != self._owner:  # parameters moved or cast since the graphs were captured: they are stale
            self.graphs.clear()
            self.seen.clear()
            self._owner = owner
        key = (tuple(x.shape), x.dtype, x.stride(), x.device)
        entry = self.graphs.get(key)
        if entry is None:
            if key not in self.seen:  # first sighting: eager (warms kernels up; most shapes never recur)
                self.seen.add(key)
                return self.model(x)
            try:
                entry = self._capture(x)
            except Exception as e:  # an op that cannot be captured (a custom layer, a host sync): stay eager
                self.failed = f"{type(e).__name__}: {e}"
                self.graphs.clear()
                return self.model(x)
            self.graphs[key] = entry
            while len(self.graphs) > self.keep:
                self.graphs.popitem(last=False)
        self.graphs.move_to_end(key)
        entry.x.copy_(x)
        entry.graph.replay()
        self.last_replayed = entry
        return entry.y.clone(memory_format=torch.preserve_format)

    def _capture(self, x: Tensor) -> CapturedGraph:
        static_x = torch.empty_like(x).copy_(x)
        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
            self.model(static_x)
        torch.cuda.current_stream(x.device).wait_stream(side)
        torch.cuda.synchronize(x.device)
        before = torch.cuda.memory_allocated(x.device)
        torch.cuda.reset_peak_memory_stats(x.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = self.model(static_x)
        pool = torch.cuda.max_memory_allocated(x.device) - before
        return CapturedGraph(graph, static_x, static_y, pool)


_BY_MODEL: "weakref.WeakKeyDictionary[nn.Module, GraphedForward]" = weakref.WeakKeyDictionary()


def graphed(model: nn.Module) -> GraphedForward:
    """The GraphedForward of ``model`` (one per model object, dropped with it)."""
    found = _BY_MODEL.get(model)
    if found is None:
        found = _BY_MODEL[model] = GraphedForward(model)
    return found
