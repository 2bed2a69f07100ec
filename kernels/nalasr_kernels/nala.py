r"""Fused NaLa attention in Triton: forward and backward, deterministic, any strides.

The math is ``nalasr.ops.nala.nala_attention_reference`` (the single source of truth; this package does not
import it). Per (batch b, head h), N tokens, D = head dim, Dv = value dim, everything below in float32:

    r = (Σx² + 1e-12)^(-1/2),  dir = x·r,  ‖x‖ = Σx²·r
    θ(x)  = clamp((π/4)·tanh(α·dir), ±Θ),  Θ = π/4 − 1e-4            (the reference's THETA_MAX)
    m_q   = |dir(q)|^p,  p = λ(τ + tanh‖q‖)     m_k = |k|^λ
    φ(x)  = [m·cos θ, m·sin θ],   φ̃(x) = [m·cos(θ+a), m·sin(θ+a)],   a = ω·pos (RoPE; φ̃ = φ without)
    S = (1/N) Σ_j φ̃k_j v_jᵀ   (2D × Dv)        z = (1/N) Σ_j φk_j   (2D)
    o_t = num_t / den_t,   num_t = Sᵀ φ̃q_t,   den_t = φq_tᵀ z + ε

Forward, two stages (plus a tiny combine):
  1. ``_fwd_reduce``: programs split the token axis into chunks; each computes φk on the fly from k and
     accumulates its chunk's partial S, z in registers (tl.dot for S), written to a partial buffer. For 16-bit k, v
     of 16 unit-stride dims without RoPE (the model's case) ``nala_rr._fwd_reduce_rr`` does the same with its mma
     fragments loaded and computed in registers, no shared memory (see _reduce_rr).
  2. ``_combine``: sums the partials in a fixed order (no atomics: bitwise reproducible) and scales by 1/N.
  3. ``_fwd_map``: every query tile computes φq on the fly, num = φ̃qᵀS (tl.dot), den = φqᵀz + ε, writes o once.
  On sm_90+ the three chain by programmatic dependent launch (see _pdl): each starts in the tail of the one before.
  φ never touches memory; HBM traffic is q, k, v read once and o written once (+ a few KiB of state).

Backward. With g_t = ∂L/∂o_t (chain rule, per (b, h)):
    dnum_t = g_t / den_t                                     (Dv)
    dden_t = −g_t·num_t / den_t² = −(g_t·o_t) / den_t        (scalar)
    ∂L/∂φ̃q_t = S · dnum_t                                    (2D)
    ∂L/∂φq_t  = dden_t · z                                   (2D)
    dS = Σ_t φ̃q_t dnum_tᵀ      dz = Σ_t dden_t φq_t          (reduced over queries)
    ∂L/∂v_j  = (1/N) dSᵀ φ̃k_j                                (Dv)
    ∂L/∂φ̃k_j = (1/N) dS v_j     ∂L/∂φk_j = (1/N) dz          (2D; the z-part is the same for every key)
  so the backward is one pass over queries (map: dq; reduce: dS, dz partials, from q, g and the saved S, z;
  o is neither read nor recomputed: g·num = den·(φ̃q·S·dnum) gives dden from ∂L/∂φ̃q), the same deterministic
  combine (scaled by 1/N), and one pass over keys (map: dk, dv from k, v and dS/N, dz/N). q, g, k, v read
  once, dq, dk, dv written once.

  Through the feature map, per element i, with (gc, gs) the gradient of φ's cos/sin halves and (g̃c, g̃s) that of
  φ̃'s (c = cos θ, s = sin θ, c̃ = cos(θ+a), s̃ = sin(θ+a)):
    ∂L/∂m = gc·c + gs·s + g̃c·c̃ + g̃s·s̃
    ∂L/∂θ = m·(gs·c − gc·s + g̃s·c̃ − g̃c·s̃)
    ∂L/∂dir_i  = ∂L/∂θ_i·(π/4)·α·(1 − tanh²(α·dir_i))·[|θ_raw| ≤ Θ]     (clamp passes the gradient inside only)
  key:   ∂m/∂k_i = λ·|k_i|^(λ−1)·sign(k_i)
  query: ∂m/∂dir_i = p·m_i/dir_i (0 where dir_i = 0),  ∂L/∂p = Σ_i ∂L/∂m_i · m_i·ln|dir_i|  (0 where dir_i = 0),
         ∂L/∂‖q‖ = ∂L/∂p · λ·(1 − tanh²‖q‖)
  normalisation (exact in the 1e-12, like autograd of the reference):
    ∂L/∂x_i = r·(∂L/∂dir_i − dir_i·Σ_l ∂L/∂dir_l·dir_l) + ∂L/∂‖x‖ · x_i·r·(2 − Σx²·r²)

Numerics: loads are cast to float32; feature maps, S, z, dS, dz and every accumulation are float32. tl.dot runs
in tf32 for fp16/bf16 inputs (the tf32 rounding, 2^-11, is below the output's own fp16/bf16 rounding) and in
tf32x3 (≈ fp32) for fp32 inputs; NALASR_DOT_PRECISION=ieee|tf32|tf32x3 overrides. Where a product would be tf32,
fp16 inputs give it float16 operands instead, scaled into range (the map's, _map_f16; the backward's gradient
products, _bwd_f16): the same 11 significant bits, rounded to nearest. The feature map's tanh and
sin/cos are accurate to ~1e-7; for fp16/bf16 inputs without RoPE (APPROX) they are tanh.approx.f32 (~2^-11
relative) and short sin/cos polynomials (cos < 1.1e-5, sin < 1e-6), errors below those inputs' own rounding
(APPROX took 8% off the forward and 7% off the backward at 518K tokens in session 9); NALASR_APPROX_MATH=0|1
overrides. For float16 queries with |α| ≤ 1 the forward map forms φq in float16 pairs instead (HALF2, _map_half2 and
nalasr_kernels.half2: the angle's cosine and sine as polynomials in α·dir, no tanh; den from float16 products).

Conditioning of the backward. ∂L/∂φq_t = S·dnum_t + dden_t·z = (1/(N·den_t)) Σ_j φk_j (v_j − o_t)·g_t is a
difference of two nearly equal terms wherever the values sit close to the output (one token: o = v exactly;
values with a large common offset), and a 2^-11 (tf32) rounding of either term is amplified by |v| / |v − o|;
the same holds for ∂L/∂φk_j ∝ dS·v_j + dz. Without RoPE the kernels therefore centre the values on
v̄ = Sᵀz / (z·z) (any v̄ is exact algebra; this one is v itself at N = 1): with S' = S − z·v̄ᵀ,
    ∂L/∂φq_t = S'·dnum_t + dden'_t·z,    dden'_t = dden_t + v̄·dnum_t = −(φq_t·S'·dnum_t − ε·v̄·dnum_t) / den_t
    dz' = Σ_t dden'_t φq_t = dz + dS·v̄,  ∂L/∂φk_j = (1/N) (dS·(v_j − v̄) + dz')
  so every product sees only the spread of the values and tf32 keeps its relative 2^-11 (CENTRE: fp16/bf16
  inputs without RoPE). With RoPE (φ̃ ≠ φ: the two parts pass through different angles) the products that feed
  dq and dk run in tf32x3 instead, as every product does for fp32 inputs; there the centring is left out, since
  its few extra fp32 roundings are what is left of the ε-sized gradient at N = 1.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from typing import Any

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice
import triton.testing
from torch import Tensor

from . import half2

try:  # grid dependency control for programmatic dependent launch (Triton ≥ 3.4; see _pdl)
    from triton.language.extra.cuda import gdc_launch_dependents as _gdc_launch, gdc_wait as _gdc_wait
    _HAS_GDC = True
except ImportError:
    _HAS_GDC = False

    @triton.jit
    def _gdc_launch():
        pass

    @triton.jit
    def _gdc_wait():
        pass

__all__ = ["NalaAttentionFunction", "nala_attention_triton", "nala_forward", "nala_backward"]

# Must match nalasr/ops/nala.py (not imported: this package never imports nalasr). Kept here as Python
# floats; the kernels use the same numbers as literals (a Triton kernel reads module globals only as constexpr).
NORM_EPS = 1e-12
THETA_MAX = math.pi / 4 - 1e-4
_DEFAULTS = dict(lam=3.0, tau=0.5, alpha=1.0, eps=1e-6)  # nalasr.ops.nala.NalaParams()

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# Test hooks. _OUT_FILL: fill every buffer the kernels must write (outputs, partials, state) with this value
# before launching (NaN in the tests, so an unwritten element cannot pass). _CONFIG: a fixed launch config
# {"BLOCK_N": .., "CHUNK": .., "num_warps": ..} instead of the autotuner (tests use tiny chunks to exercise
# several chunks and ragged tails at small N).
_OUT_FILL: float | None = None
_CONFIG: dict | None = None


# ================================================================================================ device math

_COMPILED = tl.constexpr(not _INTERPRET)  # the interpreter runs NumPy: no register layouts, no PTX
_FAST_MATH = _COMPILED  # lg2.approx / div.approx / tanh.approx, which NumPy does not have


@triton.jit
def _tanh(x, APPROX: tl.constexpr):
    # One exp2 and one division. e = e^(−2|x|) ∈ (0, 1], so nothing overflows for any x; the absolute error
    # (~1e-7) is what an angle or an exponent needs. APPROX (16-bit inputs, see _approx_math): tanh.approx.f32,
    # one MUFU op with relative error ~2^-11, below the tf32 rounding of the products these inputs run in.
    if APPROX and _FAST_MATH:
        t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        e = tl.exp2(tl.abs(x) * -2.885390081777927)  # −2·log2(e)
        t = _div(1.0 - e, 1.0 + e)
        t = tl.where(x < 0, -t, t)
    return t


_FLT_MIN = tl.constexpr(1.1754943508222875e-38)  # smallest normal float32: |dir| below it counts as 0


@triton.jit
def _log2(x):
    # lg2.approx.f32 on the MUFU pipe (|error| ≲ 2^-22 for the normal floats used here). tl.log2 compiles to
    # an accurate software sequence: ~25% of the SASS of _fwd_map and _bwd_query (sm_90, offline count).
    if _FAST_MATH:
        return libdevice.fast_log2f(x)
    else:
        return tl.log2(x)


@triton.jit
def _div(x, y):
    # div.approx.f32 (≤ 2 ulp for |y| in [2^-126, 2^126]; every divisor here is ≥ 1e-6 or a normal float)
    # instead of IEEE division, a reciprocal plus a Newton step and a slow-path branch per element.
    if _FAST_MATH:
        return libdevice.fast_dividef(x, y)
    else:
        return x / y


@triton.jit
def _pdl_launch(PDL: tl.constexpr):
    """griddepcontrol.launch_dependents (PDL, see _pdl): the next kernel, launched with launch_pdl, may start its
    programs once every program of this one has passed here; they wait in _pdl_wait for this kernel's results."""
    if PDL and _COMPILED:
        _gdc_launch()


@triton.jit
def _pdl_wait(PDL: tl.constexpr):
    """griddepcontrol.wait (PDL): block until the kernel before has finished and its writes are visible. Everything
    a PDL kernel reads that the kernel before it writes comes after this; what earlier kernels wrote may come before."""
    if PDL and _COMPILED:
        _gdc_wait()


@triton.jit
def _sincos_small(t):
    # cos, sin for |t| ≤ π/4 (+ rounding): Taylor to degree 8 / 9, truncation error < 3e-8. Only FMAs: the
    # MUFU (sin/cos/exp2/log2) pipe has 1/8 of the FMA throughput and is already busy with tanh and pow.
    t2 = t * t
    c = 1.0 + t2 * (-0.5 + t2 * (0.041666666666666664 + t2 * (-0.001388888888888889 + t2 * 2.48015873015873e-05)))
    s = t * (1.0 + t2 * (-0.16666666666666666 + t2 * (0.008333333333333333 + t2 * (-0.0001984126984126984
                                                                                    + t2 * 2.7557319223985893e-06))))
    return c, s


@triton.jit
def _sincos_angle(uc, APPROX: tl.constexpr, SIN5: tl.constexpr = False):
    # cos, sin of θ = (π/4)·uc, |uc| ≤ 1. APPROX (16-bit inputs): cos as the degree 4 minimax polynomial in uc on
    # [−1, 1] (Lawson's iteration, the powers of π/4 folded in; max error 1.0e-5 in float32, a thirtieth of what
    # tanh.approx's 2^-11 leaves in θ and of φ's float16 rounding, 2.4e-4), sin as the degree 7 series (3.1e-7) or,
    # with SIN5, the degree 5 minimax polynomial (6.2e-7). Which sine a kernel takes is a matter of how ptxas then
    # schedules it, not of accuracy. Session 21 on the H200 at 518K (each pass alone, µs; degree 6 / 7 series of
    # sessions 13-20 → cos 4 → cos 4 and sin 5): _fwd_reduce_rr 56.6-56.8 → 55.1-55.2 → 63.3-63.4 (ptxas then
    # puts two of the next tile's loads on the scoreboard of a shuffle read 28 instructions later, see
    # benchmarks/compile_sm90.py's load_waits), _fwd_map 55.6-55.9 → 55.1-55.4 → 54.4, _bwd_query 165.7-165.9 →
    # 165.3-165.7 → 168.6-168.9, _bwd_key 125.9-126.4 → 124.0-127.4 → 121.5-121.9
    # (benchmarks/results/h200/session21/call2); with its whole-tile asm loads (session 22) _fwd_reduce_rr takes the
    # degree 5 sine too: 52.2-52.4 against 52.8 µs (benchmarks/results/h200/session23/call1). Float32 inputs:
    # _sincos_small(θ), bit for bit the results of before session 13 (the float32 N = 1 gradient test sits at the
    # limit of the tf32x3 products).
    if APPROX:
        u2 = uc * uc
        c = 0.9999900348241372 + u2 * (-0.3082451022035757 + u2 * 0.015371812920154576)
        if SIN5:
            s = uc * (0.7853942344517019 + u2 * (-0.08071399856001482 + u2 * 0.002427105837877301))
        else:
            s = uc * (0.7853981633974483 + u2 * (-0.08074551218828077 + u2 * (0.00249039457019272
                                                                                + u2 * -3.657620418217724e-05)))
    else:
        c, s = _sincos_small(uc * 0.7853981633974483)
    return c, s


@triton.jit
def _sincos_any(t):
    # cos, sin of any float32 angle (RoPE adds ω·pos, up to ~1e3 rad): Cody–Waite reduction by π/2 in three
    # parts (each product exact for |quadrant| < 2^15) into [−π/4, π/4], then the quadrant picks sign and swap.
    kq = tl.floor(t * 0.6366197723675814 + 0.5)
    r = t - kq * 1.5703125
    r = r - kq * 4.837512969970703e-04
    r = r - kq * 7.549789954891882e-08
    c0, s0 = _sincos_small(r)  # RoPE runs its products in tf32x3: the full-precision series
    quad = kq.to(tl.int32) & 3
    c = tl.where(quad == 0, c0, tl.where(quad == 1, -s0, tl.where(quad == 2, -c0, s0)))
    s = tl.where(quad == 0, s0, tl.where(quad == 1, c0, tl.where(quad == 2, -s0, -c0)))
    return c, s


@triton.jit
def _column(t, cols, j):
    """Column j of a 2-D tile (cols indexes its columns) as a vector: the extra column a tensor-core product
    carries (z beside S, dz beside nothing) comes out of the accumulator this way, once per program."""
    return tl.sum(tl.where(cols[None, :] == j, t, 0.0), axis=1)


@triton.jit
def _reduce_acc(M: tl.constexpr, K: tl.constexpr, GROUPS: tl.constexpr):
    """A zero accumulator for :func:`_reduce_dot`: (GROUPS, M, K), or (M, K) when GROUPS is 1."""
    if GROUPS > 1:
        return tl.zeros((GROUPS, M, K), dtype=tl.float32)
    else:
        return tl.zeros((M, K), dtype=tl.float32)


@triton.jit
def _reduce_dot(a, b, acc, GROUPS: tl.constexpr, PREC: tl.constexpr):
    """acc + aᵀ·b summed over the tile's tokens: a (BLOCK_N, M), b (BLOCK_N, K), acc from :func:`_reduce_acc`.

    GROUPS > 1 splits the tokens into GROUPS consecutive groups, each one batch of a 3-D product (Triton gives
    each warp its own batch): a 2-D product splits only the (M, K) output across warps, and with M = 16 every
    warp reads the whole of a from shared memory, 4 times the operand loads at 4 warps. Sum the groups with
    :func:`_reduce_total` after the loop. _bwd_query uses groups of 16 tokens (two k-steps of a tf32 mma; 1 group
    per warp at the autotuner's picks, 64 tokens on 4 warps and 32 on 2)."""
    if GROUPS > 1:
        t: tl.constexpr = a.shape[0] // GROUPS
        a3 = tl.trans(tl.reshape(a, (GROUPS, t, a.shape[1])), (0, 2, 1))
        return tl.dot(a3, tl.reshape(b, (GROUPS, t, b.shape[1])), acc, input_precision=PREC)
    else:
        return tl.dot(tl.trans(a), b, acc, input_precision=PREC)


@triton.jit
def _reduce_total(acc, GROUPS: tl.constexpr):
    """(M, K): the groups of a :func:`_reduce_dot` accumulator summed (once per program, after the loop)."""
    if GROUPS > 1:
        return tl.sum(acc, axis=0)
    else:
        return acc


@triton.jit
def _tf32(x):
    """x truncated to tf32 (its low 13 mantissa bits cleared): what a tf32 tl.dot takes of it,
    so a sum formed beside the product (z beside S) sees the same operand. Triton hands the tensor cores float32
    registers unrounded and they ignore those bits (triton-lang/triton#4574); rounding to nearest here instead made
    NALASR_REDUCE_ZACC 0 and 1 differ by 5e-4 in the fp16 output on the H200, truncating by 1.7e-5 (a few fp16
    rounding flips; benchmarks/results/h200/session13/call2/s13b.log and call3/s13c.log)."""
    return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def _upcast(t, offs, EYE: tl.constexpr):
    """A 16-bit (BLOCK_N, BD) tile in float32. EYE: as t·I on the tensor cores — exact (one nonzero term per sum,
    accumulated in float32), and the result comes out in the product's accumulator layout, so Triton runs the
    elementwise math that follows there: the backward's product operands then convert from it in registers, where
    from the load's blocked layout each went through shared memory between barriers (see _eye). The interpreter
    has no layouts (and its bfloat16 tl.dot is wrong): there EYE changes nothing."""
    if EYE and _COMPILED:
        return tl.dot(t, (offs[:, None] == offs[None, :]).to(t.dtype))
    else:
        return t.to(tl.float32)


@triton.jit
def _direction(x):
    """x: (BLOCK_N, BD) → Σx², r = (Σx² + 1e-12)^(-1/2) (BLOCK_N,), dir = x·r (BLOCK_N, BD)."""
    ss = tl.sum(x * x, axis=1)
    r = tl.rsqrt(ss + 1e-12)
    return ss, r, x * r[:, None]


_U_MAX = tl.constexpr(0.9998726760455265)  # Θ / (π/4): θ = (π/4)·u is clamped at ±Θ where |u| passes this


@triton.jit
def _angle(xa, APPROX: tl.constexpr, CLAMP: tl.constexpr):
    """θ = clamp((π/4)·tanh(α·dir), ±Θ) = (π/4)·uc from xa = α·dir. Returns u = tanh(α·dir) and uc = u clamped
    to ±Θ/(π/4); the clamp passes the gradient where |u| ≤ _U_MAX. (π/4 stays out: _sincos_angle takes uc.)
    Without CLAMP (|α| ≤ _CLAMP_FREE, see _clamp) uc is u: the clamp cannot bind there."""
    u = _tanh(xa, APPROX)
    if CLAMP:
        return u, tl.minimum(tl.maximum(u, -_U_MAX), _U_MAX)
    else:
        return u, u


@triton.jit
def _key_mag(x, x2, lam, LAM_INT: tl.constexpr):
    """m_k = |x|^λ; small integer λ (the default 3) as products — no log2/exp2 on the MUFU pipe — from x2 = x·x,
    which the norm has formed already (|x|³ = |x|·x²: one multiply an element fewer)."""
    a = tl.abs(x)
    if LAM_INT == 1:
        m = a
    elif LAM_INT == 2:
        m = x2
    elif LAM_INT == 3:
        m = a * x2
    elif LAM_INT == 4:
        m = x2 * x2
    else:
        m = tl.where(a > 0, tl.exp2(lam * _log2(tl.where(a > 0, a, 1.0))), 0.0)
    return m


@triton.jit
def _key_mag_grad(x, lam, LAM_INT: tl.constexpr, scale=1.0):
    """scale·∂|x|^λ/∂x = scale·λ·|x|^(λ−1)·sign(x) (0 at x = 0, as autograd of abs().pow() gives for λ ≥ 1)."""
    a = tl.abs(x)
    sgn = tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0))
    if LAM_INT == 1:
        g = sgn * scale
    elif LAM_INT == 2:
        g = (2.0 * scale) * x
    elif LAM_INT == 3:
        g = (3.0 * scale) * x * a
    elif LAM_INT == 4:
        g = (4.0 * scale) * x * a * a
    else:
        g = tl.where(a > 0, (lam * scale) * tl.exp2((lam - 1.0) * _log2(tl.where(a > 0, a, 1.0))), 0.0) * sgn
    return g


@triton.jit
def _query_mag(dirn, nrm, lam, tau, APPROX: tl.constexpr, MPOW: tl.constexpr = False):
    """m_q = |dir|^p, p = λ(τ + tanh‖q‖) per token. Returns tanh‖q‖, p (BLOCK_N,), log2|dir| (finite: 0 where
    dir = 0, or ≥ −126 with MPOW), m, and mo: with MPOW |dir|^(p−1) (m formed as mo·|dir|, no second exp2), else m
    itself (for the caller's unused slot)."""
    tn = _tanh(nrm, APPROX)
    p = lam * (tau + tn)
    a = tl.abs(dirn)
    if MPOW:
        # No selects: log2 0 = −inf (so is the GPU's approximate log2 of a subnormal, which it flushes), and then
        # |dir|^(p−1) = 2^(−inf) = 0 exactly, as it must be for p > 1 (the host's rule: λτ > 1), so m = 0 too. Only
        # ∂L/∂p's m·log2|dir| needs a finite log2 there: clamped at −126 (m = 0 where the clamp binds). A power of
        # 2^(−126·(p−1)) at dir = 0, as from log2 max(|dir|, 2^-126), is not 0: r = 10^6 at q = 0 scales it into dq,
        # and the float16 N = 1 case's dq went 0.073 off (benchmarks/results/h200/session22/call2-3).
        l2 = _log2(a)
        mo = tl.exp2((p - 1.0)[:, None] * l2)
        m = mo * a
        l2 = tl.maximum(l2, -126.0)
    else:
        # Subnormal |dir| counts as 0: the approximate log2 and division may flush it, and m = |dir|^p is 0 in
        # float32 there anyway (p ≥ λτ; the default 1.5 takes 1e-38 to 1e-57).
        pos = a >= _FLT_MIN
        l2 = _log2(tl.where(pos, a, 1.0))
        m = tl.where(pos, tl.exp2(p[:, None] * l2), 0.0)
        mo = m
    return tn, p, l2, m, mo


@triton.jit
def _query_mag_fwd(xa, nrm, lam, tau, lga, APPROX: tl.constexpr):
    """m_q = |dir|^p as 2^(p·log2|xa| − p·lga) from xa = α·dir (the angle's input) and lga = log2|α|: no dir, no
    masks, and no log2 a token; for the forward map of 16-bit inputs when λτ ≥ 1.5 and α is in _FASTMAG_ALPHA
    (FASTMAG, see _fastmag; float32 inputs keep _query_mag, see _sincos_angle). Against 2^(p·log2|x| + p·log2 r)
    (sessions 15-23): offline sm_90 444 → 439 loop instructions, 56 → 54 MUFU ops a warp and tile; on the H200
    (five A/B rounds in one process, two calls) the forward at 1M 0.2103-0.2158 against 0.2129-0.2160 ms, each round
    faster, at 518K unchanged (0.1115-0.1120 against 0.1109-0.1122; benchmarks/results/h200/session24/call4-5).
    xa = 0 gives log2 0 = −inf and m = 0 (p > 0). A subnormal xa may flush to 0 in the approximate log2: then
    |dir| < 2^-126·2^20 (|α| ≥ 2^-20) and |dir|^p < 2^-159 at p ≥ 1.5, which is 0 in float32 as well."""
    p = lam * (tau + _tanh(nrm, APPROX))
    return tl.exp2(p[:, None] * _log2(tl.abs(xa)) - (p * lga)[:, None])


@triton.jit
def _f16_state(s_c, s_s):
    """The map's S halves (BD, BDV) as float16 product operands, scaled by the power of two that puts their largest
    entry in [0.5, 1) (exact; float16's range is 2^-24 .. 65504, S's is float32's), and the factor that undoes it.
    One factor for the tile, not one per column: per-column factors multiply every output element once more, and
    with them the map took 63.1 µs against 63.6 in tf32 (benchmarks/results/h200/session15/call5/sweep_m16.json;
    59.0 with this one, call6). All zeros or subnormals stay unscaled."""
    smax = tl.maximum(tl.max(tl.max(tl.abs(s_c), axis=1), axis=0), tl.max(tl.max(tl.abs(s_s), axis=1), axis=0))
    down, up = _pow2_scale(smax)
    return (s_c * down).to(tl.float16), (s_s * down).to(tl.float16), up


@triton.jit
def _pow2_scale(smax):
    """(down, up): the power of two that puts smax (≥ 0) in [0.5, 1), and its inverse; 1 for zero or subnormal smax."""
    e = (smax.to(tl.int32, bitcast=True) >> 23) & 255  # biased exponent: smax in [2^(e−127), 2^(e−126))
    e = tl.where(e == 0, 126, tl.minimum(e, 253))
    down = ((253 - e) << 23).to(tl.float32, bitcast=True)  # 2^(126 − e)
    up = ((e + 1) << 23).to(tl.float32, bitcast=True)  # 2^(e − 126)
    return down, up


@triton.jit
def _rope_angle(offs_n, W, freq, offs_d, HALF: tl.constexpr):
    """a = ω_j·pos: angles j < D/2 use the row, D/2 ≤ j < 2·(D/2) the column (freq is 0 beyond). Same float32
    product as rope_angles() in the reference (row · ω), so θ + a rounds the same way."""
    row = offs_n // W
    col = offs_n - row * W
    pos = tl.where(offs_d[None, :] < HALF, row[:, None], col[:, None]).to(tl.float32)
    return pos * freq[None, :]


@triton.jit
def _dtanh(dth, u, ka, APPROX: tl.constexpr):
    """∂L/∂dir's angle part, dth·ka·(1 − u²), from ∂L/∂θ (u = tanh(α·dir), ka = (π/4)·α and the caller's unit).
    APPROX (16-bit inputs): ka − ka·u², one FFMA on the u² the sine and cosine formed (offline sm_90: _bwd_query
    613 → 605, _bwd_key 411 → 401 loop instructions); its rounding of u² costs 1 − u² at most 2^-24 absolute, far
    below tanh.approx's 2^-11 in u. On the H200 (two A/B rounds in one process) the backward at 518K 0.2656-0.2662
    against 0.2682-0.2685 ms, at 1M 0.5257-0.5262 against 0.5282-0.5309 (benchmarks/results/h200/session24/call7).
    Float32 inputs keep (dth·ka)·(1 − u·u) with the fused 1 − u·u, as before."""
    if APPROX:
        return dth * (ka - ka * (u * u))
    else:
        return dth * ka * (1.0 - u * u)


@triton.jit
def _feature_grad_angle(m, c, s, c2, s2, gc, gs, gc2, gs2, ROPE: tl.constexpr):
    """(∂L/∂m, ∂L/∂θ) from the gradients of φ = m[cos θ, sin θ] and φ̃ = m[cos θ̃, sin θ̃], θ̃ = θ + a."""
    if ROPE:
        dm = gc * c + gs * s + gc2 * c2 + gs2 * s2
        dth = m * (gs * c - gc * s + gs2 * c2 - gc2 * s2)
    else:  # φ̃ = φ: add the two gradients first (4 fewer multiplies per element)
        ac = gc + gc2
        as_ = gs + gs2
        dm = ac * c + as_ * s
        dth = m * (as_ * c - ac * s)
    return dm, dth


@triton.jit
def _slab(ptr, pid_b, pid_h, s_b, s_h):
    """Start of (b, h)'s (N, D) slab of a (B, N, H, D) tensor; 64-bit, as B·N·H·D can pass 2^31."""
    return ptr + pid_b.to(tl.int64) * s_b + pid_h.to(tl.int64) * s_h


@triton.jit
def _chunk(pid_c, CHUNK, N):
    """Tokens [start, end) of chunk pid_c."""
    start = pid_c * CHUNK
    return start, tl.minimum(start + CHUNK, N)


