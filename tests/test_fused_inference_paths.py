"""The network's CUDA inference paths, run on CPU with the Triton kernels under TRITON_INTERPRET=1.

On a GPU without autograd the model routes its depthwise convs, norms, gate, conv biases and residual updates
through fused kernels (nalasr.ops: fused_dwconv_wanted, fused_gate_wanted, fused_residual_wanted,
fused_conv_bias_wanted). Here a worker process tells nalasr.ops the fused kernels may run on CPU tensors, so
the interpreter executes them inside a whole forward (the flags, autograd and width checks are the real ones), and compares the image with the plain PyTorch forward:
argument plumbing from the model through the ops to the kernels (the ones column, in-place residual GEMMs,
bias adds into the conv's buffer) is checked without a GPU.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

pytest.importorskip("triton")


def run_forwards() -> dict:
    import nalasr.ops as ops
    from nalasr.model import create_model

    torch.manual_seed(0)
    model = create_model("default", 4).eval()
    with torch.no_grad():  # non-trivial layer scales and upsampler, as a trained network has
        for p in model.parameters():
            if p.dim() == 1 and p.numel() == model.cfg.dim:
                p.uniform_(0.1, 0.5)
        torch.nn.init.normal_(model.upsampler[0].weight, std=0.02)
    x = torch.rand(1, 3, 6, 9, generator=torch.Generator().manual_seed(1))
    calls: dict[str, int] = {}
    decide, kernel_device = ops._fused_inference, ops._kernel_device

    def counted(t, flag, default_on):
        on = decide(t, flag, default_on)
        calls[flag] = calls.get(flag, 0) + on
        return on

    with torch.inference_mode():
        plain = model(x)
        ops._fused_inference, ops._kernel_device = counted, lambda t: True  # CPU tensors count as the GPU's
        try:
            fused = model(x)
        finally:
            ops._fused_inference, ops._kernel_device = decide, kernel_device
    err = float((fused - plain).norm() / plain.norm())
    return {"rel_err": err, "calls": calls, "shape": list(fused.shape)}


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    from kernel_testing import run_under_interpreter

    return run_under_interpreter(__file__, tmp_path_factory.mktemp("fused") / "res.json", timeout=600)


def test_fused_inference_forward_equals_plain_forward(result):
    assert result["shape"] == [1, 3, 24, 36]
    assert result["rel_err"] < 1e-5, result
    # every fused path ran: 16 blocks (CPE+norm, gate, FFN conv, two residual GEMMs), 6 conv biases
    assert result["calls"].get("NALASR_FUSED_DWCONV", 0) >= 16 * 3, result
    assert result["calls"].get("NALASR_FUSED_RESIDUAL", 0) >= 16, result
    assert result["calls"].get("NALASR_FUSED_CONV_BIAS", 0) >= 6, result


if __name__ == "__main__":  # the interpreter worker: python test_fused_inference_paths.py OUT.json
    sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "kernels")]
    with open(sys.argv[-1], "w") as f:
        json.dump(run_forwards(), f)
