"""Fused depthwise-conv kernels (nalasr_kernels.dwconv) against their PyTorch references.

Without CUDA the kernels run under TRITON_INTERPRET=1 in a subprocess (the flag must be set before Triton is
imported, and must not leak into other tests); with CUDA they run on the GPU in-process. Output buffers are
NaN-filled (kernel_testing.nan_filled_buffers), so an element a kernel fails to write fails the test. Sizes are odd on
purpose: W < K, H < K, ragged last pixel block, several blocks per row, C not a power of two.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
from kernel_testing import nan_filled_buffers, rel_err, run_under_interpreter
import torch.nn.functional as F

pytest.importorskip("triton")

# Relative RMS error against the reference in the same dtype. Both round (nearly) the same fp32 value once, so
# only rare one-ulp flips differ: measured ≤ 2e-7 in fp32, ≤ 1.1e-5 in fp16. bf16 measured 4e-3 under the
# interpreter, which truncates fp32 → bf16 where the GPU rounds to nearest (one ulp in about half the elements).
TOL = {"float32": 2e-6, "float16": 5e-4, "bfloat16": 8e-3}

# (B, H, W, C, K, dtype, odd: x a non-contiguous NCHW permute and the parameters in x's dtype, as in a .half() model)
GELU_CASES = [(1, 1, 1, 8, 3, "float32", False), (2, 5, 9, 24, 3, "float32", False),
              (1, 7, 33, 64, 5, "float32", True), (1, 5, 33, 128, 3, "float32", False),
              (2, 5, 9, 24, 5, "float16", False), (1, 7, 33, 64, 3, "float16", True),
              (1, 5, 33, 128, 5, "float16", False), (1, 7, 9, 8, 3, "bfloat16", False),
              (2, 5, 33, 64, 5, "bfloat16", False), (1, 5, 9, 24, 7, "float32", False),
              (1, 5, 9, 24, 1, "float16", False)]
NORM_CASES = [(1, 1, 1, 8, 3, "float32", False), (2, 5, 9, 24, 3, "float32", False),
              (1, 7, 33, 64, 5, "float32", True), (1, 3, 33, 200, 3, "float32", False),
              (1, 5, 9, 24, 5, "float16", False), (2, 7, 33, 64, 3, "float16", False),
              (1, 5, 33, 24, 3, "bfloat16", True), (1, 5, 9, 64, 5, "bfloat16", False),
              (1, 2, 17, 256, 3, "bfloat16", False), (1, 5, 9, 24, 1, "float32", False)]

GATED_CASES = [(1, 1, 1, 8, 5, "float32", False), (2, 5, 9, 24, 5, "float32", False),
               (1, 7, 33, 64, 5, "float32", True), (1, 3, 33, 200, 3, "float32", False),
               (1, 5, 9, 24, 5, "float16", False), (2, 7, 33, 64, 5, "float16", False),
               (1, 5, 33, 24, 3, "bfloat16", True), (1, 5, 9, 64, 5, "bfloat16", False)]


def _inputs(case: tuple, device: str) -> tuple[torch.Tensor, ...]:
    """x (B, H, W, C) and random non-trivial weight, bias, LN weight and bias, seeded by the case."""
    b, h, w, c, k, dt, odd = case
    gen = torch.Generator().manual_seed(((b * 31 + h) * 31 + w) * 1000 + c * 10 + k)
    x = torch.randn(b, c, h, w, generator=gen) * 2 + 0.5
    x = x.permute(0, 2, 3, 1) if odd else x.permute(0, 2, 3, 1).contiguous()
    weight = torch.randn(c, 1, k, k, generator=gen) / k
    bias, ln_b = torch.randn(c, generator=gen), torch.randn(c, generator=gen)
    ln_w = 1 + torch.randn(c, generator=gen) / 2
    dtype = getattr(torch, dt)
    return (x.to(device=device, dtype=dtype),
            *(t.to(device=device, dtype=dtype if odd else torch.float32) for t in (weight, bias, ln_w, ln_b)))


def _rows(i: int) -> int:
    """Image rows a program for case i: 1, or 3, which leaves the last program of most cases rows past the end."""
    return (1, 3)[i % 2]


def _ones_pad(i: int) -> int:
    """Columns after the C channels for case i (0 for most; a 1 and zeros for a GEMM's bias otherwise)."""
    return (0, 0, 8, 0, 0, 16)[i % 6]


def _split_ones(y: torch.Tensor, ref: torch.Tensor, pad: int) -> tuple[torch.Tensor, bool]:
    """y's first C channels, and whether y is contiguous and (pad > 0) ends in exactly the layout of
    nalasr.ops.with_ones_column (a 1, then pad − 1 zeros)."""
    from nalasr.ops import with_ones_column

    ok = y.is_contiguous()
    if pad:
        c = ref.shape[-1]
        ok = ok and y.shape[-1] == c + pad and torch.equal(y[..., c:].cpu(), with_ones_column(ref, pad)[..., c:])
        y = y[..., :c]
    return y, ok


def run_cases(device: str = "cpu") -> dict[str, list[dict]]:
    """Every case on ``device`` with NaN-filled outputs: relative errors against the references, dtype and
    layout checks. Also usable on CUDA (the kernels then compile for the GPU)."""
    from nalasr_kernels import dwconv as D

    default_rows = D.ROWS
    try:
        with nan_filled_buffers():
            return _run_cases(D, device)
    finally:
        D.ROWS = default_rows


def _run_cases(D, device: str) -> dict[str, list[dict]]:
    gelu = []
    for i, case in enumerate(GELU_CASES):
        D.ROWS = _rows(i)
        x, weight, bias, _, _ = _inputs(case, device)
        pad = _ones_pad(i)
        y = D.dwconv_gelu_triton(x, weight, bias, ones_pad=pad)
        ref = D.dwconv_gelu_reference(*(t.cpu() for t in (x, weight, bias)))  # CPU: no TF32, no cuDNN choice
        y, ok = _split_ones(y, ref, pad)
        gelu.append({"case": case, "ones_pad": pad, "y": rel_err(y, ref),
                     "ok": ok and y.dtype == x.dtype and y.shape == x.shape})
    norm = []
    for i, case in enumerate(NORM_CASES):
        D.ROWS = _rows(i)
        x, weight, bias, ln_w, ln_b = _inputs(case, device)
        w0 = weight.clone()
        s, n = D.dwconv_residual_norm_triton(x, weight, bias, ln_w, ln_b, 1e-5)
        s_ref, n_ref = D.dwconv_residual_norm_reference(*(t.cpu() for t in (x, weight, bias, ln_w, ln_b)), 1e-5)
        ok = all(t.dtype == x.dtype and t.shape == x.shape and t.is_contiguous() for t in (s, n))
        norm.append({"case": case, "s": rel_err(s, s_ref), "n": rel_err(n, n_ref),
                     "ok": ok and torch.equal(weight, w0)})  # the residual fold must not touch the weight
    gated = []
    for i, case in enumerate(GATED_CASES):
        D.ROWS = _rows(i)
        v, weight, bias, ln_w, ln_b = _inputs(case, device)
        o, g = (torch.randn(v.shape, generator=torch.Generator().manual_seed(i)).to(v) for i in (1, 2))
        pad = _ones_pad(i)
        y = D.dwconv_gated_norm_triton(v, weight, bias, o, g, ln_w, ln_b, 1e-5, ones_pad=pad)
        ref = D.dwconv_gated_norm_reference(*(t.cpu() for t in (v, weight, bias, o, g, ln_w, ln_b)), 1e-5)
        y, ok = _split_ones(y, ref, pad)
        gated.append({"case": case, "ones_pad": pad, "y": rel_err(y, ref),
                      "ok": ok and y.dtype == v.dtype and y.shape == v.shape})
    return {"gelu": gelu, "norm": norm, "gated": gated}


def _worker(out: str) -> None:
    """Runs with TRITON_INTERPRET=1: every case on CPU, results written as JSON."""
    with open(out, "w") as f:
        json.dump(run_cases("cpu"), f)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, list[dict]]:
    if torch.cuda.is_available():
        return run_cases("cuda")
    return run_under_interpreter(__file__, tmp_path_factory.mktemp("dwconv") / "res.json")


