"""The network's CUDA inference paths, run on CPU with the Triton kernels under TRITON_INTERPRET=1.

On a GPU without autograd nalasr.ops routes the model's depthwise convs, norms, gate, conv biases and residual
updates through fused kernels (one rule: nalasr.ops.fused_inference). Here a worker process tells nalasr.ops
that CPU tensors are on the kernels' device (nalasr.ops.kernel_device), so the interpreter executes the kernels
inside a whole forward (the autograd and width checks are the real ones), and compares the image with the plain
PyTorch forward: argument plumbing from the model through the ops to the kernels (the ones column, in-place
residual GEMMs, bias adds into the conv's buffer) is checked without a GPU.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

pytest.importorskip("triton")

KERNELS = ("dwconv_residual_norm_triton", "dwconv_gated_norm_triton", "dwconv_gelu_triton", "bias_add_triton")


def run_forwards() -> dict:
    import nalasr_kernels

    import nalasr.ops as ops
    from nalasr.model import create_model

    torch.manual_seed(0)
    model = create_model("default", 4).eval()
    model.set_attention_backend("reference")  # the attention kernel has its own parity tests (test_kernels_parity)
    with torch.no_grad():  # non-trivial layer scales and upsampler, as a trained network has
        for p in model.parameters():
            if p.dim() == 1 and p.numel() == model.cfg.dim:
                p.uniform_(0.1, 0.5)
        torch.nn.init.normal_(model.upsampler[0].weight, std=0.02)
    x = torch.rand(1, 3, 6, 9, generator=torch.Generator().manual_seed(1))
    calls: dict[str, int] = {}
    real = {name: getattr(nalasr_kernels, name) for name in KERNELS}

    def counted(name):
        def call(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            if name in ("dwconv_gated_norm_triton", "dwconv_gelu_triton") and args[-1]:
                calls["ones_column"] = calls.get("ones_column", 0) + 1
            return real[name](*args, **kwargs)
        return call

    kernel_device = ops.kernel_device
    with torch.inference_mode():
        plain = model(x)
        ops.kernel_device = lambda t: True  # CPU tensors count as the GPU's
        for name in KERNELS:
            setattr(nalasr_kernels, name, counted(name))
        try:
            fused = model(x)
        finally:
            ops.kernel_device = kernel_device
            for name in KERNELS:
                setattr(nalasr_kernels, name, real[name])
    err = float((fused - plain).norm() / plain.norm())
    return {"rel_err": err, "calls": calls, "shape": list(fused.shape)}


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    from kernel_testing import run_under_interpreter

    return run_under_interpreter(__file__, tmp_path_factory.mktemp("fused") / "res.json", timeout=600)


def test_fused_inference_forward_equals_plain_forward(result):
    assert result["shape"] == [1, 3, 24, 36]
    assert result["rel_err"] < 1e-5, result
    # every fused path ran: 16 blocks (CPE+norm, gate, FFN conv), both residual GEMMs from the ones column,
    # 6 conv biases (head, 4 groups, tail)
    calls = result["calls"]
    for name in ("dwconv_residual_norm_triton", "dwconv_gated_norm_triton", "dwconv_gelu_triton"):
        assert calls.get(name, 0) == 16, result
    assert calls.get("ones_column", 0) == 2 * 16, result
    assert calls.get("bias_add_triton", 0) >= 6, result


if __name__ == "__main__":  # the interpreter worker: python test_fused_inference_paths.py OUT.json
    sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "kernels")]
    with open(sys.argv[-1], "w") as f:
        json.dump(run_forwards(), f)