@triton.jit
def _span(pid_c, CHUNK, N, n_chunks, BLOCK_N: tl.constexpr, STRIDED: tl.constexpr):
    """(start, end, step) of chunk pid_c's loop over tiles of BLOCK_N tokens: CHUNK tokens from pid_c·CHUNK, step
    BLOCK_N; or with STRIDED (see _strided) the tiles pid_c, pid_c + n_chunks, … up to N."""
    if STRIDED:
        start = pid_c * BLOCK_N
        end = N
        step = BLOCK_N * n_chunks
    else:
        start, end = _chunk(pid_c, CHUNK, N)
        step = BLOCK_N
    return start, end, step


@triton.jit
def _token_rows(n0, end, BLOCK_N: tl.constexpr, OFFS64: tl.constexpr):
    """Tokens n0 .. n0 + BLOCK_N: their indices, which are < end, and the row offsets (int64 when OFFS64)."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    return offs_n, offs_n < end, offs_n.to(tl.int64) if OFFS64 else offs_n


@triton.jit
def _load_tile(base, n0, end, s_n, offs, s_d, dmask, BLOCK_N: tl.constexpr, OFFS64: tl.constexpr):
    """Rows n0 .. n0 + BLOCK_N (those < end) of a (N, BD) slab in the tensor's own dtype; 0 where masked.

    The streaming loops load the next tile before computing on the current one (the tile is a loop-carried
    value): the load is in flight during the math, which doubles the bytes in flight per program. The loads
    feed elementwise math, not tl.dot, so Triton's software pipeliner does not do this for us."""
    offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, OFFS64)
    return tl.load(base + rows[:, None] * s_n + offs[None, :] * s_d, mask=nmask[:, None] & dmask[None, :], other=0.0)


