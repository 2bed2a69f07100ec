"""Fused depthwise convolution on token-major (B, H, W, C) maps with its epilogue, inference only (no autograd).

Why: at 540×960 LR on the H200 the forward ran a cuDNN depthwise conv and then a separate GELU pass, and a
depthwise conv (the CPE), a residual add and a LayerNorm as three more passes, each a full read and write of
a 66–132 MB tensor. Here one program computes BLOCK_W pixels × all C channels of ROWS image rows: it sums the
K·K shifted tiles in fp32 (the shifted reads overlap and hit in L1/L2), then applies the epilogue in registers
and writes the result once. C is a compile-time constant (one compile per layer width): the channel mask folds
away and loads vectorise for any C divisible by 8. H200, fp16, 540×960: 92, 182 and
196 µs for the three below at the model's C and K, against 757, 357 and 884 µs for cuDNN + PyTorch.

    dwconv_gelu_triton(x, weight, bias, ones_pad=0) -> y            y = GELU(dwconv(x) + bias)
    dwconv_residual_norm_triton(x, weight, bias, ln_w, ln_b, eps) -> (s, n)
                                                                    s = x + dwconv(x) + bias, n = LayerNorm(s)
    dwconv_gated_norm_triton(v, weight, bias, o, g, ln_w, ln_b, eps, ones_pad=0) -> y
                                                                    y = LayerNorm(o + dwconv(v) + bias)·SiLU(g)
    ones_pad > 0: y carries a column of ones (then zeros) after its C channels, for a GEMM adding its bias.

Each has a PyTorch reference beside it with the same signature (``*_reference``): everything in fp32, one
rounding to x's dtype at the end; the kernels compute the same thing. The depthwise conv is that of
``nn.Conv2d(C, C, K, padding=K // 2, groups=C)``: weight (C, 1, K, K), K odd, zero padding, stride 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from .layernorm import normalize

__all__ = ["dwconv_gated_norm_reference", "dwconv_gated_norm_triton", "dwconv_gelu_reference",
           "dwconv_gelu_triton", "dwconv_residual_norm_reference", "dwconv_residual_norm_triton"]

_MAX_NORM_C = 256  # the LayerNorm needs a whole row of channels in one program's registers


@triton.jit
def _dw_tile(X, WT, row, BH, H, W, C: tl.constexpr, KS: tl.constexpr, BLOCK_W: tl.constexpr, BC: tl.constexpr):
    """Depthwise conv without bias of pixels [pid(1)·BLOCK_W, +BLOCK_W) of flat image row ``row`` (= b·H + y).

    X: (B·H, W, C) row-major; WT: (K·K, C) fp32 taps; rows ≥ BH (past a program's last image row) read and store
    nothing. Returns the fp32 (BLOCK_W, BC) sums (0 in padded channels), the tile's flat pixel indices (int64)
    and their mask, the channel indices and their mask.
    """
    y = row % H
    valid = row < BH
    ws = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    cols = tl.arange(0, BC)
    cmask = cols < C
    acc = tl.zeros((BLOCK_W, BC), dtype=tl.float32)
    for dy in range(KS):  # a runtime loop: unrolled, all K·K tile loads were in flight at once and spilled
        yy = y + (dy - KS // 2)
        # rows outside the image read nothing: an empty column range (a scalar bool & a vector mask would be
        # simpler, but the interpreter turns that mask into int32 and rejects it)
        w_end = tl.where((yy >= 0) & (yy < H) & valid, W, 0)
        # int64 before multiplying: B·H·W·C passes 2^31 at full HD; offsets within one row stay int32
        base = X + (row + (dy - KS // 2)).to(tl.int64) * W * C
        for dx in tl.static_range(KS):
            wx = ws + (dx - KS // 2)
            m = ((wx >= 0) & (wx < w_end))[:, None] & cmask[None, :]
            v = tl.load(base + wx[:, None] * C + cols[None, :], mask=m, other=0.0).to(tl.float32)
            tap = tl.load(WT + (dy * KS + dx) * C + cols, mask=cmask, other=0.0)
            acc += v * tap[None, :]
    return acc, row.to(tl.int64) * W + ws, ws < tl.where(valid, W, 0), cols, cmask


@triton.jit
def _at(pix, pm, cols, cmask, YC: tl.constexpr):
    """Element offsets and mask of the tile's pixels × channels in a (B·H·W, YC) row-major map."""
    return pix[:, None] * YC + cols[None, :], pm[:, None] & cmask[None, :]


@triton.jit
def _store_out(Y, y, pix, pm, cols, cmask, C: tl.constexpr, YC: tl.constexpr):
    """Store one (BLOCK_W, BC) result tile into Y (B·H·W, YC). With YC > C each pixel's row goes on with a 1 and
    zeros up to YC: the column a following GEMM multiplies by its bias (see ``ones_pad``)."""
    offs, mask = _at(pix, pm, cols, cmask, YC)
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)
    if YC > C:
        pad = tl.arange(0, YC - C)
        ones = tl.broadcast_to(tl.where(pad == 0, 1.0, 0.0)[None, :], (pix.shape[0], YC - C))
        tl.store(Y + pix[:, None] * YC + C + pad[None, :], ones.to(Y.dtype.element_ty), mask=pm[:, None])


