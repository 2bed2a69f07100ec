"""Token-mixing ops. ``nala_attention`` picks the fused Triton kernel on CUDA and the reference elsewhere."""

from __future__ import annotations

import functools
import os
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from .nala import NalaParams, nala_attention_reference, nala_features, rope_angles
from .ones_column import ONES_PAD, bias_column_weight, with_ones_column

Backend = Literal["auto", "triton", "reference"]
BACKENDS: tuple[str, ...] = ("auto", "triton", "reference")

__all__ = ["Backend", "BACKENDS", "NalaParams", "ONES_PAD", "add_into", "bias_column_weight", "conv2d_bias_add",
           "depthwise_conv", "dwconv_gated_norm", "dwconv_gelu", "dwconv_residual_norm", "fused_conv_bias_wanted",
           "fused_dwconv_wanted", "fused_gate_wanted", "fused_residual_wanted", "gated_norm", "layer_norm",
           "nala_attention", "nala_attention_reference", "nala_features", "reusable", "rope_angles",
           "triton_available", "with_ones_column"]


@functools.cache
def triton_available() -> bool:
    """True when the fused kernels can run (Triton importable and a CUDA device present)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        import nalasr_kernels

        return bool(getattr(nalasr_kernels, "HAS_TRITON", False))
    except ImportError:
        return False


def nala_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    params: NalaParams = NalaParams(),
    rope_hw: tuple[int, int] | None = None,
    rope_base: float = 100.0,
    backend: Backend = "auto",
) -> Tensor:
    """NaLa attention, q, k, v: (B, N, H, D) → (B, N, H, D). See :mod:`nalasr.ops.nala` for the math.

    ``backend="auto"`` uses the fused Triton kernel for CUDA tensors when it is available, the PyTorch
    reference otherwise; ``"triton"`` insists on the kernel (an error if it cannot run).
    """
    if backend == "reference" or (backend == "auto" and not (q.is_cuda and triton_available())):
        return nala_attention_reference(q, k, v, params, rope_hw, rope_base)
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if not q.is_cuda or not triton_available():
        raise RuntimeError("the triton attention backend needs a CUDA device and the triton package")
    from nalasr_kernels import nala_attention_triton

    return nala_attention_triton(q, k, v, params, rope_hw, rope_base)


# Below this many rows an eager forward is bound by the CPU launching kernels, not by the GPU, and
# F.layer_norm's launch is cheaper than the Triton one (H200, x4 at 192×256 LR, 49K rows: 15.5 ms eager with
# PyTorch's LayerNorm, 19.8 ms with the fused one); above it the fused kernel wins on the GPU (518K rows:
# 59.2 → 34.1 ms). Inside a CUDA graph capture launches cost nothing at replay, so the fused kernel is used
# at every size there (3.9 ms at 49K rows against 6.3 ms). benchmarks/results/h200/kernel_diag_2026-11-29.json.
FUSED_LN_MIN_ROWS = 1 << 18


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """LayerNorm over the last axis of x (..., C).

    On CUDA the fused Triton kernel replaces ``F.layer_norm`` where it is faster: from FUSED_LN_MIN_ROWS rows
    up, and always while a CUDA graph is being captured. ``NALASR_FUSED_LAYERNORM=1`` uses it at every size,
    ``=0`` never (parity: benchmarks/gpu_kernels_check.py on the GPU, tests/test_layernorm_kernel.py on CPU).
    """
    c = x.shape[-1]
    if x.is_cuda and c <= 256 and triton_available():
        mode = os.environ.get("NALASR_FUSED_LAYERNORM", "auto")
        if mode == "1" or (mode != "0" and (x.numel() >= FUSED_LN_MIN_ROWS * c
                                            or torch.cuda.is_current_stream_capturing())):
            from nalasr_kernels import layer_norm_triton

            return layer_norm_triton(x, (c,), weight, bias, eps)
    return F.layer_norm(x, (c,), weight, bias, eps)


def _kernel_device(x: Tensor) -> bool:
    """Is x where the Triton kernels run: on CUDA, with Triton present?"""
    return x.is_cuda and triton_available()


def _fused_inference(x: Tensor, flag: str, default_on: bool) -> bool:
    """Should an inference-only fused kernel run on tensors like x: no autograd, rows ≤ 256 wide, the environment
    ``flag`` (``=0`` off, ``=1`` on; unset: ``default_on``), and x on the kernels' device."""
    setting = os.environ.get(flag)
    on = setting != "0" if default_on else setting == "1"
    return not torch.is_grad_enabled() and x.shape[-1] <= 256 and on and _kernel_device(x)


def fused_gate_wanted(x: Tensor) -> bool:
    """Should :func:`gated_norm` on tensors like x run the fused kernel? On CUDA without autograd: one pass
    over o, LePE and g instead of four elementwise passes; 27.3 → 25.6 ms for the x4 forward at 540×960 on the
    H200 (benchmarks/fusion_gpu.py). ``NALASR_FUSED_GATE=0`` turns it off."""
    return _fused_inference(x, "NALASR_FUSED_GATE", default_on=True)


def gated_norm(o: Tensor, lepe: Tensor, g: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """LayerNorm(o + lepe)·SiLU(g) over the last axis, (..., C) each (g may be a strided C-wide view)."""
    if fused_gate_wanted(o):
        from nalasr_kernels import gated_norm_triton

        return gated_norm_triton(o, lepe, g, weight, bias, eps)
    return F.layer_norm(o + lepe, (o.shape[-1],), weight, bias, eps) * F.silu(g)


def fused_dwconv_wanted(x: Tensor) -> bool:
    """Should :func:`dwconv_gelu` / :func:`dwconv_residual_norm` / :func:`dwconv_gated_norm` on tensors like x run
    the fused kernels? On CUDA without autograd: each saves one or two passes over the map; 25.6 → 19.9 ms for
    the x4 forward at 540×960 on the H200 (benchmarks/fusion_gpu.py, results/h200/session7/fusion.json; parity:
    tests/test_dwconv_kernel.py). ``NALASR_FUSED_DWCONV=0`` turns them off."""
    return _fused_inference(x, "NALASR_FUSED_DWCONV", default_on=True)


def fused_residual_wanted(x: Tensor) -> bool:
    """Should a block add γ·Linear(y) to its residual stream through one in-place GEMM (β = 1, the bias in a ones
    column the fused kernel writes after y) rather than a product and an add pass? Only where the fused depthwise
    kernels run (they write the ones column). ``NALASR_FUSED_RESIDUAL=0`` turns it off."""
    return fused_dwconv_wanted(x) and _fused_inference(x, "NALASR_FUSED_RESIDUAL", default_on=True)


# Inference writes results into intermediates it owns instead of allocating new ones: the same values
# (a + b = b + a exactly), but on CPU every fresh (B, H, W, C) buffer costs page faults (glibc hands large
# blocks back to the OS when they are freed), as much as the memory-bound op itself.


def reusable(buf: Tensor, *others: Tensor) -> bool:
    """May ``buf``, a fresh intermediate, receive an op's result with ``others``? Only without autograd and
    when the result has buf's dtype anyway (under autocast a conv's output is bf16 next to an fp32 stream)."""
    return not torch.is_grad_enabled() and all(o.dtype == buf.dtype for o in others)


def add_into(buf: Tensor, other: Tensor) -> Tensor:
    """buf + other, into buf where :func:`reusable` allows."""
    return buf.add_(other) if reusable(buf, other) else buf + other


def fused_conv_bias_wanted(x: Tensor) -> bool:
    """Should :func:`conv2d_bias_add` add the bias (and residual) with the fused kernel? On CUDA without autograd
    (PyTorch's own bias add on a channels-last map is a strided broadcast pass). ``NALASR_FUSED_CONV_BIAS=0``
    turns it off."""
    return _fused_inference(x, "NALASR_FUSED_CONV_BIAS", default_on=True)


def conv2d_bias_add(x: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None = None) -> Tensor:
    """conv2d(x, weight, bias, padding K // 2) (+ residual): x (B, C_in, H, W) → (B, C_out, H, W).

    On CUDA inference, when the conv's output is channels-last, the conv runs without bias and one pass over
    its token-major view adds bias and residual into its buffer (:mod:`nalasr_kernels.bias_add`)."""
    k = weight.shape[-1]
    fused = fused_conv_bias_wanted(bias)  # (C_out,): on x's device, C_out ≤ 256
    y = F.conv2d(x, weight, None if fused else bias, padding=k // 2)
    if fused:
        tokens = y.permute(0, 2, 3, 1)
        if tokens.is_contiguous():
            from nalasr_kernels import bias_add_triton

            bias_add_triton(tokens, bias, None if residual is None else residual.permute(0, 2, 3, 1))
            return y
        y = y + bias.view(1, -1, 1, 1)
    return y if residual is None else add_into(y, residual)


def depthwise_conv(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """Depthwise conv of a token-major map: (B, H, W, C) → (B, H, W, C), weight (C, 1, K, K), zero padding K // 2,
    through a channels-last (B, C, H, W) view (a free permute when x is contiguous)."""
    k = weight.shape[-1]
    return F.conv2d(x.permute(0, 3, 1, 2), weight, bias, padding=k // 2, groups=x.shape[-1]).permute(0, 2, 3, 1)


def dwconv_gelu(x: Tensor, weight: Tensor, bias: Tensor, ones_column: bool = False) -> Tensor:
    """GELU(depthwise conv(x) + bias) on a (B, H, W, C) map; weight (C, 1, K, K), zero padding K // 2.
    ``ones_column``: the result in the :func:`with_ones_column` layout, (B, H, W, C + ONES_PAD)."""
    if fused_dwconv_wanted(x):
        from nalasr_kernels import dwconv_gelu_triton

        return dwconv_gelu_triton(x, weight, bias, ONES_PAD if ones_column else 0)
    y = F.gelu(depthwise_conv(x, weight, bias))
    return with_ones_column(y) if ones_column else y


def dwconv_residual_norm(x: Tensor, weight: Tensor, bias: Tensor, ln_weight: Tensor, ln_bias: Tensor,
                         eps: float) -> tuple[Tensor, Tensor]:
    """(s, LayerNorm(s)) with s = x + depthwise conv(x) + bias, on a (B, H, W, C) map (the block's CPE)."""
    if fused_dwconv_wanted(x):
        from nalasr_kernels import dwconv_residual_norm_triton

        return dwconv_residual_norm_triton(x, weight, bias, ln_weight, ln_bias, eps)
    s = x + depthwise_conv(x, weight, bias)
    return s, layer_norm(s, ln_weight, ln_bias, eps)


def dwconv_gated_norm(v: Tensor, weight: Tensor, bias: Tensor, o: Tensor, g: Tensor, ln_weight: Tensor,
                      ln_bias: Tensor, eps: float, ones_column: bool = False) -> Tensor:
    """LayerNorm(o + depthwise conv(v) + bias)·SiLU(g) on (B, H, W, C) maps (the mixer's LePE, norm and gate):
    one fused pass on CUDA inference (unless NALASR_FUSED_DWCONV=0), else the conv and then :func:`gated_norm`.
    ``ones_column``: the result in the :func:`with_ones_column` layout, (B, H, W, C + ONES_PAD)."""
    if fused_dwconv_wanted(v) and fused_gate_wanted(v):
        from nalasr_kernels import dwconv_gated_norm_triton

        return dwconv_gated_norm_triton(v, weight, bias, o, g, ln_weight, ln_bias, eps, ONES_PAD if ones_column else 0)
    y = gated_norm(o, depthwise_conv(v, weight, bias), g, ln_weight, ln_bias, eps)
    return with_ones_column(y) if ones_column else y
