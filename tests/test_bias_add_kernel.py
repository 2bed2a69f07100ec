"""The fused bias (+ residual) add (nalasr_kernels.bias_add) against its PyTorch reference, and the op that
uses it (nalasr.ops.conv2d_bias_add) against a biased nn.Conv2d.

Without CUDA the kernel runs under TRITON_INTERPRET=1 in a subprocess; with CUDA on the GPU in-process. The
kernel writes into x, so "unwritten" shows as x's own value: x is NaN-filled where the reference is not.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
from kernel_testing import rel_err, run_under_interpreter

pytest.importorskip("triton")

TOL = {"float32": 1e-6, "float16": 5e-4, "bfloat16": 4e-3}
# (rows, C, dtype, residual): C not a power of two, rows not a multiple of the block, C = 3 (the head conv)
CASES = [(1, 3, "float32", False), (37, 24, "float32", True), (300, 64, "float16", True),
         (129, 48, "float16", False), (70, 200, "bfloat16", True), (5, 256, "float32", False)]


def run_cases(device: str = "cpu") -> list[dict]:
    from nalasr_kernels import bias_add as K

    out = []
    for m, c, dt, has_r in CASES:
        g = torch.Generator().manual_seed(m * 1000 + c)
        dtype = getattr(torch, dt)
        x, r = (torch.randn(m, c, generator=g).to(device, dtype) for _ in range(2))
        b = torch.randn(c, generator=g).to(device, dtype)
        r = r if has_r else None
        ref = K.bias_add_reference(*(t if t is None else t.cpu() for t in (x, b, r)))
        ptr = x.data_ptr()
        y = K.bias_add_triton(x, b, r)
        out.append({"case": [m, c, dt, has_r], "err": rel_err(y, ref), "in_place": y.data_ptr() == ptr})
        # a row block the kernel skipped would keep x's values: NaN there must show in the error
        xn = torch.full((m, c), float("nan"), dtype=dtype, device=device)
        xn[: m // 2] = 0
        partial = K.bias_add_triton(xn[: m // 2], b)  # rows past the view stay NaN
        out[-1]["kept_outside"] = bool(torch.isnan(xn[m // 2:]).all()) and bool(torch.isfinite(partial).all())
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    if torch.cuda.is_available():
        return run_cases("cuda")
    return run_under_interpreter(__file__, tmp_path_factory.mktemp("bias_add") / "res.json")


@pytest.mark.parametrize("i", range(len(CASES)))
def test_bias_add_matches_reference(results, i):
    r = results[i]
    assert r["in_place"] and r["kept_outside"], r
    assert r["err"] < TOL[r["case"][2]], r


def test_bad_arguments_raise_value_error():
    from nalasr_kernels.bias_add import bias_add_triton

    with pytest.raises(ValueError, match="contiguous"):
        bias_add_triton(torch.randn(4, 6).t(), torch.randn(4))
    with pytest.raises(ValueError, match="bias"):
        bias_add_triton(torch.randn(4, 6), torch.randn(5))


@pytest.mark.parametrize("residual", [False, True])
def test_conv2d_bias_add_is_a_biased_conv_off_cuda(residual):
    """On CPU the op is nn.Conv2d's biased conv (plus the residual), in the layouts the trunk passes."""
    from nalasr.ops import conv2d_bias_add

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 8, 3, padding=1)
    x = torch.randn(2, 16, 5, 7).contiguous(memory_format=torch.channels_last)
    r = torch.randn(2, 5, 7, 8).permute(0, 3, 1, 2) if residual else None
    with torch.no_grad():
        want = conv(x) + (r if residual else 0)
        got = conv2d_bias_add(x, conv.weight, conv.bias, r)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":  # the interpreter worker: python test_bias_add_kernel.py OUT.json
    sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "kernels")]
    with open(sys.argv[-1], "w") as f:
        json.dump(run_cases("cpu"), f)
