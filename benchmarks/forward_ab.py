"""Shared setup of the whole-forward GPU benchmarks (compile_gpu.py, fusion_gpu.py, profile_gpu.py).

Default variant, ×4, fp16, batch 1, a random channels-last LR image; latency as the median of
``triton.testing.do_bench``, eager and replayed from a CUDA graph (nalasr.graphs, as upscale does).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]


def parse_args(description: str) -> argparse.Namespace:
    """--sizes HxW,... (LR) and --json OUT."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--sizes", default="192x256,540x960", help="LR sizes, HxW, comma-separated")
    ap.add_argument("--json", default=None, help="write the rows here")
    return ap.parse_args()


def lr_sizes(text: str) -> list[tuple[str, int, int]]:
    """"192x256,540x960" → [("192x256", 192, 256), ...]."""
    out = []
    for size in text.split(","):
        h, w = (int(v) for v in size.split("x"))
        out.append((size, h, w))
    return out


def lr_image(h: int, w: int) -> Tensor:
    """(1, 3, h, w) fp16 in [0, 1) on CUDA, channels-last (the layout infer._forward gives the network)."""
    return torch.rand(1, 3, h, w, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)


def eager_and_replay_ms(model: nn.Module, x: Tensor) -> dict[str, float]:
    """Median ms of model(x), eager and replayed from a CUDA graph (captured on the second call)."""
    from triton.testing import do_bench

    from nalasr.graphs import GraphedForward

    g = GraphedForward(model)
    g(x), g(x)
    return {"eager_ms": do_bench(lambda: model(x), return_mode="median"),
            "graph_ms": do_bench(lambda: g(x), return_mode="median")}


def write_rows(rows: list[dict], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(rows, indent=1))
