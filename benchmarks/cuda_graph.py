"""CUDA-graph capture shared by the GPU benchmarks (benchmarks/ is on sys.path when one of them runs as a script)."""

from __future__ import annotations

import torch


def capture(fn) -> torch.cuda.CUDAGraph:
    """One call of fn captured in a CUDA graph, after one call on a side stream (PyTorch's rule before a capture:
    lazy initialisation and allocator warm-up must not land in the graph). Compile fn (and run any autotuning) before."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph
