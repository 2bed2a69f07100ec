"""Fused Triton kernels for NaLa attention (docs/design.md §2), beside the PyTorch reference in ``nalasr.ops.nala``.

This package never imports ``nalasr`` and imports fine without Triton: ``HAS_TRITON`` says whether the kernels
can be built, and the Triton module (:mod:`nalasr_kernels.nala`) is only imported on first use, so importing
this package costs nothing when Triton is missing.

    nala_attention_triton(q, k, v, params=None, rope_hw=None, rope_base=100.0) -> o
        q, k: (B, N, H, D), v: (B, N, H, Dv), any strides; o: (B, N, H, Dv) contiguous, in q's dtype.
        Same signature and math as ``nalasr.ops.nala.nala_attention_reference``; differentiable in q, k, v.
    layer_norm_triton(x, normalized_shape, weight, bias, eps) -> y
        LayerNorm over the last axis (C ≤ 256); the signature and math of ``torch.nn.functional.layer_norm``.
    dwconv_gelu_triton(x, weight, bias, ones_pad=0) -> y
    dwconv_residual_norm_triton(x, weight, bias, ln_w, ln_b, eps) -> (s, n)
    dwconv_gated_norm_triton(v, weight, bias, o, g, ln_w, ln_b, eps, ones_pad=0) -> y
        Depthwise conv on (B, H, W, C) maps fused with its epilogue, inference only (:mod:`nalasr_kernels.dwconv`).
    bias_add_triton(x, bias, residual=None) -> x
        x + bias (+ residual) over the last axis, in place, inference only (:mod:`nalasr_kernels.bias_add`).
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["HAS_TRITON", "bias_add_triton", "dwconv_gated_norm_triton", "dwconv_gelu_triton",
           "dwconv_residual_norm_triton", "gated_norm_triton", "layer_norm_triton", "nala_attention_triton"]


def _probe_triton() -> bool:
    # A guarded import rather than find_spec alone: a broken Triton install (wrong CUDA, missing libs) must
    # read as "no Triton" so the caller falls back to the reference instead of failing at the first call.
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:
        return False
    return True


HAS_TRITON: bool = _probe_triton()


def _impl(module: str, name: str) -> Any:
    """``name`` from the Triton module ``module``, imported on first use (ImportError without Triton)."""
    if not HAS_TRITON:
        raise ImportError("nalasr_kernels needs the triton package (pip install triton)")
    return getattr(importlib.import_module(module, __name__), name)


def nala_attention_triton(q, k, v, params: Any = None, rope_hw: tuple[int, int] | None = None,
                          rope_base: float = 100.0):
    """Fused NaLa attention; see :func:`nalasr_kernels.nala.binding.nala_attention_triton`."""
    return _impl(".nala", "nala_attention_triton")(q, k, v, params, rope_hw, rope_base)


def layer_norm_triton(x, normalized_shape, weight, bias, eps: float = 1e-5):
    """Fused LayerNorm; see :func:`nalasr_kernels.layernorm.layer_norm_triton`."""
    return _impl(".layernorm", "layer_norm_triton")(x, normalized_shape, weight, bias, eps)


def gated_norm_triton(o, lepe, g, weight, bias, eps: float = 1e-5):
    """Fused LayerNorm(o + lepe)·SiLU(g), inference; see :func:`nalasr_kernels.layernorm.gated_norm_triton`."""
    return _impl(".layernorm", "gated_norm_triton")(o, lepe, g, weight, bias, eps)


def dwconv_gelu_triton(x, weight, bias, ones_pad: int = 0):
    """GELU(depthwise conv + bias), inference; see :func:`nalasr_kernels.dwconv.dwconv_gelu_triton`."""
    return _impl(".dwconv", "dwconv_gelu_triton")(x, weight, bias, ones_pad)


def dwconv_residual_norm_triton(x, weight, bias, ln_weight, ln_bias, eps: float = 1e-5):
    """(x + depthwise conv + bias, its LayerNorm), inference; see :mod:`nalasr_kernels.dwconv`."""
    return _impl(".dwconv", "dwconv_residual_norm_triton")(x, weight, bias, ln_weight, ln_bias, eps)


def dwconv_gated_norm_triton(v, weight, bias, o, g, ln_weight, ln_bias, eps: float = 1e-5, ones_pad: int = 0):
    """LayerNorm(o + depthwise conv(v) + bias)·SiLU(g), inference; see :mod:`nalasr_kernels.dwconv`."""
    return _impl(".dwconv", "dwconv_gated_norm_triton")(v, weight, bias, o, g, ln_weight, ln_bias, eps, ones_pad)


def bias_add_triton(x, bias, residual=None):
    """x + bias (+ residual) over the last axis, into x, inference; see :mod:`nalasr_kernels.bias_add`."""
    return _impl(".bias_add", "bias_add_triton")(x, bias, residual)


def __getattr__(name: str) -> Any:  # NalaAttentionFunction without importing Triton up front
    if name == "NalaAttentionFunction":
        return _impl(".nala", "NalaAttentionFunction")
    raise AttributeError(f"module 'nalasr_kernels' has no attribute {name!r}")