# Each program computes ROWS consecutive image rows of one BLOCK_W-wide column strip, top to bottom: the K input
# rows a row needs are K − 1 of the previous row's, read moments earlier on the same SM, so they come from L1
# rather than L2 (with one row a program, the K programs reading an input row sit on different SMs).


@triton.jit
def _dwconv_gelu_fwd(X, WT, BIAS, Y, BH, H, W, C: tl.constexpr, KS: tl.constexpr, BLOCK_W: tl.constexpr,
                     BC: tl.constexpr, ROWS: tl.constexpr, YC: tl.constexpr):
    """Y = GELU(dwconv(X) + BIAS) (exact erf GELU) for one program's ROWS × (BLOCK_W, C) tiles; X (B·H, W, C),
    Y (B·H, W, YC)."""
    for r in range(ROWS):
        acc, pix, pm, cols, cmask = _dw_tile(X, WT, tl.program_id(0) * ROWS + r, BH, H, W, C, KS, BLOCK_W, BC)
        acc += tl.load(BIAS + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
        y = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
        _store_out(Y, y, pix, pm, cols, cmask, C, YC)


@triton.jit
def _dwconv_residual_norm_fwd(X, WT, BIAS, LNW, LNB, S, N, BH, H, W, eps, C: tl.constexpr, KS: tl.constexpr,
                              BLOCK_W: tl.constexpr, BC: tl.constexpr, ROWS: tl.constexpr):
    """S = X + dwconv(X) + BIAS and N = LayerNorm_C(S) for one program's tiles; the residual is folded into WT's
    centre tap by the host. N is normalised from the fp32 S, before S is rounded to its storage dtype."""
    for r in range(ROWS):
        s, pix, pm, cols, cmask = _dw_tile(X, WT, tl.program_id(0) * ROWS + r, BH, H, W, C, KS, BLOCK_W, BC)
        s += tl.load(BIAS + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
        _store_out(S, s, pix, pm, cols, cmask, C, C)
        n, _, _ = normalize(s, pm[:, None] & cmask[None, :], cols, cmask, LNW, LNB, C, eps)
        _store_out(N, n, pix, pm, cols, cmask, C, C)


@triton.jit
def _dwconv_gated_norm_fwd(X, WT, BIAS, O, G, LNW, LNB, Y, BH, H, W, eps, C: tl.constexpr, KS: tl.constexpr,
                           BLOCK_W: tl.constexpr, BC: tl.constexpr, ROWS: tl.constexpr, YC: tl.constexpr):
    """Y = LayerNorm_C(O + dwconv(X) + BIAS)·SiLU(G) for one program's tiles; X, O, G (B·H, W, C), Y (B·H, W, YC).
    The mixer's LePE (X = v) is never written: its conv, the sum with the attention output, the norm and the
    gate are one pass."""
    for r in range(ROWS):
        acc, pix, pm, cols, cmask = _dw_tile(X, WT, tl.program_id(0) * ROWS + r, BH, H, W, C, KS, BLOCK_W, BC)
        offs, mask = _at(pix, pm, cols, cmask, C)
        acc += tl.load(BIAS + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
        acc += tl.load(O + offs, mask=mask, other=0.0).to(tl.float32)
        n, _, _ = normalize(acc, mask, cols, cmask, LNW, LNB, C, eps)
        g = tl.load(G + offs, mask=mask, other=0.0).to(tl.float32)
        _store_out(Y, n * (g / (1.0 + tl.exp(-g))), pix, pm, cols, cmask, C, YC)


def _check(x: Tensor, weight: Tensor, bias: Tensor, *per_channel: Tensor) -> tuple[Tensor, int, int]:
    """Validated (contiguous x, C, K); ValueError with a one-line message otherwise."""
    if x.dim() != 4:
        raise ValueError(f"x must be (B, H, W, C), got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"x must be float16, bfloat16 or float32, got {x.dtype}")
    c, k = x.shape[-1], weight.shape[-1]
    if weight.shape != (c, 1, k, k) or k % 2 == 0 or not 1 <= k <= 7:
        raise ValueError(f"weight must be (C, 1, K, K) with C = {c} and K odd in 1..7, got {tuple(weight.shape)}")
    for t in (bias, *per_channel):
        if t.shape != (c,):
            raise ValueError(f"bias and norm parameters must be (C,) = ({c},), got {tuple(t.shape)}")
    if any(t.device != x.device for t in (weight, bias, *per_channel)):
        raise ValueError(f"all tensors must be on x's device {x.device}")
    return x.contiguous(), c, k


def _taps(weight: Tensor, c: int, k: int) -> Tensor:
    """(C, 1, K, K) weight → (K·K, C) fp32 copy: one tap's C weights are contiguous, so each tap is one load."""
    # copy=True: the caller adds to it, and for K = 1 the transposed view would still alias the weight
    return weight.detach().reshape(c, k * k).t().to(torch.float32, copy=True).contiguous()


# Launch shape: TILE fp32 accumulators a program (16 a thread at 4 warps; with one row of K shifted tiles in flight
# this compiles for sm_90 to 54–114 registers and no spills for K ≤ 7, C ≤ 256; 4K spills) and ROWS image rows a
# program (2 rows beat 1; 4 to 16 rows and tiles of 1K or 4K were no faster, docs/kernels.md).
TILE = 2048
ROWS = 2


def _block_w(c_pow2: int, w: int) -> int:
    return min(max(1, TILE // c_pow2), triton.next_power_of_2(w))


def _launch(kernel, x: Tensor, k: int, tensors: tuple[Tensor, ...], eps: float | None = None, **meta) -> None:
    """kernel(*tensors, B·H, H, W[, eps]) over x's (B, H, W, C) map in tiles of ROWS rows × BLOCK_W pixels × C."""
    b, h, w, c = x.shape
    if not x.numel():
        return
    bc = triton.next_power_of_2(c)
    block_w = _block_w(bc, w)
    rows = max(1, min(ROWS, b * h))
    grid = (triton.cdiv(b * h, rows), triton.cdiv(w, block_w))
    extra = () if eps is None else (float(eps),)
    kernel[grid](*tensors, b * h, h, w, *extra, C=c, KS=k, BLOCK_W=block_w, BC=bc, ROWS=rows, num_warps=4, **meta)


def _output(x: Tensor, ones_pad: int) -> Tensor:
    """The (B, H, W, C + ones_pad) result buffer: C channels, then (ones_pad > 0) a column of ones and zeros."""
    if ones_pad < 0 or ones_pad & (ones_pad - 1):
        raise ValueError(f"ones_pad must be 0 or a power of two, got {ones_pad}")
    return x.new_empty((*x.shape[:-1], x.shape[-1] + ones_pad))


def dwconv_gelu_triton(x: Tensor, weight: Tensor, bias: Tensor, ones_pad: int = 0) -> Tensor:
    """GELU(depthwise_conv(x) + bias), fused: x (B, H, W, C) fp16/bf16/fp32 → y (B, H, W, C) contiguous, x's dtype.

    weight (C, 1, K, K), K odd in 1..7, zero padding K // 2, stride 1; bias (C,). Exact (erf) GELU. Accumulates in
    fp32, one rounding at the end, like :func:`dwconv_gelu_reference`. No autograd. ``ones_pad`` > 0 (a power of
    two): y is (B, H, W, C + ones_pad), each pixel's C values followed by a 1 and zeros, for a GEMM that adds its
    bias through that column (nalasr.ops.with_ones_column is the same layout in PyTorch).
    """
    x, c, k = _check(x, weight, bias)
    y = _output(x, ones_pad)
    _launch(_dwconv_gelu_fwd, x, k, (x, _taps(weight, c, k), bias.contiguous(), y), YC=y.shape[-1])
    return y


def dwconv_gelu_reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Reference for :func:`dwconv_gelu_triton` (same signature): F.conv2d + F.gelu in fp32, rounded once."""
    k = weight.shape[-1]
    y = F.gelu(F.conv2d(x.permute(0, 3, 1, 2).float(), weight.float(), bias.float(), padding=k // 2,
                        groups=x.shape[-1]))
    return y.permute(0, 2, 3, 1).to(x.dtype).contiguous()


def dwconv_residual_norm_triton(x: Tensor, weight: Tensor, bias: Tensor, ln_weight: Tensor, ln_bias: Tensor,
                                eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    """s = x + depthwise_conv(x) + bias and n = LayerNorm over C of s, fused; x (B, H, W, C) with C ≤ 256.

    weight (C, 1, K, K), K odd in 1..7, zero padding; bias, ln_weight, ln_bias (C,). Returns (s, n), both
    (B, H, W, C) contiguous in x's dtype. n is computed from s in fp32, *before* s is rounded to x's dtype (as
    :func:`dwconv_residual_norm_reference` does), so n can differ by one rounding from LayerNorm(s) of the
    returned s in fp16/bf16. Statistics in fp32, biased variance, like F.layer_norm. No autograd.
    """
    x, c, k = _check(x, weight, bias, ln_weight, ln_bias)
    if c > _MAX_NORM_C:
        raise ValueError(f"C up to {_MAX_NORM_C} is supported (a whole row per program), got {c}")
    taps = _taps(weight, c, k)
    taps[k * k // 2] += 1.0  # x + conv(x) is the conv with 1 added to the centre tap: the residual costs nothing
    s = torch.empty_like(x)
    n = torch.empty_like(x)
    _launch(_dwconv_residual_norm_fwd, x, k, (x, taps, bias.contiguous(), ln_weight.contiguous(),
                                              ln_bias.contiguous(), s, n), eps)
    return s, n


def dwconv_residual_norm_reference(x: Tensor, weight: Tensor, bias: Tensor, ln_weight: Tensor, ln_bias: Tensor,
                                   eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    """Reference for :func:`dwconv_residual_norm_triton` (same signature): all in fp32, n from the fp32 s."""
    k, c = weight.shape[-1], x.shape[-1]
    x32 = x.float()
    conv = F.conv2d(x32.permute(0, 3, 1, 2), weight.float(), bias.float(), padding=k // 2, groups=c)
    s32 = x32 + conv.permute(0, 2, 3, 1)
    n = F.layer_norm(s32, (c,), ln_weight.float(), ln_bias.float(), eps)
    return s32.to(x.dtype).contiguous(), n.to(x.dtype).contiguous()


def dwconv_gated_norm_triton(v: Tensor, weight: Tensor, bias: Tensor, o: Tensor, g: Tensor, ln_weight: Tensor,
                             ln_bias: Tensor, eps: float = 1e-5, ones_pad: int = 0) -> Tensor:
    """LayerNorm over C of (o + depthwise_conv(v) + bias), times SiLU(g), fused; v, o, g (B, H, W, C), C ≤ 256.

    weight (C, 1, K, K), K odd in 1..7, zero padding; bias, ln_weight, ln_bias (C,). Returns y (B, H, W, C)
    contiguous in v's dtype, all of it in fp32 with one rounding at the end, like
    :func:`dwconv_gated_norm_reference`. No autograd. ``ones_pad``: as in :func:`dwconv_gelu_triton`.
    """
    v, c, k = _check(v, weight, bias, ln_weight, ln_bias)
    if c > _MAX_NORM_C:
        raise ValueError(f"C up to {_MAX_NORM_C} is supported (a whole row per program), got {c}")
    if o.shape != v.shape or g.shape != v.shape or o.device != v.device or g.device != v.device:
        raise ValueError(f"o and g must be shaped like v {tuple(v.shape)} on its device, got {tuple(o.shape)}, "
                         f"{tuple(g.shape)}")
    y = _output(v, ones_pad)
    _launch(_dwconv_gated_norm_fwd, v, k, (v, _taps(weight, c, k), bias.contiguous(), o.contiguous(),
                                           g.contiguous(), ln_weight.contiguous(), ln_bias.contiguous(), y), eps,
            YC=y.shape[-1])
    return y


def dwconv_gated_norm_reference(v: Tensor, weight: Tensor, bias: Tensor, o: Tensor, g: Tensor, ln_weight: Tensor,
                                ln_bias: Tensor, eps: float = 1e-5) -> Tensor:
    """Reference for :func:`dwconv_gated_norm_triton` (same signature): all in fp32, rounded once."""
    k, c = weight.shape[-1], v.shape[-1]
    conv = F.conv2d(v.float().permute(0, 3, 1, 2), weight.float(), bias.float(), padding=k // 2, groups=c)
    n = F.layer_norm(o.float() + conv.permute(0, 2, 3, 1), (c,), ln_weight.float(), ln_bias.float(), eps)
    return (n * F.silu(g.float())).to(v.dtype).contiguous()