# ==================================================================================================== kernels
# Offsets inside one (b, h) slab are int32 unless the host says they could overflow (OFFS64): fewer registers
# and cheaper address arithmetic than 64-bit pointers per element; the (b, h) base offsets are always int64.
# Grids are (H, chunks, B): the head is the fastest axis so programs that run together read neighbouring
# bytes of the same tokens (q/k/v are token-major, (B, N, H, D) with heads interleaved). The state buffer of
# one (b, h) is flat float32: [Sc (BD×BDV) | Ss (BD×BDV) | zc (BD) | zs (BD)], cos half then sin half of φ.


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def _fwd_reduce(
    K, V, FREQ, PART,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sk_b, sk_n, sk_h, sk_d, sv_b, sv_n, sv_h, sv_d,
    alpha, lam,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, BDZ: tl.constexpr,
    LAM_INT: tl.constexpr, ROPE: tl.constexpr, PREC: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr,
    BLOCK_N: tl.constexpr, VEC4: tl.constexpr, ZACC: tl.constexpr, CLAMP: tl.constexpr, ZDOT: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Partial Σφ̃k vᵀ and Σφk over one chunk of tokens of one (b, h) → PART[b, h, chunk, :].

    z (see _reduce_zacc): ZACC sums φk into an elementwise (BLOCK_N, BD) accumulator, reduced over the tokens
    once after the loop; without RoPE (where ZACC means tf32 products) φk is first truncated to tf32 as the tensor
    cores take it: z must sum the operand S multiplied, or the backward's centring v̄ = Sᵀz/(z·z) is not v at
    N = 1 (dq, dk off by O(1) there). ZDOT (see _reduce_zdot; ZACC with tf32 products) takes z instead from a
    second product of S's own φk operand with ones, which truncates it the same way. Otherwise (no RoPE: there S
    takes φ̃k, z φk) the values get a column of ones at index DV (BDZ wide: BDV, or 2·BDV when DV fills BDV) and z
    comes out of the S product."""
    _pdl_launch(PDL)  # the combine's programs may take the SMs this pass leaves as it ends (see _pdl)
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_z = tl.arange(0, BDZ)
    dmask = offs_d < D
    zmask = offs_z < DV
    k_base = _slab(K, pid_b, pid_h, sk_b, sk_h)
    v_base = _slab(V, pid_b, pid_h, sv_b, sv_h)
    if VEC4:  # the same column offsets, written so Triton sees runs of 4 contiguous columns, not BD (_reduce_vec4)
        col_d = (offs_d // 4) * 4 + offs_d % 4
        col_z = (offs_z // 4) * 4 + offs_z % 4
    else:
        col_d = offs_d
        col_z = offs_z
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    acc_c = tl.zeros((BD, BDZ), dtype=tl.float32)
    acc_s = tl.zeros((BD, BDZ), dtype=tl.float32)
    if ZDOT:  # z = φkᵀ·1 (every column), the S product's own operand (see _reduce_zdot)
        zd_c = tl.zeros((BD, 16), dtype=tl.float32)
        zd_s = tl.zeros((BD, 16), dtype=tl.float32)
        ones = tl.full((BLOCK_N, 16), 1.0, tl.float32)
    elif ZACC:
        za_c = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
        za_s = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
    start, end = _chunk(pid_c, CHUNK, N)
    x_next = _load_tile(k_base, start, end, sk_n, col_d, sk_d, dmask, BLOCK_N, OFFS64)
    v_next = _load_tile(v_base, start, end, sv_n, col_z, sv_d, zmask, BLOCK_N, OFFS64)
    for n0 in tl.range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        # Masked tokens and padded dims load as 0, and φ(0) = 0 (m = 0): they add nothing to S or z.
        x = x_next.to(tl.float32)
        vv = v_next.to(tl.float32)
        x_next = _load_tile(k_base, n0 + BLOCK_N, end, sk_n, col_d, sk_d, dmask, BLOCK_N, OFFS64)
        v_next = _load_tile(v_base, n0 + BLOCK_N, end, sv_n, col_z, sv_d, zmask, BLOCK_N, OFFS64)
        x2 = x * x
        r = tl.rsqrt(tl.sum(x2, axis=1) + 1e-12)
        if APPROX:  # α·dir without dir, which nothing else here needs
            u, uc = _angle(x * (alpha * r)[:, None], APPROX, CLAMP)
        else:  # float32 inputs: as before session 13 (see _sincos_angle)
            u, uc = _angle(alpha * (x * r[:, None]), APPROX, CLAMP)
        m = _key_mag(x, x2, lam, LAM_INT)
        c, s = _sincos_angle(uc, APPROX)
        fc = m * c
        fs = m * s
        if ZDOT:
            zd_c = tl.dot(tl.trans(fc), ones, zd_c, input_precision=PREC)
            zd_s = tl.dot(tl.trans(fs), ones, zd_s, input_precision=PREC)
        elif ZACC:
            if not ROPE:
                fc = _tf32(fc)
                fs = _tf32(fs)
            za_c += fc
            za_s += fs
        else:
            vv = tl.where(offs_z[None, :] == DV, 1.0, vv)
        if ROPE:  # S takes the rotated φ̃k, z the plain φk (RoPE acts on the numerator only)
            c, s = _sincos_any(uc * 0.7853981633974483 + _rope_angle(offs_n, W, freq, offs_d, D // 2))
            fc = m * c
            fs = m * s
        # Measured alternative (session 9, benchmarks/device_session9b.sh at ec22391): Sᵀ += vᵀ·φ with v loaded
        # transposed, so φ is not transposed for the product: 129.8 against 112.7 µs at 518K, the same 4.1 M
        # bank-conflicted shared-memory store wavefronts (they are not this transpose's) and 20% more loads.
        # Measured alternative (session 12): the 3-D grouped product of _bwd_query (_reduce_dot) here: 150.5
        # against 101.0 µs at 518K. Triton lays out these operands' shared copies with the group dimension
        # between the other two (the register tiles carry their warps on the token axis, not the groups):
        # 4-way conflicted loads, and 125 instead of 72 registers (benchmarks/results/h200/session12/reduce_split/).
        # Measured alternative (session 12): one 64-row product, the φ halves of the first half of the tokens
        # stacked over zeros and those of the second under them (tl.join / permute / reshape, then tl.where), so
        # Triton emits a Hopper wgmma reading v straight from shared memory: 144.5 against 101.1 µs, although the
        # offline compile had 32 instead of 80 shared loads per warp and tile (96 registers instead of 72; and the
        # fp32 N = 1 parity case's dk error rose to 0.012; benchmarks/results/h200/session12/stack/).
        acc_c = tl.dot(tl.trans(fc), vv, acc_c, input_precision=PREC)
        acc_s = tl.dot(tl.trans(fs), vv, acc_s, input_precision=PREC)
    if ZDOT:
        z_c = _column(zd_c, tl.arange(0, 16), 0)
        z_s = _column(zd_s, tl.arange(0, 16), 0)
    elif ZACC:
        z_c = tl.sum(za_c, axis=0)
        z_s = tl.sum(za_s, axis=0)
    else:
        z_c = _column(acc_c, offs_z, DV)
        z_s = _column(acc_s, offs_z, DV)
        acc_c = tl.where(zmask[None, :], acc_c, 0.0)
        acc_s = tl.where(zmask[None, :], acc_s, 0.0)
    _store_state(PART, (pid_b * H + pid_h) * n_chunks + pid_c, acc_c, acc_s, z_c, z_s, BD, BDV, BDZ)


@triton.jit(do_not_specialize=["n_chunks"])
def _combine(PART, OUT, n_chunks, scale, STATE: tl.constexpr, BLOCK: tl.constexpr, CB: tl.constexpr,
             PDL: tl.constexpr = False):
    """OUT[bh, :] = scale · Σ_c PART[bh, c, :], summed in a fixed order (bitwise reproducible)."""
    _pdl_launch(PDL)
    _pdl_wait(PDL)  # PART comes from the reduce pass before
    pid_bh = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < STATE
    base = PART + pid_bh.to(tl.int64) * n_chunks * STATE
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_chunks, CB):  # CB chunks per load: many loads in flight instead of a serial chain
        cs = c0 + tl.arange(0, CB)
        x = tl.load(base + cs[:, None].to(tl.int64) * STATE + offs[None, :],
                    mask=(cs < n_chunks)[:, None] & mask[None, :], other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(OUT + pid_bh.to(tl.int64) * STATE + offs, acc * scale, mask=mask)


@triton.jit
def _store_state(STATE, slot, s_c, s_s, z_c, z_s, BD: tl.constexpr, BDV: tl.constexpr, SW: tl.constexpr):
    """Write one state (or one chunk's partial) at index ``slot``, in the layout :func:`_load_state` reads.
    s_c, s_s are (BD, SW), SW ≥ BDV: columns from BDV on are not stored."""
    offs_d = tl.arange(0, BD)
    cols = tl.arange(0, SW)
    se = offs_d[:, None] * BDV + cols[None, :]
    keep = (offs_d[:, None] < BD) & (cols[None, :] < BDV)
    st = STATE + slot.to(tl.int64) * (2 * BD * BDV + 2 * BD)
    tl.store(st + se, s_c, mask=keep)
    tl.store(st + BD * BDV + se, s_s, mask=keep)
    tl.store(st + 2 * BD * BDV + offs_d, z_c)
    tl.store(st + 2 * BD * BDV + BD + offs_d, z_s)


@triton.jit
def _load_state(STATE, bh, BD: tl.constexpr, BDV: tl.constexpr):
    """One (b, h)'s state, laid out [S_cos (BD×BDV), S_sin (BD×BDV), z_cos (BD), z_sin (BD)] → the four parts."""
    offs_d = tl.arange(0, BD)
    se = offs_d[:, None] * BDV + tl.arange(0, BDV)[None, :]
    st = STATE + bh.to(tl.int64) * (2 * BD * BDV + 2 * BD)
    return (tl.load(st + se), tl.load(st + BD * BDV + se),
            tl.load(st + 2 * BD * BDV + offs_d), tl.load(st + 2 * BD * BDV + BD + offs_d))


@triton.jit
def _centre(s_c, s_s, z_c, z_s):
    """v̄ = Sᵀz / (z·z) (BDV,): a weighted mean of the values (weights φk_j·z; 0 when z = 0). The backward works
    with S − z·v̄ᵀ and v − v̄ instead of S and v (see the module docstring: the cancellation at small spreads)."""
    zz = tl.sum(z_c * z_c, axis=0) + tl.sum(z_s * z_s, axis=0)
    vs = tl.sum(s_c * z_c[:, None], axis=0) + tl.sum(s_s * z_s[:, None], axis=0)
    return vs * tl.where(zz > 0, 1.0 / tl.where(zz > 0, zz, 1.0), 0.0)


@triton.jit
def _den(phi_c, phi_s, z_c, z_s, eps):
    """φq·z + ε (BLOCK_N,) from φq's halves (BLOCK_N, BD), the products the map's numerator multiplies anyway,
    summed as one row of 2·BD terms: one FMA a term, two operations a head dim where m·(c·z_c + s·z_s) took three
    (and summing phi_c·z_c + phi_s·z_s as two terms of a head dim adds an FADD each). Offline sm_90: _fwd_map 493 →
    476 instructions a warp-tile; on the H200 at 518K 57.1-58.1 → 55.9 µs (benchmarks/results/h200/session21/call1).
    Not in _bwd_query, where it changed the float32 N = 1 dq test's rounding past its tolerance (see there)."""
    terms = tl.join(phi_c * z_c[None, :], phi_s * z_s[None, :])
    return tl.sum(tl.reshape(terms, (phi_c.shape[0], 2 * phi_c.shape[1])), axis=1) + eps


@triton.jit
def _z_mats(z_c, z_s, up, eps, BD: tl.constexpr, BDV: tl.constexpr):
    """HALF2's den operands: (BD, BDV) float16 matrices whose every column is z_c·zd, z_s·zd, with zd the power of two
    that puts max |z| in [0.5, 1) (_pow2_scale), and the output factor and ε rescaled to match: with den from z·zd,
    o = num·up / (den/zd + ε) = num·(up·zd) / (den + ε·zd). Returns zc_mat, zs_mat, up·zd, ε·zd."""
    zd, _ = _pow2_scale(tl.maximum(tl.max(tl.abs(z_c), axis=0), tl.max(tl.abs(z_s), axis=0)))
    zc_mat = (z_c[:, None] * zd + tl.zeros((BD, BDV), tl.float32)).to(tl.float16)
    zs_mat = (z_s[:, None] * zd + tl.zeros((BD, BDV), tl.float32)).to(tl.float16)
    return zc_mat, zs_mat, up * zd, eps * zd


@triton.jit
def _map_tile_h2(x, ss, r, s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX: tl.constexpr):
    """HALF2's map of one query tile: x (BLOCK_N, BD) float32, ss = Σx², r = (ss + 1e-12)^(-1/2) (BLOCK_N,), the
    float16 S halves (_f16_state), z matrices and the rescaled up, ε (_z_mats) → o (BLOCK_N, BDV) float32, in the
    products' accumulator layout. den ≥ ε·zd, zd ≥ 2^-65 (float16 keys, λ ≤ 4): a normal float unless ε < 2^-61,
    which the max with FLT_MIN keeps off rcp.approx's flush to zero."""
    xa = x * (alpha * r)[:, None]
    fc, fs = half2._features_h2(_query_mag_fwd(xa, ss * r, lam, tau, lga, APPROX), xa)
    num = tl.dot(fc, s_c)
    num = tl.dot(fs, s_s, num)
    den = half2._den_h2(fc, fs, zc_mat, zs_mat) + eps
    return num * (up * half2._rcp(tl.maximum(den, _FLT_MIN)))[:, None]


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def _fwd_map(
    Q, STATE, FREQ, O,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sq_b, sq_n, sq_h, sq_d, so_b, so_n, so_h, so_d,
    alpha, lam, tau, eps,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
    ROPE: tl.constexpr, PREC: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr, FASTMAG: tl.constexpr,
    F16: tl.constexpr, BLOCK_N: tl.constexpr, CLAMP: tl.constexpr, PDL: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
    HALF2: tl.constexpr = False,
):
    """o = φ̃qᵀS / (φqᵀz + ε) for one chunk of queries of one (b, h); S, z stay in registers for the chunk.
    F16 (see _map_f16): the product takes φ̃q and S as float16, S scaled into range (_f16_state).
    HALF2 (see _map_half2; needs F16 and FASTMAG, no CLAMP): φq formed in float16 pairs (nalasr_kernels.half2), den
    from float16 products with z scaled into range.
    PDL (see _pdl): the first q tile loads before the state is waited for.
    Measured alternative (session 20, commit 4fa5d35): the loads two tiles ahead instead of one (ptxas issues the
    next tile's two loads at 73% of the loop body, offline sm_90): 57.8-60.2 against 55.8-56.4 µs at 518K, 96 instead
    of 78 registers (benchmarks/results/h200/session20/call2/dist_dense.json)."""
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_e = tl.arange(0, BDV)
    dmask = offs_d < D
    emask = offs_e < DV
    q_base = _slab(Q, pid_b, pid_h, sq_b, sq_h)
    o_base = _slab(O, pid_b, pid_h, so_b, so_h)
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    start, end, step = _span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    x_next = _load_tile(q_base, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    _pdl_wait(PDL)  # STATE comes from the combine before
    s_c, s_s, z_c, z_s = _load_state(STATE, pid_b * H + pid_h, BD, BDV)
    if F16:
        s_c, s_s, up = _f16_state(s_c, s_s)
    else:
        up = 1.0
    if FASTMAG:
        lga = _log2(tl.abs(alpha))
    if HALF2:
        zc_mat, zs_mat, up, eps = _z_mats(z_c, z_s, up, eps, BD, BDV)
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, OFFS64)
        x = x_next.to(tl.float32)
        x_next = _load_tile(q_base, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        ss = tl.sum(x * x, axis=1)
        r = tl.rsqrt(ss + 1e-12)
        if HALF2:
            o = _map_tile_h2(x, ss, r, s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX)
        else:
            if FASTMAG:  # 4 operations an element fewer (see _query_mag_fwd)
                xa = x * (alpha * r)[:, None]
                m = _query_mag_fwd(xa, ss * r, lam, tau, lga, APPROX)
                u, uc = _angle(xa, APPROX, CLAMP)
            else:
                dirn = x * r[:, None]
                tn, p, l2, m, _ = _query_mag(dirn, ss * r, lam, tau, APPROX)
                u, uc = _angle(alpha * dirn, APPROX, CLAMP)
            c, s = _sincos_angle(uc, APPROX, SIN5=True)
            mc = m * c
            ms = m * s
            den = _den(mc, ms, z_c, z_s, eps)
            if ROPE:
                c2, s2 = _sincos_any(uc * 0.7853981633974483 + _rope_angle(offs_n, W, freq, offs_d, D // 2))
                mc = m * c2
                ms = m * s2
            if F16:
                num = tl.dot(mc.to(tl.float16), s_c)
                num = tl.dot(ms.to(tl.float16), s_s, num)
            else:
                num = tl.dot(mc, s_c, input_precision=PREC)
                num = tl.dot(ms, s_s, num, input_precision=PREC)
            # Measured alternative (session 18, commit a88c4cf, NALASR_MAP_DENDOT): den from a second float16 product
            # of the same φq with z split in two float16 halves, so den comes out in num's accumulator layout (offline
            # sm_90 505 → 493 instructions a warp-tile, 5 → 3 barriers, one layout conversion fewer): 57.9 against
            # 55.9 µs at 518K on the H200 (benchmarks/results/h200/session18/call3/diag_dendot{0,1}.json). HALF2 takes
            # den from such products (z in every column, so no reduction either; half2._den_h2), with its own features.
            o = num * (up / den)[:, None]  # one division per token, not per element
        tl.store(o_base + rows[:, None] * so_n + offs_e[None, :] * so_d, o.to(O.dtype.element_ty),
                 mask=nmask[:, None] & emask[None, :])


@triton.jit
def _state_h2(STATE, bh, eps, BD: tl.constexpr):
    """HALF2's map operands of one (b, h) (BD = BDV): the float16 S halves, the z matrices and the rescaled output
    factor and ε (_f16_state, _z_mats)."""
    s_c, s_s, z_c, z_s = _load_state(STATE, bh, BD, BD)
    s_c, s_s, up = _f16_state(s_c, s_s)
    zc_mat, zs_mat, up, eps = _z_mats(z_c, z_s, up, eps, BD, BD)
    return s_c, s_s, zc_mat, zs_mat, up, eps


@triton.jit
def _query_h2(x, s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX: tl.constexpr):
    """o (BLOCK_N, BD) float32 of one query tile x as loaded (BLOCK_N, BD), HALF2's features (_map_tile_h2)."""
    xf = x.to(tl.float32)
    ss = tl.sum(xf * xf, axis=1)
    return _map_tile_h2(xf, ss, tl.rsqrt(ss + 1e-12), s_c, s_s, zc_mat, zs_mat, up, eps, alpha, lga, lam, tau, APPROX)


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _fwd_map_pair(
    Q, STATE, O,
    N, H, CHUNK, n_chunks,
    sq_b, sq_n, sq_h, sq_d, so_b, so_n,
    alpha, lam, tau, eps,
    BD: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
):
    """_fwd_map with HALF2 over the two heads 2·program_id(0), 2·program_id(0) + 1 of one chunk of queries (see
    _map_pair): D = DV = BD, o's heads side by side with unit-stride dims (nala_forward's contiguous o), so a token's
    two outputs go out as one (2·BD)-element store, 64 bytes at 16 dims, where one head a program stores 32 bytes of
    each 128-byte row (the map's stream floor 44.5 µs at 518K with those stores, 38.8-39.1 with 64-byte ones,
    benchmarks/results/h200/session19/call4, call6). STRIDED: see _strided."""
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    h0 = 2 * pid_p
    offs_d = tl.arange(0, BD)
    dmask = offs_d < BD
    offs_o = tl.arange(0, 2 * BD)
    qa = _slab(Q, pid_b, h0, sq_b, sq_h)
    qb = qa + sq_h
    o_base = _slab(O, pid_b, h0, so_b, BD)
    start, end, step = _span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    xa_next = _load_tile(qa, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    xb_next = _load_tile(qb, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    _pdl_wait(PDL)  # STATE comes from the combine before
    sca, ssa, zca, zsa, upa, epa = _state_h2(STATE, pid_b * H + h0, eps, BD)
    scb, ssb, zcb, zsb, upb, epb = _state_h2(STATE, pid_b * H + h0 + 1, eps, BD)
    lga = _log2(tl.abs(alpha))
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, OFFS64)
        xa = xa_next
        xb = xb_next
        xa_next = _load_tile(qa, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        xb_next = _load_tile(qb, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        oa = _query_h2(xa, sca, ssa, zca, zsa, upa, epa, alpha, lga, lam, tau, APPROX)
        ob = _query_h2(xb, scb, ssb, zcb, zsb, upb, epb, alpha, lga, lam, tau, APPROX)
        o = tl.reshape(tl.permute(tl.join(oa, ob), (0, 2, 1)), (BLOCK_N, 2 * BD))  # column BD·head + dim
        tl.store(o_base + rows[:, None] * so_n + offs_o[None, :], o.to(O.dtype.element_ty), mask=nmask[:, None])


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def _bwd_query(
    Q, DO, STATE, FREQ, DQ, PART,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sq_b, sq_n, sq_h, sq_d, sg_b, sg_n, sg_h, sg_d, sdq_b, sdq_n, sdq_h, sdq_d,
    alpha, lam, tau, eps,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
    ROPE: tl.constexpr, PREC_G: tl.constexpr, CENTRE: tl.constexpr, APPROX: tl.constexpr, OFFS64: tl.constexpr,
    BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, EYE: tl.constexpr, DZACC: tl.constexpr, MPOW: tl.constexpr,
    CLAMP: tl.constexpr, PDL: tl.constexpr = False, F16: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
):
    """Over one chunk of queries: dq (map), and partial dS = Σ φ̃q dnumᵀ, dz = Σ dden·φq (reduce) → PART.
    DZACC (see _bwd_dzacc): dz in elementwise (BLOCK_N, BD) accumulators summed once after the loop, else through
    the tensor cores. MPOW (see _bwd_mpow): m/dir as sign(dir)·|dir|^(p−1), one exp2 an element, m = that·|dir|."""
    _pdl_launch(PDL)  # see _fwd_reduce
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_e = tl.arange(0, BDV)
    dmask = offs_d < D
    emask = offs_e < DV
    s_c, s_s, z_c, z_s = _load_state(STATE, pid_b * H + pid_h, BD, BDV)
    if CENTRE:  # centred values: S − z·v̄ᵀ (v̄ enters dden below)
        vbar = _centre(s_c, s_s, z_c, z_s)
        s_c = s_c - z_c[:, None] * vbar[None, :]
        s_s = s_s - z_s[:, None] * vbar[None, :]
    s_cT = tl.trans(s_c)
    s_sT = tl.trans(s_s)
    if F16:  # see _bwd_f16
        s_cT16, s_sT16, s_up = _f16_state(s_cT, s_sT)
    q_base = _slab(Q, pid_b, pid_h, sq_b, sq_h)
    g_base = _slab(DO, pid_b, pid_h, sg_b, sg_h)
    dq_base = _slab(DQ, pid_b, pid_h, sdq_b, sdq_h)
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    GROUPS: tl.constexpr = 1 + SPLIT * (BLOCK_N // 16 - 1)  # see _reduce_dot
    ds_c = _reduce_acc(BD, BDV, GROUPS)
    ds_s = _reduce_acc(BD, BDV, GROUPS)
    offs_1 = tl.arange(0, 16)
    if DZACC:
        dz_c = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
        dz_s = tl.zeros((BLOCK_N, BD), dtype=tl.float32)
    else:
        dz_c = _reduce_acc(BD, 16, GROUPS)  # column 0 is dz (see dden_col)
        dz_s = _reduce_acc(BD, 16, GROUPS)
    start, end, step = _span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    x_next = _load_tile(q_base, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
    g_next = _load_tile(g_base, start, end, sg_n, offs_e, sg_d, emask, BLOCK_N, OFFS64)
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, OFFS64)
        mask_d = nmask[:, None] & dmask[None, :]
        x = _upcast(x_next, offs_d, EYE)
        # Masked tokens: g = 0 ⇒ dnum = dden = 0, so they add nothing to dS, dz (and dq is not stored).
        g = _upcast(g_next, offs_e, EYE)
        x_next = _load_tile(q_base, n0 + step, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, OFFS64)
        g_next = _load_tile(g_base, n0 + step, end, sg_n, offs_e, sg_d, emask, BLOCK_N, OFFS64)
        # ---- recompute the forward for this tile (o in float32, as the reference's autograd sees it)
        ss, r, dirn = _direction(x)
        nrm = ss * r
        tn, p, l2, m, mo = _query_mag(dirn, nrm, lam, tau, APPROX, MPOW)
        u, uc = _angle(alpha * dirn, APPROX, CLAMP)
        c, s = _sincos_angle(uc, APPROX)
        phi_c = m * c
        phi_s = m * s
        # Measured alternative (session 21): den and dden summed as one row of 2·BD products, as _den does for
        # _fwd_map (offline 658 → 645 instructions a warp-tile): 164.7-165.1 against 165.1 µs at 518K, and the
        # float32 N = 1 dq test over its tolerance (0.0064 > 0.005; benchmarks/results/h200/session21/call6).
        den = tl.sum(phi_c * z_c[None, :] + phi_s * z_s[None, :], axis=1) + eps
        if ROPE:
            c2, s2 = _sincos_any(uc * 0.7853981633974483 + _rope_angle(offs_n, W, freq, offs_d, D // 2))
            phi_c2 = m * c2
            phi_s2 = m * s2
        else:
            c2 = c
            s2 = s
            phi_c2 = phi_c
            phi_s2 = phi_s
        rden = 1.0 / den
        # ---- o = num/den, num = Sᵀφ̃q. ∂L/∂φ̃q = S·dnum, and g·num = den·(φ̃q·S·dnum): dden comes from ∂L/∂φ̃q,
        # so num (o) is never formed (two products and a (BLOCK_N, BDV) accumulator fewer). With CENTRE, S is
        # the centred S − z·v̄ᵀ here, and dden the centred dden + v̄·dnum = −(φq·(S − z·v̄ᵀ)·dnum − ε·v̄·dnum)/den.
        dnum = g * rden[:, None]                                  # (BLOCK_N, BDV)
        if F16:  # S·dnum as g (exact in float16) times the scaled S, 1/den and the scale after the product
            g16 = g.to(tl.float16)
            gsc = (rden * s_up)[:, None]
            gc2 = tl.dot(g16, s_cT16) * gsc
            gs2 = tl.dot(g16, s_sT16) * gsc
        else:
            gc2 = tl.dot(dnum, s_cT, input_precision=PREC_G)         # (BLOCK_N, BD)
            gs2 = tl.dot(dnum, s_sT, input_precision=PREC_G)
        dden = -tl.sum(phi_c2 * gc2 + phi_s2 * gs2, axis=1)
        if CENTRE:
            dden += eps * tl.sum(dnum * vbar[None, :], axis=1)
        dden *= rden                                              # (BLOCK_N,)
        ds_c = _reduce_dot(phi_c2, dnum, ds_c, GROUPS, PREC_G)
        ds_s = _reduce_dot(phi_s2, dnum, ds_s, GROUPS, PREC_G)
        if DZACC:
            dz_c += dden[:, None] * phi_c
            dz_s += dden[:, None] * phi_s
        else:  # dden in column 0 of an otherwise zero operand: no column sum over the tile's tokens every tile
            dden_col = tl.where(offs_1[None, :] == 0, dden[:, None], 0.0)  # (BLOCK_N, 16)
            dz_c = _reduce_dot(phi_c, dden_col, dz_c, GROUPS, PREC_G)
            dz_s = _reduce_dot(phi_s, dden_col, dz_s, GROUPS, PREC_G)
        gc = dden[:, None] * z_c[None, :]
        gs = dden[:, None] * z_s[None, :]
        dm, dth = _feature_grad_angle(m, c, s, c2, s2, gc, gs, gc2, gs2, ROPE)
        # ---- θ = clamp((π/4)·tanh(α·dir)) and m = |dir|^p → ∂L/∂dir, ∂L/∂p
        if CLAMP:
            dth = tl.where(tl.abs(u) <= _U_MAX, dth, 0.0)
        ddir = _dtanh(dth, u, 0.7853981633974483 * alpha, APPROX)
        if MPOW:  # m/dir = sign(dir)·mo (mo ≥ 0 takes dir's sign bit: one LOP3, no compare and select)
            mos = (mo.to(tl.int32, bitcast=True) | (dirn.to(tl.int32, bitcast=True) & -2147483648)).to(
                tl.float32, bitcast=True)
            ddir += dm * p[:, None] * mos
        else:
            pos = tl.abs(dirn) >= _FLT_MIN  # as in _query_mag: m = 0 below
            ddir += tl.where(pos, _div(dm * p[:, None] * m, tl.where(pos, dirn, 1.0)), 0.0)
        dp = tl.sum(dm * m * l2, axis=1) * 0.6931471805599453     # m·ln|dir| = m·log2|dir|·ln 2; l2 = 0 at dir = 0
        dnrm = dp * lam * (1.0 - tn * tn)
        # ---- dir = x·r and ‖x‖ = Σx²·r, r = (Σx² + 1e-12)^(-1/2)
        proj = tl.sum(ddir * dirn, axis=1)
        dx = r[:, None] * (ddir - dirn * proj[:, None]) + (dnrm * r * (2.0 - ss * r * r))[:, None] * x
        tl.store(dq_base + rows[:, None] * sdq_n + offs_d[None, :] * sdq_d, dx.to(DQ.dtype.element_ty), mask=mask_d)
    ds_c = _reduce_total(ds_c, GROUPS)
    ds_s = _reduce_total(ds_s, GROUPS)
    if DZACC:
        dz_c = tl.sum(dz_c, axis=0)
        dz_s = tl.sum(dz_s, axis=0)
    else:
        dz_c = _column(_reduce_total(dz_c, GROUPS), offs_1, 0)
        dz_s = _column(_reduce_total(dz_s, GROUPS), offs_1, 0)
    _store_state(PART, (pid_b * H + pid_h) * n_chunks + pid_c, ds_c, ds_s, dz_c, dz_s, BD, BDV, BDV)


@triton.jit(do_not_specialize=["N", "W", "n_chunks", "N_BUCKET"])
def _bwd_key(
    K, V, STATE, DSTATE, FREQ, DK, DV_,
    N, W, H, CHUNK, n_chunks, N_BUCKET,
    sk_b, sk_n, sk_h, sk_d, sv_b, sv_n, sv_h, sv_d,
    sdk_b, sdk_n, sdk_h, sdk_d, sdv_b, sdv_n, sdv_h, sdv_d,
    alpha, lam,
    D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
    LAM_INT: tl.constexpr, ROPE: tl.constexpr, PREC: tl.constexpr, PREC_G: tl.constexpr, CENTRE: tl.constexpr,
    APPROX: tl.constexpr, OFFS64: tl.constexpr, BLOCK_N: tl.constexpr, EYE: tl.constexpr, CLAMP: tl.constexpr,
    PDL: tl.constexpr = False, F16: tl.constexpr = False,
    STRIDED: tl.constexpr = False,
):
    """Over one chunk of keys: dv = (dS/N)ᵀφ̃k, ∂L/∂φ̃k = (dS/N)·v, ∂L/∂φk = dz/N, chained into dk."""
    pid_h = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, BD)
    offs_e = tl.arange(0, BDV)
    dmask = offs_d < D
    emask = offs_e < DV
    if CENTRE:
        s_c, s_s, z_c, z_s = _load_state(STATE, pid_b * H + pid_h, BD, BDV)
        vbar = _centre(s_c, s_s, z_c, z_s)
    k_base = _slab(K, pid_b, pid_h, sk_b, sk_h)
    v_base = _slab(V, pid_b, pid_h, sv_b, sv_h)
    dk_base = _slab(DK, pid_b, pid_h, sdk_b, sdk_h)
    dv_base = _slab(DV_, pid_b, pid_h, sdv_b, sdv_h)
    if ROPE:
        freq = tl.load(FREQ + offs_d)
    start, end, step = _span(pid_c, CHUNK, N, n_chunks, BLOCK_N, STRIDED)
    x_next = _load_tile(k_base, start, end, sk_n, offs_d, sk_d, dmask, BLOCK_N, OFFS64)
    v_next = _load_tile(v_base, start, end, sv_n, offs_e, sv_d, emask, BLOCK_N, OFFS64)
    _pdl_wait(PDL)  # DSTATE comes from the combine before (STATE, k, v from earlier kernels)
    ds_c, ds_s, gc, gs = _load_state(DSTATE, pid_b * H + pid_h, BD, BDV)  # dS already scaled by 1/N
    gc = gc[None, :]  # ∂L/∂φk: the same for every key (CENTRE: the centred dz, so v − v̄ below)
    gs = gs[None, :]
    if F16:  # see _bwd_f16
        ds_c, ds_s, ds_up = _f16_state(ds_c, ds_s)
        tl.static_assert(CENTRE, "the float16 products are for the centred backward (see _bwd_f16)")
        g_unit = 2.0 * ds_up  # (v − v̄)/2 against the scaled dS: ∂L/∂φ̃k, ∂L/∂φk, dm, dth in units of g_unit
        gc = gc / g_unit
        gs = gs / g_unit
        vbar_h = vbar * 0.5
    else:
        g_unit = 1.0
    ds_cT = tl.trans(ds_c)
    ds_sT = tl.trans(ds_s)
    for n0 in tl.range(start, end, step):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, OFFS64)
        mask_d = nmask[:, None] & dmask[None, :]
        mask_e = nmask[:, None] & emask[None, :]
        x = _upcast(x_next, offs_d, EYE)
        vv = _upcast(v_next, offs_e, EYE)
        x_next = _load_tile(k_base, n0 + step, end, sk_n, offs_d, sk_d, dmask, BLOCK_N, OFFS64)
        v_next = _load_tile(v_base, n0 + step, end, sv_n, offs_e, sv_d, emask, BLOCK_N, OFFS64)
        ss, r, dirn = _direction(x)
        u, uc = _angle(alpha * dirn, APPROX, CLAMP)
        m = _key_mag(x, x * x, lam, LAM_INT)  # x·x: _direction's, formed once
        c, s = _sincos_angle(uc, APPROX, SIN5=True)
        if ROPE:
            c2, s2 = _sincos_any(uc * 0.7853981633974483 + _rope_angle(offs_n, W, freq, offs_d, D // 2))
        else:
            c2 = c
            s2 = s
        if F16:  # φ̃k/‖k‖^λ = |dir|^λ·(cos, sin) lies in [−1, 1]; ‖k‖^λ and dS's scale after the product
            rl = _key_mag(r, r * r, lam, LAM_INT)  # r^λ (r > 0): m_k·r^λ = |dir|^λ
            md = m * rl[:, None]
            dv = tl.dot((md * c2).to(tl.float16), ds_c)
            dv = tl.dot((md * s2).to(tl.float16), ds_s, dv)
            dv = dv * (ds_up / rl)[:, None]
        else:
            dv = tl.dot(m * c2, ds_c, input_precision=PREC)
            dv = tl.dot(m * s2, ds_s, dv, input_precision=PREC)
        tl.store(dv_base + rows[:, None] * sdv_n + offs_e[None, :] * sdv_d, dv.to(DV_.dtype.element_ty), mask=mask_e)
        if F16:  # (v − v̄)/2 fits float16 for float16 v (|v − v̄| ≤ 2·65504); masked tokens: −v̄/2, not stored
            vh = (vv * 0.5 - vbar_h[None, :]).to(tl.float16)
            gc2 = tl.dot(vh, ds_cT)  # in units of g_unit (gc, gs too)
            gs2 = tl.dot(vh, ds_sT)
        else:
            if CENTRE:
                vv = vv - vbar[None, :]  # masked tokens become −v̄: nothing of theirs is stored
            gc2 = tl.dot(vv, ds_cT, input_precision=PREC_G)          # (BLOCK_N, BD)
            gs2 = tl.dot(vv, ds_sT, input_precision=PREC_G)
        dm, dth = _feature_grad_angle(m, c, s, c2, s2, gc, gs, gc2, gs2, ROPE)
        if CLAMP:
            dth = tl.where(tl.abs(u) <= _U_MAX, dth, 0.0)
        ddir = _dtanh(dth, u, 0.7853981633974483 * alpha * g_unit, APPROX)
        proj = tl.sum(ddir * dirn, axis=1)
        dx = r[:, None] * (ddir - dirn * proj[:, None]) + dm * _key_mag_grad(x, lam, LAM_INT, g_unit)
        tl.store(dk_base + rows[:, None] * sdk_n + offs_d[None, :] * sdk_d, dx.to(DK.dtype.element_ty), mask=mask_d)


# ================================================================================================== autotune
# Few configs; the key buckets the token count (next power of two of B·N·H) so a new image size reuses the tuning
# of its bucket (and, with cache_results, a fresh process reads it from Triton's disk cache). Register pressure
# grows with the tile elements per thread, BLOCK_N·BD / (32·num_warps), hence the pruning (see _prune).

_FWD_CONFIGS = [
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 256}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=3),  # more loads in flight per program
    triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=1),  # the manual prefetch alone
    triton.Config({"BLOCK_N": 256}, num_warps=8, num_stages=1),
    # with the float16 product (_map_f16), 59.0 µs at 518K against 61.5 for 64 × 4 (session 15, call 6)
    triton.Config({"BLOCK_N": 64}, num_warps=2, num_stages=2),
]
# _fwd_reduce: one warp a program. Its S product has 16 rows (the φ halves), so a 2-D tl.dot splits only the
# columns across warps and every warp of a program reads the whole φ operand from shared memory: 4 warps read it 4
# times. With one warp (and more programs, see _PROGRAMS_PER_SM) the shared-memory traffic per token is
# about half (offline sm_90: 96 instead of 224 wavefronts per 32 tokens with ZACC). On the H200 at 518K:
# 70.9 µs against 103.8 for the 4-warp pick (benchmarks/results/h200/session13/call1/sweep_r*.json). It takes 128
# registers (16 warps an SM); capped at 96 it spills and took 109.4 µs (call3/sweep_r.json). The multi-warp
# configs stay for wide heads (BD = 64: 32 tokens are 64 elements a thread on one warp).
_REDUCE_CONFIGS = [
    triton.Config({"BLOCK_N": 32}, num_warps=1, num_stages=2),
    triton.Config({"BLOCK_N": 16}, num_warps=1, num_stages=2),
    triton.Config({"BLOCK_N": 32}, num_warps=2, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
]
_BWD_CONFIGS = [  # ~30 live (BLOCK_N, BD) float32 tiles in the backward: fewer tokens per thread
    triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=1),
    triton.Config({"BLOCK_N": 32}, num_warps=2, num_stages=2),
    # _bwd_query's pick at 518K with EYE (205 registers): 207.6 against 222.6 µs for 32 tokens on 2 warps
    # (benchmarks/results/h200/session14/call2/sweep_q.json)
    triton.Config({"BLOCK_N": 16}, num_warps=1, num_stages=2),
    # _bwd_query needed ~250 registers a thread before EYE (2 blocks of 4 warps an SM): capped, it spills some to
    # L1 but 3 or 4 blocks fit (_bwd_key with EYE: 128 registers under the 168 cap)
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2, maxnreg=168),
    triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=2, maxnreg=128),
]
_MAX_BLOCK_N = 256  # chunks are multiples of this, so every config tiles a chunk exactly (unless a pass says else)
# _bwd_query's chunks: multiples of 64 tokens (every pick of its autotuner at 518K and 1M, 16 or 64, tiles them; a
# larger one masks part of a chunk's last tile). Its 8 programs an SM then fill 1,048 of the H200's 1,056 places at
# 518K instead of 1,016 (2,048-token chunks): the backward 288.0-288.9 against 292.5 µs
# (benchmarks/results/h200/session20/call5/pdl_all.json).
_BWD_QUERY_QUANTUM = 64
_BWD_KEY_QUANTUM = 64  # its autotuner's pick at 518K is 64 tokens too (see _PROGRAMS_PER_SM)
_FWD_MAP_QUANTUM = 64  # its pick's tile (64 tokens on 2 warps); see _PROGRAMS_PER_SM
# _fwd_map_pair's tokens a tile, warps, stages and register cap (None: ptxas's 118, 16 programs an SM). Capped at 104
# (no spills offline, 676 instead of 659 loop instructions) 19 fit, and ran 57.3 against 49.4 µs at 16 at 518K
# (benchmarks/results/h200/session27/call1).
_PAIR_TILE: tuple[int, int, int, int | None] = (32, 1, 3, None)
_FWD_MAP_PAIR_QUANTUM = _PAIR_TILE[0]  # its chunks: multiples of its tile
# The passes' smallest chunks: they decide the program count at small sizes only (config_sweep_gpu.py --min-chunk).
# The one-head map's is 128 tokens since session 27: on the H200 (dense q, 4 heads, 64 tokens on 2 warps, 28 an SM)
# the forward graph at 4K 14.3-14.5 µs against 18.9-19.1 with 256 (64: 12.2), at 49K 18.9-19.0 against 23.1-23.5
# (64: 20.0), at 131K 38.1-38.2 against 38.4-38.7 (benchmarks/results/h200/session27/call1-2, sweeps.json). The
# reduce's (its partials feed _combine) is 128 too: with the map's, at 4K 10.2 against 11.7-12.1 µs (64: 9.5), at 49K
# 18.7 against 19.4-19.8 (64: 19.5; session27/call3/sweeps.json).
_FWD_MAP_MIN_CHUNK = 128
_FWD_MAP_PAIR_MIN_CHUNK = _MAX_BLOCK_N
_FWD_REDUCE_MIN_CHUNK = 128
_PAIR_MIN_ROWS = 800_000  # (token, head pair) rows from which _map_pair takes it: 400K tokens of 4 heads (see there)
_TUNE_KEY = ["N_BUCKET", "D", "DV", "ROPE"]


def _per_thread(c, bd: int) -> int:
    return c.kwargs["BLOCK_N"] * bd // (32 * c.num_warps)


def _prune(limit: int):
    # Elements of one (BLOCK_N, BD) tile per thread. From ptxas on sm_90 (D = 16): the forward kernels stay
    # at 70-190 registers without spills up to 16, the backward query kernel reaches 255 registers at 8 and spills
    # beyond. Configs over the limit are dropped; if none is left, the leanest one runs.
    def prune(configs, named_args, **kwargs):
        bd = max(kwargs.get("BD", 16), kwargs.get("BDV", 16))
        kept = [c for c in configs if _per_thread(c, bd) <= limit]
        return kept or [min(configs, key=lambda c: (_per_thread(c, bd), -c.num_warps))]

    return prune


def _autotune_kwargs() -> dict:
    # Short benchmarks (the kernels run in tens of µs) and, where this Triton has it, the on-disk cache of
    # tuning results so a fresh process does not tune again.
    params = inspect.signature(triton.autotune).parameters
    kw: dict[str, Any] = {}
    if "do_bench" in params:
        kw["do_bench"] = lambda fn, quantiles: triton.testing.do_bench(fn, warmup=5, rep=20, quantiles=quantiles)
    if "cache_results" in params:
        kw["cache_results"] = True
    return kw


def _tuned(kernel, configs, limit: int, key: list[str] = _TUNE_KEY):
    return triton.autotune(configs=configs, key=key, prune_configs_by={"early_config_prune": _prune(limit)},
                           **_autotune_kwargs())(kernel)


_fwd_reduce_tuned = _tuned(_fwd_reduce, _REDUCE_CONFIGS, 16)
_fwd_map_tuned = _tuned(_fwd_map, _FWD_CONFIGS, 16)
_bwd_query_tuned = _tuned(_bwd_query, _BWD_CONFIGS, 8)
_bwd_key_tuned = _tuned(_bwd_key, _BWD_CONFIGS, 8)

# Programs per SM and pass: several waves balance the load and keep enough loads in flight to hide HBM latency;
# the cost in the passes that reduce (_fwd_reduce, _bwd_query) is the partial buffer (one 2·BD·BDV + 2·BD
# float32 state per chunk, ~1-2% of the traffic at 518K). The map passes (_fwd_map, _bwd_key) write no partials
# and take their own, finer chunks: 3 of _fwd_map's 8-warp programs fit an SM (76 registers), so at 8 per SM its
# 1,016 programs ran in 2.57 waves, the last 57% full (ncu, session 12). At 518K on the H200, _fwd_map 72.8 →
# 64.3 µs with 24 (63.3 with 48), the forward 0.183 → 0.175 ms (benchmarks/results/h200/session12/diag_map*.json).
# 48 since session 15, where every config swept with and without the float16 product ran faster at 48 than at 24:
# 59.0 / 61.0 µs (64 tokens, 2 warps, F16), 61.5 / 62.1 (64 × 4, F16), 62.8 / 63.7 and 63.9 / 66.1 (tf32;
# benchmarks/results/h200/session15/call6/sweep_m16.json). 36 on 64-token chunk quanta (_FWD_MAP_QUANTUM) since
# session 23: 12 of its 2-warp programs (79 registers) fit an SM, so 36 an SM is 4,632 programs in 2.92 waves of
# 1,584 places, where 48 on 256-token quanta (512-token chunks) left 4,052 in 2.56. At 518K on the H200 the map 53.7
# against 54.2 µs at 36 on 256-token quanta and 54.3 at 48; 55.4-55.7 at 12 or 24
# (benchmarks/results/h200/session23/call1/sweep_map.json).
# _fwd_reduce's one-warp programs (see _REDUCE_CONFIGS) take 16 per SM since session 15: at 128 registers 16 of
# them fill an SM, so 16 is one full wave, and half the chunks halve _combine's reading of the partials (the
# forward's combine took 6.2 µs at 32, every sweep of sessions 13-14). At 518K on the H200 (session 15,
# call4/sweep_r16.json): reduce + combine 71.9 + 2.8 µs at 16 against 71.3 + 6.3 at 32, the forward graph 137.5
# against 143.0 µs (16 tokens a program: 75.4 + 2.8 against 79.6 + 5.2).
# NALASR_PROGRAMS_PER_SM_<PASS> (FWD_REDUCE, FWD_MAP, FWD_MAP_HALF2, FWD_MAP_PAIR, BWD_QUERY, BWD_KEY) sets one, for
# the sweeps of benchmarks/config_sweep_gpu.py and kernel_diag_gpu.py.
# _bwd_key took 32 from session 16 (126.8 against 128.5 µs at 24; 64 tokens, 4 warps, 2 stages,
# benchmarks/results/h200/session16/call5/sweep_k_pp.json) and takes 8 with 64-token chunk rounding since session 20:
# 1,984-token chunks, 1,048 programs in two full waves of its 4 programs an SM, where 32 left 4,052 in 7.7. The
# backward at 518K 281.2 against 285.8-287.2 µs, at 1M 558.5 against 560.1-564.4
# (benchmarks/results/h200/session20/call6/bwd_key_plans.json).
# Both backward passes again with tile-strided chunks (session 30 call 2, twice): 8 / 8 stays fastest, the backward
# at 518K 0.245 / 0.247 ms against 0.249-0.257 with either at 16, 0.266-0.299 with _bwd_key at 4 or 12, 0.326-0.328
# with _bwd_query at 9 (224 registers leave two of its warps a scheduler: 9 is a second wave). The forward's 16 / 16
# likewise (call 4): the reduce at 32 or 48 took the forward to 0.111-0.117 ms, the pair map at 32 or 48 gained nothing.
# fwd_map_pair: 16 of _fwd_map_pair's one-warp programs (118 registers) fill an SM, so 16 is one wave (2,026 programs
# of 512 tokens at 518K). On the H200 at 518K, dense q: the map 49.3 µs at 16 against 51.9 / 61.1 / 53.6 / 50.3 at
# 12 / 17 / 24 / 34 (17: a second wave); 32 tokens on 1 warp with 2 or 3 stages 49.6-49.8, 16 tokens 51.4, 64 on 2
# warps (8 an SM) 51.3, chunk quanta of 8, 16 or 32 tokens the same (benchmarks/results/h200/session26/call1-2).
# fwd_map_half2: _fwd_map with HALF2 (see _map_half2) takes 66 registers, so 14 of its 2-warp programs fit an SM and 28
# is two whole waves. At 518K on the H200, twice: the map 52.0 / 52.2 µs against 53.7 / 53.3 at 36 (42: 52.7 / 52.4,
# 48: 52.6 / 52.7, 56: 53.3 / 53.2), the forward graph 108.0 / 107.6 against 109.1 / 108.5
# (benchmarks/results/h200/session25/call3).
_PROGRAMS_PER_SM = {name: int(os.environ.get(f"NALASR_PROGRAMS_PER_SM_{name.upper()}", default))
                    for name, default in (("fwd_reduce", 16), ("fwd_map", 36),
                                          ("fwd_map_half2", 28), ("fwd_map_pair", 16), ("bwd_query", 8),
                                          ("bwd_key", 8))}


# ================================================================================================ host side


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@functools.lru_cache(maxsize=16)
def _props(device_index: int):
    return torch.cuda.get_device_properties(device_index)


def _cuda_props(device: torch.device):
    """The properties of a CUDA device (cached; the current device where it has no index)."""
    return _props(device.index if device.index is not None else torch.cuda.current_device())


def _sms(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 2 elsewhere (the interpreter's plans)."""
    if device.type != "cuda":
        return 2
    return _cuda_props(device).multi_processor_count


def _plan(n: int, bh: int, device: torch.device, per_sm: int, quantum: int = _MAX_BLOCK_N,
          minimum: int = _MAX_BLOCK_N) -> tuple[int, int]:
    """(tokens per program, number of chunks) for a pass over n tokens of bh (batch, head) pairs, aiming at
    ``per_sm`` programs per SM: chunks of at least ``minimum`` tokens (fewer partials to combine at small n),
    rounded up to a multiple of ``quantum``. A finer quantum than the tile of the widest config fills the wave more
    closely: the register reduce (nala_rr.TILE_TOKENS) at 518K takes 992-token chunks, 2,092 programs for 2,112
    places, against 1,024 (2,028): 55.4-55.7 against 57.2-57.4 µs (benchmarks/results/h200/session20/call1-2)."""
    if _CONFIG is not None:
        chunk = int(_CONFIG["CHUNK"])
        assert chunk % int(_CONFIG["BLOCK_N"]) == 0, "CHUNK must be a multiple of BLOCK_N"
    else:
        target = max(1, -(-_sms(device) * per_sm // bh))  # chunks per (b, h)
        chunk = -(-n // target)
        chunk = max(minimum, -(-chunk // quantum) * quantum)
    return chunk, -(-n // chunk)


try:
    from triton.backends.nvidia.compiler import CUDAOptions as _CUDAOptions
    _PDL_OK = _HAS_GDC and "launch_pdl" in _CUDAOptions.__dataclass_fields__
except ImportError:  # a Triton without its CUDA backend: only the interpreter runs here
    _PDL_OK = False


def _pdl(device: torch.device) -> bool:
    """Whether the passes chain by programmatic dependent launch (PDL): each pass ends with its programs letting
    the next kernel start (_pdl_launch) and the next, launched with launch_pdl, waits for its inputs (_pdl_wait)
    after whatever it can do before (the map loads its first q tile, _bwd_key its first k and v tiles). The next
    kernel's programs then take the SMs the pass frees in its tail, and the launch gap goes. The combine and the map
    (forward), the combine and _bwd_key (backward) launch so; the first pass of each does not (its inputs come from
    kernels that know nothing of PDL). sm_90 and later, a Triton with grid dependency control (≥ 3.4); NALASR_PDL=0
    turns it off."""
    if _forced("NALASR_PDL", ("0", "1")) == "0" or _INTERPRET or not _PDL_OK or device.type != "cuda":
        return False
    return _cuda_props(device).major >= 9


_FASTMAG_ALPHA = (2.0**-20, 2.0**20)  # |α| where xa = α·dir keeps |dir|^p (see _query_mag_fwd)


def _fastmag(approx: bool, lam: float, tau: float, alpha: float) -> bool:
    """Whether the map takes m_q from _query_mag_fwd: approximate math (16-bit inputs), λτ ≥ 1.5 (p ≥ 1.5: a flushed
    subnormal leaves an m that is 0 in float32 anyway) and |α| in _FASTMAG_ALPHA (log2|α| finite and xa normal)."""
    return approx and lam * tau >= 1.5 and _FASTMAG_ALPHA[0] <= abs(alpha) <= _FASTMAG_ALPHA[1]


def _pdl_kw(pdl: bool) -> dict:
    """Launch options of a kernel that waits for the one before (only given when set: older Tritons lack it)."""
    return {"launch_pdl": True} if pdl else {}


def _launch(tuned, plain, grid, *args, **meta):
    if _CONFIG is not None or _INTERPRET:
        cfg = _CONFIG or {"BLOCK_N": 64, "num_warps": 4}
        plain[grid](*args, **meta, BLOCK_N=int(cfg["BLOCK_N"]), num_warps=int(cfg.get("num_warps", 4)))
    else:
        tuned[grid](*args, **meta)


def _empty(shape, dtype, device) -> Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    if _OUT_FILL is not None:
        t.fill_(_OUT_FILL)
    return t


@functools.lru_cache(maxsize=32)
def _rope_freq(d: int, bd: int, base: float, device: torch.device) -> Tensor:
    """ω per angle slot, (BD,) float32: slots j < D/2 and D/2 + j share ω_j = base^(−j/(D/2)); 0 beyond (odd D's
    last angle and padding). Same expression and device as rope_angles() in the reference, same rounding."""
    half = d // 2
    freq = base ** (-torch.arange(half, dtype=torch.float32, device=device) / half)
    out = torch.zeros(bd, dtype=torch.float32, device=device)
    out[:half] = freq
    out[half:2 * half] = freq
    return out


# θ's clamp at ±Θ binds only where tanh(α·dir) > _U_MAX = 1 − 1.3e-4, i.e. α·|dir| > 4.8; |dir| < 1, so it never
# does for |α| ≤ 4, with room for tanh.approx's relative error (≤ 2^-10.99: tanh(4)·(1 + 5e-4) = 0.99983). The
# kernels then leave out the clamp (two min/max an element) and the backward its gradient mask (a select).
_CLAMP_FREE = 4.0


def _clamp(alpha: float) -> bool:
    """Whether the kernels must clamp θ (the reference's cap, which skips itself for |α| ≤ 4.8 the same way)."""
    return abs(float(alpha)) > _CLAMP_FREE


def _forced(name: str, choices: tuple[str, ...]) -> str | None:
    """The environment's override ``name`` (one of ``choices``), or None when unset; ValueError for any other value."""
    forced = os.environ.get(name)
    if forced and forced not in choices:
        raise ValueError(f"{name}={forced!r}: use {', '.join(choices[:-1])} or {choices[-1]}")
    return forced or None


def _precision(*tensors: Tensor, grad: bool = False) -> str:
    """tl.dot precision: tf32x3 for float32 inputs and for the backward's uncentred products (``grad``: with
    RoPE), else tf32. NALASR_DOT_PRECISION overrides all of them."""
    forced = _forced("NALASR_DOT_PRECISION", ("ieee", "tf32", "tf32x3"))
    if forced:
        return forced
    return "tf32x3" if grad or all(t.dtype == torch.float32 for t in tensors) else "tf32"


def _all_16bit(*tensors: Tensor) -> bool:
    return all(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)


def _approx_math(*tensors: Tensor, rope: bool = False) -> bool:
    """tanh.approx and short sin/cos polynomials (APPROX) for 16-bit inputs: their errors (~2^-11, 1e-5) sit below
    the inputs' own rounding and the tf32 products they run in; float32 inputs keep the ~1e-7 paths, and so
    does RoPE whatever the environment says (its backward needs tf32x3 already).
    NALASR_APPROX_MATH=0/1 forces either (benchmarks/device_session8d.sh measures the difference)."""
    if rope:
        return False
    forced = _forced("NALASR_APPROX_MATH", ("0", "1"))
    if forced:
        return forced == "1"
    return _all_16bit(*tensors)


def _reduce_vec4() -> bool:
    """Whether _fwd_reduce loads its k and v tiles as runs of 4 columns per thread instead of 8 (default;
    NALASR_REDUCE_VEC4=0 for the 8). With 8, a thread holds the 8 float32 of one 128-bit fp16 load and stores
    them for tl.dot as two st.shared.v4 inside one 32-byte swizzle unit: every thread of a warp writes the same
    half of its unit, so a store takes 8 wavefronts instead of 4 (offline sm_90 compile,
    benchmarks/compile_sm90.py: 32 of 64 store wavefronts per warp and tile are conflicts; ncu on the H200: 0
    conflicted store wavefronts with 4, 4.1 M of 8.3 M with 8). On the H200 at 518K: 100.9 against 113.9 µs
    (benchmarks/results/h200/session11/diag_vec4{1,0}.json)."""
    return _forced("NALASR_REDUCE_VEC4", ("0", "1")) != "0"


def _reduce_split() -> bool:
    """Whether _bwd_query's reduce products (dS, dz) split a tile's tokens into groups of 16, one batch of a 3-D
    tl.dot each (default; NALASR_REDUCE_SPLIT=0 for one 2-D product): see _reduce_dot. Offline sm_90 compile
    (64 tokens, 4 warps): 24 instead of 112 shared loads and 887 instead of 1012 instructions per warp and tile.
    On the H200 at 518K: 290.5 against 355.7 µs at that config (session 11's 32-token, 2-warp pick: 309 µs;
    benchmarks/results/h200/session12/diag_split{1,0}.json)."""
    return _forced("NALASR_REDUCE_SPLIT", ("0", "1")) != "0"


def _reduce_zdot() -> bool:
    """With ZACC and tf32 products (no RoPE): whether _fwd_reduce takes z from a second product of the same φk
    operand with a (BLOCK_N, 16) tile of ones (default; NALASR_REDUCE_ZDOT=0 sums the tf32-truncated φk
    elementwise): the tensor cores truncate the operand themselves, so the truncation and the sums leave the loop.
    Offline sm_90 (benchmarks/compile_sm90.py --zdot 0|1): 506 → 452 instructions a warp-tile, 128 → 96 registers;
    the (BD, 16) ones product is 8 more mma.sync a tile, unlike the ones column beside v (NALASR_REDUCE_ZACC=0),
    which widens the value operand staged through shared memory."""
    return _forced("NALASR_REDUCE_ZDOT", ("0", "1")) != "0"


def _reduce_rr(k: Tensor, v: Tensor, rope: bool, prec: str, offs64: bool, chunk: int) -> bool:
    """Whether the forward reduce runs :mod:`nalasr_kernels.nala_rr` (its products issued from registers, no shared
    memory) instead of _fwd_reduce: where its loads fit (nala_rr.usable: 16-bit k, v with unit-stride head dims,
    D = Dv = 16) and _fwd_reduce would take tf32 products with z from the same operands (ZDOT: no RoPE); int32
    offsets. NALASR_REDUCE_RR=0 keeps _fwd_reduce. On the H200 at 518K: 59.7 against 67.1 µs in the forward
    (benchmarks/results/h200/session18/call10/rr.json)."""
    if rope or prec != "tf32" or offs64 or not (_reduce_zacc() and _reduce_zdot()):
        return False
    return _forced("NALASR_REDUCE_RR", ("0", "1")) != "0" and nala_rr.usable(k, v, chunk)


# On the H200 at 518K dense (session 29 call 2, two rounds, each setting its own process): the pair map 48.0-48.5
# against 48.8-49.1 µs strided, the register reduce 50.8-51.3 against 51.2-51.4; the forward graph 0.103-0.104 ms
# with both against 0.105 (benchmarks/results/h200/session29/call2). The backward passes (session 30 call 1, the four
# settings twice): _bwd_key 98.9-100.0 µs strided against 154.1-159.4 contiguous (115.5 in session 29 call 2, before
# it took n_chunks), _bwd_query 149.3-150.4 against 153.4-155.4; the backward graph at 518K
# 0.246 / 0.248 ms with both against 0.301 / 0.303, at 1M 0.499 / 0.501 against 0.515 / 0.515. The one-head map
# (49K-262K) is a tie: 29.4 / 29.5 against 29.6 / 29.6 µs at 262K, its forward graph within 1% either way
# (benchmarks/results/h200/session30/call1); it stays contiguous.
_STRIDED = {"fwd_reduce": True, "fwd_map": False, "fwd_map_pair": True, "bwd_query": True, "bwd_key": True}


def _strided(name: str) -> bool:
    """Whether a pass (``name``: a key of _STRIDED; fwd_reduce is nala_rr's) runs tile-strided chunks: program pid_c takes
    the tiles pid_c, pid_c + n_chunks, pid_c + 2·n_chunks, … instead of one contiguous run of CHUNK tokens. The
    programs of a wave then read a narrow window of the token axis at any moment (a few MiB, as a copy kernel does)
    where contiguous chunks keep ~1,000 streams open across the whole 66 MiB of each tensor (DRAM pages, TLB). The
    partials sum other tokens in another order (still fixed: bitwise reproducible). NALASR_STRIDED_<PASS> = 0|1
    overrides _STRIDED (FWD_REDUCE, FWD_MAP, FWD_MAP_PAIR, BWD_QUERY, BWD_KEY)."""
    forced = _forced(f"NALASR_STRIDED_{name.upper()}", ("0", "1"))
    return _STRIDED[name] if forced is None else forced == "1"


def _reduce_zacc() -> bool:
    """Whether _fwd_reduce sums z in an elementwise accumulator (default) instead of taking it from a column of
    ones beside the values in the S product (NALASR_REDUCE_ZACC=0). The column doubles the product's width when Dv
    fills its tile (16 → 32 columns: twice the value operand staged through shared memory); on the H200 at 518K
    with one-warp programs 70.9 against 81.9 µs (benchmarks/results/h200/session13/call1/sweep_r1.json). For tf32
    products only (with RoPE z never comes out of the S product): a tf32x3 product splits each float32 operand in
    two halves, and only the column sums z from exactly what S multiplied."""
    return _forced("NALASR_REDUCE_ZACC", ("0", "1")) != "0"


def _eye(name: str, *tensors: Tensor) -> bool:
    """Whether a backward pass (``name``: bwd_query, bwd_key) takes its 16-bit tiles to float32 as t·I on the
    tensor cores (see _upcast; default, NALASR_EYE_BWD_QUERY / NALASR_EYE_BWD_KEY=0 for a plain conversion).
    Offline sm_90 (Triton 3.6, benchmarks/compile_sm90.py): _bwd_query 861 → 731 instructions, 18 → 5 barriers a
    warp and tile, 255 → 223 registers; _bwd_key 522 → 495, 14 → 4. On the H200 at 518K: _bwd_query 280.6 →
    207.6 µs (its best config, 16 tokens on one warp, 292.0 without), _bwd_key 163.3 → 131.6 (the k tile alone:
    140.6; benchmarks/results/h200/session14/call2/sweep_{q,k}.json). Not in the forward kernels: _fwd_map took
    73.0 against 63.5 µs (wgmma's A operand then converts by shuffles, 270 → 334 instructions), _fwd_reduce
    72.5 (k) / 79.7 (k and v) against 70.2 (sweep_{m,r}.json); _fwd_map with its float16 product, where φ̃q then
    is the A operand in registers without any conversion (offline 5 → 3 barriers, 69 → 51 registers): 63.8
    against 58.8 µs (64 tokens, 2 warps), 64.9 against 61.8 (4 warps; session16/call4/sweep_m_eye.json, branch
    eye-map). Float32 tiles never: the product would be tf32."""
    forced = _forced(f"NALASR_EYE_{name.upper()}", ("0", "1"))
    return forced != "0" and _all_16bit(*tensors)


def _bwd_dzacc() -> bool:
    """Whether _bwd_query sums dz = Σ dden·φq in elementwise (BLOCK_N, BD) accumulators, reduced over the tokens once
    after the loop (default; NALASR_BWD_DZACC=0 for the tensor cores), as _fwd_reduce sums z, instead of through
    two products a tile with dden in column 0 of a (BLOCK_N, 16) operand. The terms are float32, not tf32. On the
    H200 at 518K: 206.2 → 192.3 µs alone, 181.4 → 169.9 with _bwd_mpow (benchmarks/results/h200/session16/call2/
    sweep_q_dz{,m}.json), though offline it takes 223 against 205 registers and stages φq through shared memory for
    the dS product (Triton's choice once φq feeds one product instead of two)."""
    return _forced("NALASR_BWD_DZACC", ("0", "1")) != "0"


def _bwd_mpow(approx: bool, lam: float, tau: float) -> bool:
    """Whether _bwd_query forms m/dir (for ∂m/∂dir = p·m/dir) as sign(dir)·|dir|^(p−1) with one exp2, and m as that
    times |dir| (default for 16-bit inputs, APPROX, where p > 1 everywhere: λτ > 1, as p ≥ λτ; NALASR_BWD_MPOW=0 for
    m = |dir|^p and a division an element): one MUFU operation, a select and a dependent division an element fewer.
    On the H200 at 518K: 206.2 → 181.4 µs (benchmarks/results/h200/session16/call2/sweep_q_dz{,m}.json). Since session
    22 without selects (see _query_mag; the sign by a bit operation; offline sm_90 658 → 626 instructions a warp-tile):
    164.7-165.2 → 161.0-161.5 µs (benchmarks/results/h200/session22/call2, measured with the selects' replacement of
    then, which took dir = 0 as 2^-126 instead of 0; the same instructions). Float32 inputs keep the division: m's
    rounding changes by a few ulps, and their N = 1 gradient case sits near its tolerance (see _sincos_angle)."""
    return approx and lam * tau > 1.0 and _forced("NALASR_BWD_MPOW", ("0", "1")) != "0"


def _bwd_f16(centre: bool, *tensors: Tensor) -> bool:
    """Whether the backward's products of the gradient take float16 operands instead of tf32 (default for float16
    inputs where they would be tf32, i.e. centred, no RoPE; NALASR_BWD_F16=0 keeps tf32), as _fwd_map's does
    (_map_f16): S, dS scaled into range by a power of two (_f16_state), and operands that fit float16 by construction:
    _bwd_query's S·dnum as g (the 16-bit upstream gradient, exact) times S, 1/den after the product; _bwd_key's
    φ̃k/‖k‖^λ (in [−1, 1]; λ an integer 1-4) and (v − v̄)/2 against dS. float16 keeps 11 significant bits rounded to
    nearest where tf32 keeps 11 truncated: in the interpreter (the GPU's tf32 truncation) fp16-large-values' dq, dk
    error 7.5e-4, 1.2e-3 → 4.0e-4, 6.3e-4 against the float64 reference. Above all, a float16 operand in the product's
    accumulator layout is the next product's operand as it stands: tf32 operands converted by shuffles and selects
    (_bwd_key: 24 SHFL.IDX and 48 FSEL a warp-tile; offline sm_90 445 → 411 instructions, _bwd_query 626 → 613). On
    the H200 at 518K, off / on twice: _bwd_query 161.4 → 153.7-153.9 µs, _bwd_key 129.6-130.1 → 116.4-117.5, the
    backward 0.286-0.287 → 0.272 ms, at 1M 0.562-0.563 → 0.535-0.538 (benchmarks/results/h200/session22/call4).
    bfloat16 keeps tf32: its g and v need not fit float16."""
    return (centre and all(t.dtype == torch.float16 for t in tensors)
            and _forced("NALASR_BWD_F16", ("0", "1")) != "0")


def _map_f16(prec: str, rope: bool) -> bool:
    """Whether _fwd_map's product takes float16 operands instead of tf32 (default where it would be tf32 and without
    RoPE; NALASR_MAP_F16=0 keeps tf32). φ̃q = |dir|^p·cos/sin lies in [−1, 1]; S is scaled by a power
    of two (_f16_state). float16 keeps 11 significant bits rounded to nearest where tf32 keeps 11 truncated
    (_tf32), and the product is half the tensor-core steps and half the operand bytes through shared memory. On
    the H200 at 518K: 64.0 → 59.2 µs without scaling S (benchmarks/results/h200/session15/call4/sweep_m16.json).
    The backward keeps tf32: it recomputes φq itself and never sees this product's rounding."""
    return prec == "tf32" and not rope and _forced("NALASR_MAP_F16", ("0", "1")) != "0"


def _map_half2(q: Tensor, f16: bool, fastmag: bool, alpha: float) -> bool:
    """Whether _fwd_map forms φq in float16 pairs (HALF2, nalasr_kernels.half2; default where it applies,
    NALASR_MAP_HALF2=0 keeps float32): float16 queries, the float16 product (F16), m_q from xa (FASTMAG) and
    |α| ≤ 1, where |xa| ≤ 1 is the domain of half2's angle polynomials (F, G replace tanh and the sine and cosine).
    Offline sm_90 at 518K: 439 → 347 loop instructions a warp-tile, 54 → 40 MUFU operations and 79 → 66 registers
    (den from two more float16 products, see half2._den_h2, and 1/den by rcp.approx; the GPU ran 343, before the
    four FMNMX that keep a subnormal den, possible only for ε < 2^-61, out of rcp's flush to zero). On the H200 the
    map's kernel took 53.4 against 54.0 µs (NALASR_MAP_HALF2=0) at its old 36 programs an SM, 51.1-52.2 at its own
    28 (see _PROGRAMS_PER_SM), and with both against the previous head (three A/B rounds in one process): at 518K
    the forward 0.111 ms against 0.111-0.112, at 1M 0.211-0.212 against 0.212-0.214
    (benchmarks/results/h200/session25/call4).
    So the map does not wait on its instructions: a fifth fewer bought 1-2%. Output error at 518K against float64:
    3.90e-4 against 3.81e-4 with float32 features (fp16 case of gpu_kernels_check.py; the two apart by 3.9e-4).
    The backward recomputes φq in float32 (_bwd_query) and does not change."""
    return (q.dtype == torch.float16 and f16 and fastmag and abs(alpha) <= 1.0
            and _forced("NALASR_MAP_HALF2", ("0", "1")) != "0")


def _map_pair(q: Tensor, half: bool, h: int, d: int, dv: int, bd: int) -> bool:
    """Whether the map takes two heads a program (_fwd_map_pair): HALF2, an even head count, D = DV = BD, q's token
    rows holding exactly its H·D elements (the model's own q: its four C-wide products make q, k, v separate contiguous
    tensors) and at least _PAIR_MIN_ROWS (token, head pair) rows. NALASR_MAP_PAIR=0 turns it off, =1 takes it for any
    size and q layout where the kernel applies.
    On the H200 at 518K with dense q, k, v (benchmarks/results/h200/session26): the map 49.3-50.2 µs (calls 1-3)
    against 51.3 for the one-head map (call 1); the forward against the previous head, 5 A/B rounds in one process
    over two calls, 2,507-2,537 GB/s against 2,501-2,517 (59.1-59.8% of the 4,243 GB/s copy), and at 1M 2,713-2,736
    against 2,629-2,649. Below that size its one-warp programs, whose chunks the plan keeps at 256 tokens or more,
    are too few to fill the SMs and each runs 8 or more tiles in series: the table's forward graph took 0.037 /
    0.040 / 0.050 / 0.065 ms at 4K / 49K / 131K / 262K tokens with it, against 0.022 / 0.025 / 0.043 / 0.067 on the
    strided views with the one-head map (call 4)."""
    forced = _forced("NALASR_MAP_PAIR", ("0", "1"))
    if forced == "0" or not (half and h % 2 == 0 and d == dv == bd):
        return False
    if forced == "1":
        return True
    dense = q.stride(3) == 1 and q.stride(2) == d and q.stride(1) == h * d
    return dense and q.shape[0] * q.shape[1] * (h // 2) >= _PAIR_MIN_ROWS


def _centred(rope: bool, prec_g: str) -> bool:
    """Whether the backward centres the values (see "Conditioning of the backward"): tf32 products without RoPE.
    Centring float32 inputs too (tf32x3) took the N = 1 float32 case from 1.56 to 1.44 times its dq/dk tolerance
    on the H200 but not under it, and changes every float32 gradient's rounding: not done
    (benchmarks/centre_errors.py, benchmarks/results/h200/session13/call4/s13d.log)."""
    return not rope and prec_g == "tf32"


def _lam_int(lam: float) -> int:
    return int(lam) if lam in (1.0, 2.0, 3.0, 4.0) else 0


def _dims(q: Tensor, v: Tensor) -> tuple[int, int, int, int, int, int, int]:
    b, n, h, d = q.shape
    dv = v.shape[-1]
    bd, bdv = max(16, _pow2(d)), max(16, _pow2(dv))  # tl.dot needs ≥ 16 along every axis
    return b, n, h, d, dv, bd, bdv


def _offs64(n: int, *tensors: Tensor) -> bool:
    """True when a token/dim offset inside one (b, h) slab of any tensor could exceed int32."""
    if _CONFIG is not None and _CONFIG.get("OFFS64"):  # tests: exercise the 64-bit path at small sizes
        return True
    return any((n - 1) * abs(t.stride(1)) + (t.shape[-1] - 1) * abs(t.stride(3)) >= 2**31 - 1 for t in tensors)


def _state_size(bd: int, bdv: int) -> int:
    return 2 * bd * bdv + 2 * bd


def _device_guard(t: Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else _NullCtx()


class _NullCtx:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _combine_launch(part: Tensor, out: Tensor, bh: int, n_chunks: int, scale: float, state: int,
                    pdl: bool = False) -> None:
    # Narrow column blocks, many chunks a load: at 518K tokens with 4-warp reduce programs (4 heads, 254 chunks,
    # 544 floats a state) 68 programs each loading their whole (254, 32) slice at once took 7.1 µs on the H200
    # (128-column blocks, 32 chunks a load: 11.1). One-warp reduce programs leave 4 times the chunks (1,013 at
    # 518K): 68 such programs took 23 µs (session 13), so the blocks narrow (to 8 columns, one 32-byte sector of
    # a chunk's row) until there are 2 programs an SM, each loading up to 8,192 partial sums at once.
    block = next((b for b in (32, 16) if bh * triton.cdiv(state, b) >= 2 * _sms(part.device)), 8)
    cb = min(_pow2(n_chunks), 8192 // block)
    _combine[(bh, triton.cdiv(state, block))](part, out, n_chunks, scale, STATE=state, BLOCK=block, CB=cb,
                                                PDL=pdl, num_warps=4, **_pdl_kw(pdl))


def nala_forward(q: Tensor, k: Tensor, v: Tensor, lam: float, tau: float, alpha: float, eps: float,
                 rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor]:
    """o (B, N, H, Dv) contiguous in q's dtype, and the float32 state (B, H, 2·BD·BDV + 2·BD) = (S, z)."""
    b, n, h, d, dv, bd, bdv = _dims(q, v)
    state_n = _state_size(bd, bdv)
    rope = rope_h > 0
    dev = q.device
    o = _empty((b, n, h, dv), q.dtype, dev)
    state = _empty((b, h, state_n), torch.float32, dev)
    prec, approx = _precision(q, k, v), _approx_math(q, k, v, rope=rope)
    freq = _rope_freq(d, bd, float(rope_base), dev) if rope else state
    bucket = _pow2(b * n * h)
    zacc = rope or (_reduce_zacc() and prec == "tf32")
    clamp = _clamp(alpha)
    pdl = _pdl(dev)
    with _device_guard(q):
        offs64 = _offs64(n, k, v)
        chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["fwd_reduce"],
                                nala_rr.TILE_TOKENS, _FWD_REDUCE_MIN_CHUNK)
        rr = _reduce_rr(k, v, rope, prec, offs64, chunk)
        if not rr:
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["fwd_reduce"], _MAX_BLOCK_N,
                                    _FWD_REDUCE_MIN_CHUNK)
        part = _empty((b * h * n_chunks * state_n,), torch.float32, dev)
        if rr:
            nala_rr.launch(k, v, part, n, chunk, n_chunks, alpha, lam, _lam_int(lam), approx, clamp, pdl=pdl,
                           strided=_strided("fwd_reduce"))
        else:
            _launch(_fwd_reduce_tuned, _fwd_reduce, (h, n_chunks, b),
                    k, v, freq, part, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                    *k.stride(), *v.stride(), float(alpha), float(lam),
                    D=d, DV=dv, BD=bd, BDV=bdv, BDZ=bdv if zacc or dv < bdv else 2 * bdv, LAM_INT=_lam_int(lam),
                    ROPE=rope, PREC=prec, APPROX=approx, OFFS64=offs64, VEC4=_reduce_vec4(), ZACC=zacc,
                    CLAMP=clamp, ZDOT=zacc and not rope and _reduce_zdot(), PDL=pdl)  # ZACC without RoPE: tf32
        _combine_launch(part, state, b * h, n_chunks, 1.0 / n, state_n, pdl)
        fastmag, f16 = _fastmag(approx, lam, tau, alpha), _map_f16(prec, rope)
        half = _map_half2(q, f16, fastmag, alpha)
        if _map_pair(q, half, h, d, dv, bd):
            block_n, warps, stages, cap = (int(_CONFIG["BLOCK_N"]), 1, 3, None) if _CONFIG is not None else _PAIR_TILE
            chunk, n_chunks = _plan(n, b * h // 2, dev, _PROGRAMS_PER_SM["fwd_map_pair"], _FWD_MAP_PAIR_QUANTUM,
                                    _FWD_MAP_PAIR_MIN_CHUNK)
            _fwd_map_pair[(h // 2, n_chunks, b)](
                q, state, o, n, h, chunk, n_chunks, *q.stride(), o.stride(0), o.stride(1),
                float(alpha), float(lam), float(tau), float(eps), BD=bd, APPROX=approx, OFFS64=_offs64(n, q, o),
                BLOCK_N=block_n, PDL=pdl, STRIDED=_strided("fwd_map_pair"), num_warps=warps, num_stages=stages,
                **_pdl_kw(pdl),
                **({"maxnreg": cap} if cap and not _INTERPRET else {}))
        else:
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["fwd_map_half2" if half else "fwd_map"],
                                    _FWD_MAP_QUANTUM, _FWD_MAP_MIN_CHUNK)
            _launch(_fwd_map_tuned, _fwd_map, (h, n_chunks, b),
                    q, state, freq, o, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                    *q.stride(), *o.stride(), float(alpha), float(lam), float(tau), float(eps),
                    D=d, DV=dv, BD=bd, BDV=bdv, ROPE=rope, PREC=prec, APPROX=approx, OFFS64=_offs64(n, q, o),
                    FASTMAG=fastmag, F16=f16, CLAMP=clamp, PDL=pdl, HALF2=half, STRIDED=_strided("fwd_map"),
                    **_pdl_kw(pdl))
    return o, state


def nala_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, state: Tensor, lam: float, tau: float, alpha: float,
                  eps: float, rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv (contiguous, in the dtypes of q, k, v) from dO = ∂L/∂o and the forward's state."""
    b, n, h, d, dv, bd, bdv = _dims(q, v)
    state_n = _state_size(bd, bdv)
    rope = rope_h > 0
    dev = q.device
    dq = _empty(q.shape, q.dtype, dev)
    dk = _empty(k.shape, k.dtype, dev)
    dvv = _empty(v.shape, v.dtype, dev)
    dstate = _empty((b, h, state_n), torch.float32, dev)
    prec, prec_g = _precision(q, k, v), _precision(q, k, v, grad=rope)
    centre = _centred(rope, prec_g)
    approx = _approx_math(q, k, v, rope=rope)
    clamp = _clamp(alpha)
    freq = _rope_freq(d, bd, float(rope_base), dev) if rope else state
    bucket = _pow2(b * n * h)
    pdl = _pdl(dev)
    with _device_guard(q):
        chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["bwd_query"], _BWD_QUERY_QUANTUM)
        part = _empty((b * h * n_chunks * state_n,), torch.float32, dev)
        _launch(_bwd_query_tuned, _bwd_query, (h, n_chunks, b),
                q, do, state, freq, dq, part, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                *q.stride(), *do.stride(), *dq.stride(), float(alpha), float(lam), float(tau), float(eps),
                D=d, DV=dv, BD=bd, BDV=bdv, ROPE=rope, PREC_G=prec_g, CENTRE=centre, APPROX=approx,
                OFFS64=_offs64(n, q, do, dq), SPLIT=int(_reduce_split()),
                EYE=_eye("bwd_query", q, do), DZACC=_bwd_dzacc(), MPOW=_bwd_mpow(approx, lam, tau), CLAMP=clamp,
                PDL=pdl, F16=_bwd_f16(centre, q, do), STRIDED=_strided("bwd_query"))
        _combine_launch(part, dstate, b * h, n_chunks, 1.0 / n, state_n, pdl)
        chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["bwd_key"], _BWD_KEY_QUANTUM)
        _launch(_bwd_key_tuned, _bwd_key, (h, n_chunks, b),
                k, v, state, dstate, freq, dk, dvv, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                *k.stride(), *v.stride(), *dk.stride(), *dvv.stride(), float(alpha), float(lam),
                D=d, DV=dv, BD=bd, BDV=bdv, LAM_INT=_lam_int(lam), ROPE=rope, PREC=prec, PREC_G=prec_g,
                CENTRE=centre, APPROX=approx, OFFS64=_offs64(n, k, v, dk, dvv),
                EYE=_eye("bwd_key", k, v), CLAMP=clamp, PDL=pdl,
                F16=_bwd_f16(centre, k, v) and _lam_int(lam) > 0, STRIDED=_strided("bwd_key"), **_pdl_kw(pdl))
    return dq, dk, dvv


# ============================================================================================ torch binding
# Custom ops make the kernels opaque to torch.compile (no graph break around the Triton launches, and the
# fake implementations give shapes without running anything); the autograd.Function ties them together.


@torch.library.custom_op("nalasr_kernels::nala_fwd", mutates_args=())
def _nala_fwd_op(q: Tensor, k: Tensor, v: Tensor, lam: float, tau: float, alpha: float, eps: float,
                 rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor]:
    return nala_forward(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base)


@_nala_fwd_op.register_fake
def _(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
    b, n, h, d, dv, bd, bdv = _dims(q, v)
    return q.new_empty((b, n, h, dv)), q.new_empty((b, h, _state_size(bd, bdv)), dtype=torch.float32)


@torch.library.custom_op("nalasr_kernels::nala_bwd", mutates_args=())
def _nala_bwd_op(do: Tensor, q: Tensor, k: Tensor, v: Tensor, state: Tensor, lam: float, tau: float, alpha: float,
                 eps: float, rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor, Tensor]:
    return nala_backward(do, q, k, v, state, lam, tau, alpha, eps, rope_h, rope_w, rope_base)


@_nala_bwd_op.register_fake
def _(do, q, k, v, state, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))


def _traced(*tensors: Tensor) -> bool:
    """True under torch.compile / export / any tracing dispatch mode: go through the custom op there. Plain
    eager calls skip the custom-op dispatcher, which costs ~10-15 µs a call (felt at small token counts)."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0:
        return True
    return any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors)


class NalaAttentionFunction(torch.autograd.Function):
    """o = NaLa(q, k, v); backward gives dq, dk, dv (the hyper-parameters are constants, not learnable)."""

    @staticmethod
    def forward(ctx, q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
        fwd = _nala_fwd_op if _traced(q, k, v) else nala_forward
        o, state = fwd(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base)
        ctx.save_for_backward(q, k, v, state)
        ctx.hyper = (lam, tau, alpha, eps, rope_h, rope_w, rope_base)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, state = ctx.saved_tensors
        bwd = _nala_bwd_op if _traced(do, q, k, v) else nala_backward
        dq, dk, dv = bwd(do, q, k, v, state, *ctx.hyper)
        return dq, dk, dv, None, None, None, None, None, None, None


_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def nala_attention_triton(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    params: Any = None,
    rope_hw: tuple[int, int] | None = None,
    rope_base: float = 100.0,
) -> Tensor:
    """Fused NaLa attention, same contract as ``nalasr.ops.nala.nala_attention_reference``.

    Args:
        q, k: (B, N, H, D); v: (B, N, H, Dv); fp16/bf16/fp32, any strides (strided views of one Linear output
            are read in place, never copied). 1 ≤ D, Dv ≤ 64 (tested 16–64).
        params: any object with float attributes lam, tau, alpha, eps; None for the defaults (3, 0.5, 1, 1e-6).
        rope_hw: (rows, cols) of the token grid, rows·cols = N, for 2-D RoPE on the numerator; None for none.
    Returns:
        o: (B, N, H, Dv), contiguous, in q's dtype. Differentiable in q, k, v.
    """
    if q.dim() != 4 or q.shape != k.shape or q.shape[:3] != v.shape[:3]:
        raise ValueError(f"q, k, v must be (B, N, H, D) alike, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} is {t.dtype}; the kernel takes float16, bfloat16 or float32")
    if not (1 <= q.shape[-1] <= 64 and 1 <= v.shape[-1] <= 64):
        raise ValueError(f"head dims must be in 1..64, got D={q.shape[-1]}, Dv={v.shape[-1]}")
    hp = {name: float(getattr(params, name, default)) if params is not None else default
          for name, default in _DEFAULTS.items()}
    n = q.shape[1]
    if rope_hw is not None:
        rh, rw = int(rope_hw[0]), int(rope_hw[1])
        if rh * rw != n or rh < 1:
            raise ValueError(f"rope_hw {tuple(rope_hw)} has {rh * rw} positions but there are {n} tokens")
    else:
        rh = rw = 0
    if q.numel() == 0 or v.numel() == 0:  # nothing to attend over / to: an empty or zero result, no launch
        return q.new_zeros(v.shape, dtype=q.dtype) + 0 * (q.sum() + k.sum() + v.sum()).to(q.dtype)
    return NalaAttentionFunction.apply(q, k, v, hp["lam"], hp["tau"], hp["alpha"], hp["eps"], rh, rw,
                                       float(rope_base))


# The register reduce builds on this module's device helpers, so it is imported once they exist (it imports them back).
from . import nala_rr  # noqa: E402
