"""The fused depthwise-conv kernels (nalasr_kernels.dwconv) at the model's 540×960 shapes, against cuDNN's
depthwise conv followed by the same epilogue in PyTorch, over the launch shape (TILE accumulators a program,
ROWS image rows a program). Prints one line a measurement and writes JSON rows.

    PYTHONPATH=.:kernels python benchmarks/dwconv_gpu.py [--json OUT.json] [--rows 1,2,4,8] [--tiles 1024,2048,4096]

GB/s counts the minimum bytes: every input map read once, every output map written once.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
import triton.testing

from nalasr.ops import depthwise_conv
from nalasr_kernels import dwconv as D

H, W = 540, 960


def _case(name: str, c: int, k: int):
    """(fused call, unfused call, bytes moved) for one of the model's three fused ops, fp16 on CUDA."""
    g = torch.Generator(device="cuda").manual_seed(c * 10 + k)
    x = torch.randn(1, H, W, c, device="cuda", dtype=torch.float16, generator=g)
    wt = torch.randn(c, 1, k, k, device="cuda", dtype=torch.float16, generator=g) / k
    b, lw, lb = (torch.randn(c, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    o, gate = (torch.randn_like(x) for _ in range(2))
    nbytes = x.numel() * x.element_size()
    if name == "gelu":
        return (lambda: D.dwconv_gelu_triton(x, wt, b), lambda: F.gelu(depthwise_conv(x, wt, b)), 2 * nbytes)
    if name == "residual_norm":
        return (lambda: D.dwconv_residual_norm_triton(x, wt, b, lw, lb),
                lambda: (lambda s: (s, F.layer_norm(s, (c,), lw, lb)))(x + depthwise_conv(x, wt, b)), 3 * nbytes)
    return (lambda: D.dwconv_gated_norm_triton(x, wt, b, o, gate, lw, lb),
            lambda: F.layer_norm(o + depthwise_conv(x, wt, b), (c,), lw, lb) * F.silu(gate), 4 * nbytes)


CASES = [("residual_norm", 64, 3), ("gelu", 128, 3), ("gated_norm", 64, 5)]  # CPE, FFN conv, LePE


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--rows", default="1,2,4,8,16")
    ap.add_argument("--tiles", default="1024,2048,4096")
    a = ap.parse_args()
    out = []
    with torch.inference_mode():
        for name, c, k in CASES:
            fused, unfused, nbytes = _case(name, c, k)
            ms = _ms(unfused)
            out.append({"op": name, "C": c, "K": k, "impl": "cudnn+torch", "ms": ms, "GBps": nbytes / ms / 1e6})
            print(f"{name:14s} C {c:3d} K {k} cudnn+torch          {ms * 1e3:7.1f} µs {nbytes / ms / 1e6:6.0f} GB/s")
            ref = unfused()
            for tile in (int(t) for t in a.tiles.split(",")):
                for rows in (int(r) for r in a.rows.split(",")):
                    D.TILE, D.ROWS = tile, rows
                    got = fused()
                    diff = max((g - r).abs().max().item() for g, r in zip(
                        got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)))
                    ms = _ms(fused)
                    out.append({"op": name, "C": c, "K": k, "impl": "triton", "tile": tile, "rows": rows, "ms": ms,
                                "GBps": nbytes / ms / 1e6, "max_abs_diff": diff})
                    print(f"{name:14s} C {c:3d} K {k} tile {tile:4d} rows {rows:2d} {ms * 1e3:7.1f} µs "
                          f"{nbytes / ms / 1e6:6.0f} GB/s  diff {diff:.3g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