@pytest.mark.parametrize("i", range(len(GELU_CASES)))
def test_dwconv_gelu_matches_reference(results, i):
    r = results["gelu"][i]
    assert r["ok"], r
    assert r["y"] < TOL[r["case"][5]], r  # NaN (an unwritten element) fails too


@pytest.mark.parametrize("i", range(len(NORM_CASES)))
def test_dwconv_residual_norm_matches_reference(results, i):
    r = results["norm"][i]
    assert r["ok"], r
    tol = TOL[r["case"][5]]
    assert r["s"] < tol and r["n"] < tol, r


@pytest.mark.parametrize("i", range(len(GATED_CASES)))
def test_dwconv_gated_norm_matches_reference(results, i):
    r = results["gated"][i]
    assert r["ok"], r
    assert r["y"] < TOL[r["case"][5]], r


def test_references_are_the_module_compositions():
    """The references are what the model computes with nn.Conv2d, nn.GELU and nn.LayerNorm (NCHW conv)."""
    from nalasr_kernels.dwconv import dwconv_gelu_reference, dwconv_residual_norm_reference

    conv, norm = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24), torch.nn.LayerNorm(24)
    x = torch.randn(2, 5, 7, 24)
    with torch.no_grad():
        c = conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        torch.testing.assert_close(dwconv_gelu_reference(x, conv.weight, conv.bias), torch.nn.functional.gelu(c))
        s, n = dwconv_residual_norm_reference(x, conv.weight, conv.bias, norm.weight, norm.bias, norm.eps)
        torch.testing.assert_close(s, x + c)
        torch.testing.assert_close(n, norm(x + c))
        from nalasr_kernels.dwconv import dwconv_gated_norm_reference

        o, g = torch.randn(2, 2, 5, 7, 24).unbind(0)
        torch.testing.assert_close(dwconv_gated_norm_reference(x, conv.weight, conv.bias, o, g, norm.weight,
                                                               norm.bias, norm.eps),
                                   norm(o + c) * torch.nn.functional.silu(g))


