"""The network's ops: each picks its fast path here, once, so the model's blocks read as the math.

Three kinds of fast path exist, all for inference only (no autograd), all with the same values as the plain
PyTorch composition they replace (tests/test_fused_inference_paths.py, tests/test_model_speedpaths.py):

- fused Triton kernels (``nalasr_kernels``) on CUDA: attention, LayerNorm, the depthwise convs with their
  epilogues, the conv bias adds. :func:`fused_inference` is the one rule that says when they run;
- the *ones column*: a fused kernel writes ``[y | 1 | 0…]`` so the next Linear's bias rides in the GEMM and the
  residual update is one in-place ``addmm_`` (:func:`linear_residual`, :mod:`.ones_column`);
- in place: without autograd an op writes into an intermediate it owns instead of a new (B, H, W, C)
  buffer; on CPU every fresh buffer costs page faults (glibc unmaps large freed blocks), as much as the
  memory-bound op itself (:func:`reusable`, :func:`residual_add`).

``NALASR_REFERENCE=1`` (:mod:`nalasr.settings`) turns off the kernels everywhere, attention included.
"""

from __future__ import annotations

import functools
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import settings
from .nala import NalaParams, nala_attention_reference, nala_features, rope_angles
from .ones_column import ONES_PAD, bias_column_weight, with_ones_column

Backend = Literal["auto", "triton", "reference"]
BACKENDS: tuple[str, ...] = ("auto", "triton", "reference")

__all__ = ["BACKENDS", "ONES_PAD", "Backend", "NalaParams", "add_into", "bias_column_weight", "conv2d_bias_add",
           "depthwise_conv", "dwconv_gated_norm", "dwconv_gelu", "dwconv_residual_norm", "fused_gate_wanted",
           "fused_inference", "gated_norm", "kernel_device", "layer_norm", "linear_residual", "nala_attention",
           "nala_attention_reference", "nala_features", "residual_add", "reusable", "rope_angles",
           "triton_available", "with_ones_column"]


# ------------------------------------------------------------------------------------------ the rules


@functools.cache
def triton_available() -> bool:
    """True when the fused kernels can run (Triton importable and a CUDA device present)."""
    try:
        if not torch.cuda.is_available():
            return False
        import nalasr_kernels

        return bool(getattr(nalasr_kernels, "HAS_TRITON", False))
    except ImportError:
        return False


def kernel_device(x: Tensor) -> bool:
    """Is x where the Triton kernels run: on CUDA, with Triton present, and not forced to the reference?"""
    return x.is_cuda and not settings.get().reference and triton_available()


def fused_inference(x: Tensor) -> bool:
    """Should an inference-only fused kernel run on tensors like x (..., C)? Without autograd, C ≤ 256 (one
    row per program), on the kernels' device. Measured on the H200, x4 at 540×960: 27.3 → 19.9 ms from the
    fused depthwise convs and gate, and the bias adds on top (docs/performance.md)."""
    return not torch.is_grad_enabled() and x.shape[-1] <= 256 and kernel_device(x)


def fused_gate_wanted(x: Tensor) -> bool:
    """Does :func:`gated_norm` / :func:`dwconv_gated_norm` on tensors like x run fused? (:func:`fused_inference`)"""
    return fused_inference(x)


def reusable(buf: Tensor, *others: Tensor) -> bool:
    """May ``buf``, a fresh intermediate, receive an op's result with ``others``? Only without autograd and
    when the result has buf's dtype anyway (under autocast a conv's output is bf16 next to an fp32 stream)."""
    return not torch.is_grad_enabled() and all(o.dtype == buf.dtype for o in others)


def add_into(buf: Tensor, other: Tensor) -> Tensor:
    """buf + other, into buf where :func:`reusable` allows (a + b = b + a exactly: the same bits)."""
    return buf.add_(other) if reusable(buf, other) else buf + other


residual_add = add_into  # the name the blocks read: x + f(x), into x's buffer at inference


def _mul_into(buf: Tensor, other: Tensor) -> Tensor:
    return buf.mul_(other) if reusable(buf, other) else buf * other


# ------------------------------------------------------------------------------------------- attention


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

    ``backend="auto"`` uses the fused Triton kernel for CUDA tensors when it is available (and
    NALASR_REFERENCE is not set), the PyTorch reference otherwise; ``"triton"`` insists on the kernel.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        backend = "triton" if kernel_device(q) else "reference"
    if backend == "reference":
        return nala_attention_reference(q, k, v, params, rope_hw, rope_base)
    if not q.is_cuda or not triton_available():
        raise RuntimeError("the triton attention backend needs a CUDA device and the triton package")
    from nalasr_kernels import nala_attention_triton

    return nala_attention_triton(q, k, v, params, rope_hw, rope_base)


# ------------------------------------------------------------------------------------------ norms, gate

# Below this many rows an eager forward is bound by the CPU launching kernels, and F.layer_norm's launch is
# cheaper than the Triton one (H200, x4 at 192×256 LR, 49K rows: 15.5 ms eager with PyTorch's LayerNorm,
# 19.8 ms fused); above it the fused kernel wins (518K rows: 59.2 → 34.1 ms). Inside a CUDA graph capture
# launches cost nothing at replay, so the fused kernel is used at every size there (3.9 against 6.3 ms).
FUSED_LN_MIN_ROWS = 1 << 18


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """LayerNorm over the last axis of x (..., C); the fused kernel on CUDA from FUSED_LN_MIN_ROWS rows up and
    while a CUDA graph is captured (it is differentiable, so training uses it too)."""
    c = x.shape[-1]
    if x.is_cuda and c <= 256 and kernel_device(x) and (x.numel() >= FUSED_LN_MIN_ROWS * c
                                                      or torch.cuda.is_current_stream_capturing()):
        from nalasr_kernels import layer_norm_triton

        return layer_norm_triton(x, (c,), weight, bias, eps)
    return F.layer_norm(x, (c,), weight, bias, eps)


def gated_norm(o: Tensor, lepe: Tensor, g: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """LayerNorm(o + lepe)·SiLU(g) over the last axis, (..., C) each (g may be a strided C-wide view)."""
    if fused_inference(o):
        from nalasr_kernels import gated_norm_triton

        return gated_norm_triton(o, lepe, g, weight, bias, eps)
    return F.layer_norm(o + lepe, (o.shape[-1],), weight, bias, eps) * F.silu(g)


# --------------------------------------------------------------------------------------------- convs


def depthwise_conv(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """Depthwise conv of a token-major map: (B, H, W, C) → (B, H, W, C), weight (C, 1, K, K), zero padding K // 2,
    through a channels-last (B, C, H, W) view (a free permute when x is contiguous)."""
    k = weight.shape[-1]
    return F.conv2d(x.permute(0, 3, 1, 2), weight, bias, padding=k // 2, groups=x.shape[-1]).permute(0, 2, 3, 1)


def conv2d_bias_add(x: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None = None) -> Tensor:
    """conv2d(x, weight, bias, padding K // 2) (+ residual): x (B, C_in, H, W) → (B, C_out, H, W).

    On CUDA inference, when the conv's output is channels-last, the conv runs without bias and one pass over
    its token-major view adds bias and residual into its buffer: PyTorch's own bias add on a channels-last
    map is a strided broadcast pass (:mod:`nalasr_kernels.bias_add`)."""
    k = weight.shape[-1]
    fused = fused_inference(bias)  # (C_out,): on x's device, C_out ≤ 256
    y = F.conv2d(x, weight, None if fused else bias, padding=k // 2)
    if fused:
        tokens = y.permute(0, 2, 3, 1)
        if tokens.is_contiguous():
            from nalasr_kernels import bias_add_triton

            bias_add_triton(tokens, bias, None if residual is None else residual.permute(0, 2, 3, 1))
            return y
        y = y + bias.view(1, -1, 1, 1)
    return y if residual is None else add_into(y, residual)


def dwconv_residual_norm(x: Tensor, weight: Tensor, bias: Tensor, ln_weight: Tensor, ln_bias: Tensor,
                         eps: float) -> tuple[Tensor, Tensor]:
    """(s, LayerNorm(s)) with s = x + depthwise conv(x) + bias, on a (B, H, W, C) map (the block's CPE).
    s is a new tensor: the caller's x is left alone, and the block may update s in place."""
    if fused_inference(x):
        from nalasr_kernels import dwconv_residual_norm_triton

        return dwconv_residual_norm_triton(x, weight, bias, ln_weight, ln_bias, eps)
    s = add_into(depthwise_conv(x, weight, bias), x)
    return s, layer_norm(s, ln_weight, ln_bias, eps)


def dwconv_gelu(x: Tensor, weight: Tensor, bias: Tensor, ones_column: bool = False) -> Tensor:
    """GELU(depthwise conv(x) + bias) on a (B, H, W, C) map; weight (C, 1, K, K), zero padding K // 2.
    ``ones_column``: the result in the :func:`with_ones_column` layout, (B, H, W, C + ONES_PAD)."""
    if fused_inference(x):
        from nalasr_kernels import dwconv_gelu_triton

        return dwconv_gelu_triton(x, weight, bias, ONES_PAD if ones_column else 0)
    y = _conv_gelu(x, weight, bias)
    return with_ones_column(y) if ones_column else y


def _conv_gelu(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    h = depthwise_conv(x, weight, bias)
    return torch.ops.aten.gelu_(h) if reusable(h) else F.gelu(h)


def dwconv_gated_norm(v: Tensor, weight: Tensor, bias: Tensor, o: Tensor, g: Tensor, ln_weight: Tensor,
                      ln_bias: Tensor, eps: float, ones_column: bool = False) -> Tensor:
    """LayerNorm(o + depthwise conv(v) + bias)·SiLU(g) on (B, H, W, C) maps (the mixer's LePE, norm and gate):
    one fused pass on CUDA inference, else the conv and then :func:`gated_norm`.
    ``ones_column``: the result in the :func:`with_ones_column` layout, (B, H, W, C + ONES_PAD)."""
    if fused_inference(v):
        from nalasr_kernels import dwconv_gated_norm_triton

        return dwconv_gated_norm_triton(v, weight, bias, o, g, ln_weight, ln_bias, eps, ONES_PAD if ones_column else 0)
    y = gated_norm(o, depthwise_conv(v, weight, bias), g, ln_weight, ln_bias, eps)
    return with_ones_column(y) if ones_column else y


# -------------------------------------------------------------------- the blocks' steps, fast path chosen


def conv_gelu(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """GELU(depthwise conv(x) + bias): (B, H, W, C) → (B, H, W, C), or (B, H, W, C + ONES_PAD) in the ones-column
    layout when the fused kernel runs (it writes the column for free; :func:`linear_residual` reads both)."""
    if fused_inference(x):
        return dwconv_gelu(x, weight, bias, ones_column=True)
    return _conv_gelu(x, weight, bias)


def lepe_gated_norm(v: Tensor, weight: Tensor, bias: Tensor, o: Tensor, g: Tensor, ln_weight: Tensor,
                    ln_bias: Tensor, eps: float) -> Tensor:
    """LayerNorm(o + LePE(v))·SiLU(g), LePE a depthwise conv with bias; v, g (B, H, W, C), o the attention's
    (B, H·W, heads, D) output (possibly a head-major view). (B, H, W, C), or the ones-column layout when the
    fused kernel runs."""
    if fused_inference(v):
        return dwconv_gated_norm(v, weight, bias, o.reshape(v.shape), g, ln_weight, ln_bias, eps, ones_column=True)
    # o + LePE(v), summed in the conv's token-major output: o itself is never copied to token-major.
    s = add_into(depthwise_conv(v, weight, bias).reshape(o.shape), o).reshape(v.shape)
    return _mul_into(layer_norm(s, ln_weight, ln_bias, eps), F.silu(g, inplace=reusable(g)))


def _folded(weight: Tensor, bias: Tensor, gamma: Tensor) -> tuple[Tensor, Tensor]:
    """The (C_out, C_in) weight and (C_out,) bias with the layer scale γ folded in: γ·(x·Wᵀ + b) = x·W'ᵀ + b'.
    Two C_out·C_in products, and the residual update after it is a plain add, which PyTorch vectorises on CUDA
    (x + γ·y with a broadcast γ runs the slow strided elementwise path)."""
    return weight * gamma[:, None], bias * gamma


def scaled_linear(y: Tensor, weight: Tensor, bias: Tensor, gamma: Tensor) -> Tensor:
    """γ·(y·Wᵀ + b) as one product: y (..., C_in) → (..., C_out)."""
    return F.linear(y, *_folded(weight, bias, gamma))


def linear_residual(y: Tensor, weight: Tensor, bias: Tensor, gamma: Tensor, residual: Tensor) -> Tensor:
    """residual + γ·(y·Wᵀ + b): y (..., C_in) or (..., C_in + pad) in the ones-column layout; residual (..., C_out).

    Without autograd the result goes into ``residual``'s buffer (the caller owns it). From the ones-column
    layout the bias is the weight of that column and one in-place GEMM (β = 1) does product, bias and add:
    the add pass, a read of two maps and a write of one, goes away."""
    c_in = weight.shape[1]
    if y.shape[-1] == c_in or not reusable(residual, y, weight):
        return add_into(residual, scaled_linear(y[..., :c_in], weight, bias, gamma))
    w = bias_column_weight(*_folded(weight, bias, gamma), pad=y.shape[-1] - c_in)
    residual.view(-1, residual.shape[-1]).addmm_(y.reshape(-1, y.shape[-1]), w.t())
    return residual
