"""nalasr.inference.graphs.GraphedForward: when it captures, replays, evicts and drops graphs.

CUDA graphs need a GPU (benchmarks/graphs_gpu.py checks bitwise equality with eager on the H200); here the
bookkeeping runs on CPU with the capture replaced by a stand-in that re-runs the model into the static output,
so every policy below is exercised without a device.
"""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

from nalasr import settings
from nalasr.inference import graphs
from nalasr.inference.graphs import GraphedForward, CapturedGraph


class _FakeGraph:
    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
        self.model, self.x, self.y = model, x, y
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        self.y.copy_(self.model(self.x))


class _CpuGraphed(GraphedForward):
    """GraphedForward with CPU tensors eligible and a capture that needs no GPU."""

    captures = 0

    def eligible(self, x: torch.Tensor) -> bool:
        return graphs.enabled() and self.failed is None and x.shape[-1] * x.shape[-2] <= self.max_pixels

    def _capture(self, x: torch.Tensor) -> CapturedGraph:
        type(self).captures += 1
        static_x = x.clone()
        static_y = self.model(static_x)
        return CapturedGraph(_FakeGraph(self.model, static_x, static_y), static_x, static_y, pool_bytes=123)


@pytest.fixture
def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Conv2d(3, 3, 3, padding=1)


def test_first_call_eager_second_captures_then_replays(model):
    g = _CpuGraphed(model)
    x = torch.rand(1, 3, 8, 9)
    want = model(x)
    assert torch.equal(g(x), want) and g.last_replayed is None and not g.graphs  # first sighting: eager
    y2 = g(x)
    assert len(g.graphs) == 1 and g.last_replayed is not None and g.last_replayed.pool_bytes == 123
    assert g.last_replayed.peak_bytes == 123 + y2.numel() * y2.element_size()  # pool + the returned copy
    x3 = torch.rand(1, 3, 8, 9)
    y3 = g(x3)
    assert torch.equal(y2, want) and torch.equal(y3, model(x3))
    assert g.last_replayed.graph.replays == 2
    # outputs are copies: a later replay leaves what the caller holds alone
    assert y3.data_ptr() != g.last_replayed.y.data_ptr() and torch.equal(y2, want)


def test_keeps_at_most_keep_graphs_least_recent_evicted(model):
    g = _CpuGraphed(model, keep=2)
    shapes = [(1, 3, 4, 4), (1, 3, 5, 5), (1, 3, 6, 6)]
    for s in shapes:
        x = torch.rand(*s)
        g(x), g(x)
    assert [k[0] for k in g.graphs] == shapes[1:]
    x = torch.rand(*shapes[0])  # seen before: captured again at once
    assert torch.equal(g(x), model(x)) and g.last_replayed is not None
    assert [k[0] for k in g.graphs] == [shapes[2], shapes[0]]


def test_large_inputs_and_the_env_switch_stay_eager(model, monkeypatch):
    g = _CpuGraphed(model, max_pixels=30)
    x = torch.rand(1, 3, 6, 6)  # 36 pixels > 30
    for _ in range(3):
        g(x)
    assert not g.graphs and g.last_replayed is None
    monkeypatch.setenv("NALASR_CUDA_GRAPHS", "0")
    settings.reload()  # nalasr reads the environment once
    g = _CpuGraphed(model)
    x = torch.rand(1, 3, 4, 4)
    for _ in range(3):
        assert torch.equal(g(x), model(x))
    assert not g.graphs


def test_new_parameter_storage_drops_graphs(model):
    """A cast or move gives the model new parameter tensors: graphs holding the old ones must not replay."""
    g = _CpuGraphed(model)
    x = torch.rand(1, 3, 4, 4)
    g(x), g(x)
    assert len(g.graphs) == 1
    model.double()
    xd = x.double()
    assert torch.equal(g(xd), model(xd))
    assert not g.graphs and g.last_replayed is None  # stale graph dropped, new key seen for the first time


def test_in_place_weight_updates_are_seen_by_replays(model):
    g = _CpuGraphed(model)
    x = torch.rand(1, 3, 4, 4)
    g(x), g(x)
    with torch.no_grad():
        model.weight.mul_(2)
    assert torch.equal(g(x), model(x)) and g.last_replayed is not None


def test_cpu_tensors_never_capture(model):
    g = graphs.graphed(model)
    x = torch.rand(1, 3, 4, 4)
    for _ in range(3):
        assert torch.equal(g(x), model(x))
    assert not g.graphs and g.last_replayed is None


def test_one_graphed_forward_per_model_released_with_it():
    m = nn.Conv2d(3, 3, 1)
    assert graphs.graphed(m) is graphs.graphed(m)
    n = len(graphs._BY_MODEL)
    del m
    gc.collect()
    assert len(graphs._BY_MODEL) == n - 1


def test_a_failed_capture_falls_back_to_eager_for_good(model, monkeypatch):
    g = _CpuGraphed(model)

    def boom(x):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(g, "_capture", boom)
    x = torch.rand(1, 3, 4, 4)
    for _ in range(3):
        assert torch.equal(g(x), model(x))
    assert g.failed and "capturing" in g.failed and not g.graphs and g.last_replayed is None