@pytest.mark.parametrize("what, match", [
    ("x3d", r"x must be \(B, H, W, C\)"), ("int", "x must be float16"), ("wC", r"weight must be \(C, 1, K, K\)"),
    ("evenK", "K odd"), ("bias", r"must be \(C,\)"), ("ln", r"must be \(C,\)"), ("wideC", "C up to 256"),
])
def test_bad_arguments_raise_value_error(what, match):
    """Validation happens before any launch, so these run in-process without a GPU or the interpreter."""
    from nalasr_kernels.dwconv import dwconv_gelu_triton, dwconv_residual_norm_triton

    c = 300 if what == "wideC" else 8
    x = torch.randn(1, 4, 5, c)
    w, b, lw, lb = torch.randn(c, 1, 3, 3), torch.randn(c), torch.ones(c), torch.zeros(c)
    if what == "x3d":
        x = x[0]
    elif what == "int":
        x = x.to(torch.int32)
    elif what == "wC":
        w = torch.randn(c + 1, 1, 3, 3)
    elif what == "evenK":
        w = torch.randn(c, 1, 4, 4)
    elif what == "bias":
        b = torch.randn(c - 1)
    elif what == "ln":
        lw = torch.ones(c + 2)
    with pytest.raises(ValueError, match=match):
        if what in ("ln", "wideC"):
            dwconv_residual_norm_triton(x, w, b, lw, lb, 1e-5)
        else:
            dwconv_gelu_triton(x, w, b)


@pytest.mark.parametrize("name", ["dwconv_gelu_triton", "dwconv_residual_norm_triton", "dwconv_gated_norm_triton",
                                  "layer_norm_triton", "gated_norm_triton", "nala_attention_triton",
                                  "bias_add_triton"])
def test_package_wrappers_take_what_the_kernels_take(name):
    """nalasr_kernels' lazy wrappers (Triton imported on first call) must pass on every argument of the function
    they stand for: same parameter names and defaults."""
    import importlib
    import inspect

    import nalasr_kernels

    module = {"dwconv": ".dwconv", "layer": ".layernorm", "gated": ".layernorm", "nala": ".nala",
              "bias": ".bias_add"}[name.split("_")[0]]
    impl = getattr(importlib.import_module(module, "nalasr_kernels"), name)
    strip = lambda f: [(p.name, p.default) for p in inspect.signature(f).parameters.values()]  # noqa: E731
    assert strip(getattr(nalasr_kernels, name)) == strip(impl)


@torch.no_grad()
def test_ops_fall_back_to_the_model_composition_off_cuda():
    """nalasr.ops.dwconv_gelu / dwconv_residual_norm / dwconv_gated_norm on CPU are the block's unfused ops."""
    from nalasr.ops import dwconv_gated_norm, dwconv_gelu, dwconv_residual_norm

    def _dwconv(x, conv):  # the block's depthwise conv of a (B, H, W, C) map, through a channels-last view
        return conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)

    torch.manual_seed(0)
    x = torch.randn(2, 5, 7, 24)
    conv = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24)
    norm = torch.nn.LayerNorm(24)
    torch.nn.init.normal_(norm.weight)
    torch.testing.assert_close(dwconv_gelu(x, conv.weight, conv.bias), F.gelu(_dwconv(x, conv)), rtol=0, atol=0)
    s, n = dwconv_residual_norm(x, conv.weight, conv.bias, norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(s, x + _dwconv(x, conv), rtol=0, atol=0)
    torch.testing.assert_close(n, norm(s), rtol=0, atol=0)
    o, g = torch.randn(2, x.shape[0], 5, 7, 24).unbind(0)
    y = dwconv_gated_norm(x, conv.weight, conv.bias, o, g, norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(y, norm(o + _dwconv(x, conv)) * F.silu(g), rtol=0, atol=0)


if __name__ == "__main__":
    sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "kernels")]
    _worker(sys.argv[1])
