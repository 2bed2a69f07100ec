"""Fused LayerNorm kernel against its reference, torch.nn.functional.layer_norm (outputs and gradients).

On CPU the kernel runs under TRITON_INTERPRET=1, in a subprocess (the flag must be set before Triton is
imported, and must not leak into other tests). Fresh buffers are filled with NaN there, so an element the
kernel fails to write shows up. Sizes are odd on purpose: ragged row blocks, C not a power of two.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
from kernel_testing import nan_filled_buffers, rel_err, run_under_interpreter

pytest.importorskip("triton")

# (rows, C, dtype) — relative RMS tolerances for y / grads per dtype (stats are fp32 in both)
CASES = [(1, 64, "float32"), (37, 64, "float32"), (300, 48, "float32"), (129, 17, "float32"),
         (65, 100, "float16"), (70, 64, "bfloat16"), (1025, 64, "float16")]
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}


def run_cases(device: str = "cpu", cases: list = CASES) -> list[dict]:
    """Every case on ``device``: relative errors of y, dx, dw, db against float64 F.layer_norm, fresh buffers
    NaN-filled. Also run by benchmarks/gpu_kernels_check.py on CUDA (with larger cases)."""
    from nalasr_kernels.layernorm import layer_norm_triton

    res = []
    with nan_filled_buffers():
        for m, c, dt in cases:
            dtype = getattr(torch, dt)
            g = torch.Generator().manual_seed(m * 1000 + c)
            x = (torch.randn(m, c, generator=g) * 3 + 1.5).to(dtype)
            w = torch.randn(c, generator=g)
            b = torch.randn(c, generator=g)
            dy = torch.randn(m, c, generator=g).to(dtype)
            leaves = [t.to(device).clone().requires_grad_() for t in (x, w, b)]
            y = layer_norm_triton(leaves[0].view(m, 1, c), (c,), leaves[1], leaves[2], 1e-5).view(m, c)
            y.backward(dy.to(device))
            ref_leaves = [t.double().to(device).clone().requires_grad_() for t in (x, w, b)]
            y_ref = torch.nn.functional.layer_norm(ref_leaves[0], (c,), ref_leaves[1], ref_leaves[2], 1e-5)
            y_ref.backward(dy.double().to(device))
            res.append({"case": [m, c, dt], "y": rel_err(y, y_ref), "dtype_ok": y.dtype == dtype,
                        **{n: rel_err(t.grad, r.grad) for n, t, r in zip(("dx", "dw", "db"), leaves, ref_leaves)}})
    return res


def check(r: dict) -> None:
    """Assert one run_cases() result is within tolerance (NaN fails too)."""
    tol = TOL[r["case"][2]]
    assert r["dtype_ok"], r
    for key in ("y", "dx", "dw", "db"):
        assert r[key] < tol * (4 if key != "y" else 1), (r["case"], key, r[key])


# LayerNorm(o + lepe)·SiLU(g) (inference only): (rows, C, dtype, g's row stride in units of C: 1 dense, 4 a
# slice of a 4C-wide projection as in the model)
GATED_CASES = [(1, 64, "float32", 1), (37, 64, "float32", 4), (300, 48, "float16", 4), (129, 17, "bfloat16", 1),
               (1025, 64, "float16", 4)]


def run_gated_cases(device: str = "cpu", cases: list = GATED_CASES) -> list[dict]:
    """Relative error of gated_norm_triton against the float64 composition, fresh buffers NaN-filled."""
    from nalasr_kernels.layernorm import gated_norm_triton

    res = []
    with nan_filled_buffers():
        for m, c, dt, spread in cases:
            dtype = getattr(torch, dt)
            gen = torch.Generator().manual_seed(m * 7 + c)
            o, lepe = ((torch.randn(m, c, generator=gen) * 2 + 0.5).to(dtype) for _ in range(2))
            wide = (torch.randn(m, spread * c, generator=gen) * 3).to(dtype)
            g = wide[:, (spread - 1) * c:]  # the last C columns: rows spread·C apart
            w, b = torch.randn(c, generator=gen), torch.randn(c, generator=gen)
            dev = [t.to(device) for t in (o, lepe, wide, w, b)]
            y = gated_norm_triton(dev[0], dev[1], dev[2][:, (spread - 1) * c:], dev[3], dev[4], 1e-5)
            ref = (torch.nn.functional.layer_norm(o.double() + lepe.double(), (c,), w.double(), b.double(), 1e-5)
                   * torch.nn.functional.silu(g.double()))
            res.append({"case": [m, c, dt, spread], "y": rel_err(y.cpu(), ref), "dtype_ok": y.dtype == dtype})
    return res


def check_gated(r: dict) -> None:
    assert r["dtype_ok"], r
    assert r["y"] < TOL[r["case"][2]], (r["case"], r["y"])  # NaN fails too


def _worker(out: str) -> None:
    """Runs with TRITON_INTERPRET=1: every case on CPU, results written as JSON."""
    with open(out, "w") as f:
        json.dump({"ln": run_cases("cpu"), "gated": run_gated_cases("cpu")}, f)


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory) -> dict[str, list[dict]]:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: the GPU run (benchmarks/gpu_kernels_check.py) covers it")
    return run_under_interpreter(__file__, tmp_path_factory.mktemp("ln") / "res.json")


@pytest.mark.parametrize("i", range(len(CASES)))
def test_fused_layer_norm_matches_reference(interpreted, i):
    check(interpreted["ln"][i])


@pytest.mark.parametrize("i", range(len(GATED_CASES)))
def test_fused_gated_norm_matches_reference(interpreted, i):
    check_gated(interpreted["gated"][i])


def test_gated_norm_op_reference_path_is_the_model_composition():
    """Off CUDA nalasr.ops.gated_norm is the composition the model's eager path computes."""
    from nalasr.ops import fused_gate_wanted, gated_norm

    o, lepe, g = (torch.randn(2, 3, 5, 8) for _ in range(3))
    w, b = torch.randn(8), torch.randn(8)
    assert not fused_gate_wanted(o)
    want = torch.nn.functional.layer_norm(o + lepe, (8,), w, b, 1e-5) * torch.nn.functional.silu(g)
    assert torch.equal(gated_norm(o, lepe, g, w, b, 1e-5), want)


def test_model_routes_layer_norm_through_the_op(monkeypatch):
    """The model's norms go through nalasr.ops.layer_norm (where the CUDA rule lives), same numbers on CPU."""
    from nalasr import ops
    from nalasr.model import create_model

    calls = []
    real = ops.layer_norm
    monkeypatch.setattr(ops, "layer_norm", lambda *a: calls.append(1) or real(*a))
    model = create_model("small", 2).eval()
    x = torch.rand(1, 3, 5, 6)
    with torch.no_grad():
        y = model(x)
    assert calls
    monkeypatch.setattr(ops, "layer_norm", real)
    with torch.no_grad():
        assert torch.equal(model(x), y)


if __name__ == "__main__":
    sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "kernels")]
    _worker(sys.argv[1])
