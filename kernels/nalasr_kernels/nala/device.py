"""NaLa attention's device math: the feature maps, their gradients, tile loads and the tf32 / PDL helpers every
streaming pass of :mod:`nalasr_kernels.nala.binding` (fwd, bwd and the register passes) builds on; the math they implement is
in :mod:`nalasr_kernels.nala.binding`'s docstring. Triton jit functions only, no host side; every name is shared."""

from __future__ import annotations

import os

import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

try:  # grid dependency control for programmatic dependent launch (Triton ≥ 3.4; see plan.pdl)
    from triton.language.extra.cuda import gdc_launch_dependents as _gdc_launch, gdc_wait as _gdc_wait
    HAS_GDC = True
except ImportError:
    HAS_GDC = False

    @triton.jit
    def _gdc_launch():
        pass

    @triton.jit
    def _gdc_wait():
        pass



def _interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (TRITON_INTERPRET=1, as Triton itself reads it)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")  # a Triton older than 3.4 has no knobs


INTERPRET = _interpreting()


# ================================================================================================ device math

COMPILED = tl.constexpr(not INTERPRET)  # the interpreter runs NumPy: no register layouts, no PTX
FAST_MATH = COMPILED  # lg2.approx / div.approx / tanh.approx, which NumPy does not have


@triton.jit
def tanh_any(x, APPROX: tl.constexpr):
    # One exp2 and one division. e = e^(−2|x|) ∈ (0, 1], so nothing overflows for any x; the absolute error
    # (~1e-7) is what an angle or an exponent needs. APPROX (16-bit inputs, see _approx_math): tanh.approx.f32,
    # one MUFU op with relative error ~2^-11, below the tf32 rounding of the products these inputs run in.
    if APPROX and FAST_MATH:
        t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        e = tl.exp2(tl.abs(x) * -2.885390081777927)  # −2·log2(e)
        t = fdiv(1.0 - e, 1.0 + e)
        t = tl.where(x < 0, -t, t)
    return t


FLT_MIN_NORMAL = tl.constexpr(1.1754943508222875e-38)  # smallest normal float32: |dir| below it counts as 0


@triton.jit
def log2_fast(x):
    # lg2.approx.f32 on the MUFU pipe (|error| ≲ 2^-22 for the normal floats used here). tl.log2 compiles to
    # an accurate software sequence: ~25% of the SASS of fwd_map_kernel and bwd_query_kernel (sm_90, offline count).
    if FAST_MATH:
        return libdevice.fast_log2f(x)
    else:
        return tl.log2(x)


@triton.jit
def fdiv(x, y):
    # div.approx.f32 (≤ 2 ulp for |y| in [2^-126, 2^126]; every divisor here is ≥ 1e-6 or a normal float)
    # instead of IEEE division, a reciprocal plus a Newton step and a slow-path branch per element.
    if FAST_MATH:
        return libdevice.fast_dividef(x, y)
    else:
        return x / y


@triton.jit
def pdl_launch(PDL: tl.constexpr):
    """griddepcontrol.launch_dependents (PDL, see plan.pdl): the next kernel, launched with launch_pdl, may start its
    programs once every program of this one has passed here; they wait in pdl_wait for this kernel's results."""
    if PDL and COMPILED:
        _gdc_launch()


@triton.jit
def pdl_wait(PDL: tl.constexpr):
    """griddepcontrol.wait (PDL): block until the kernel before has finished and its writes are visible. Everything
    a PDL kernel reads that the kernel before it writes comes after this; what earlier kernels wrote may come before."""
    if PDL and COMPILED:
        _gdc_wait()


@triton.jit
def sincos_small(t):
    # cos, sin for |t| ≤ π/4 (+ rounding): Taylor to degree 8 / 9, truncation error < 3e-8. Only FMAs: the
    # MUFU (sin/cos/exp2/log2) pipe has 1/8 of the FMA throughput and is already busy with tanh and pow.
    t2 = t * t
    c = 1.0 + t2 * (-0.5 + t2 * (0.041666666666666664 + t2 * (-0.001388888888888889 + t2 * 2.48015873015873e-05)))
    s = t * (1.0 + t2 * (-0.16666666666666666 + t2 * (0.008333333333333333 + t2 * (-0.0001984126984126984
                                                                                    + t2 * 2.7557319223985893e-06))))
    return c, s


@triton.jit
def sincos_angle(uc, APPROX: tl.constexpr, SIN5: tl.constexpr = False):
    # cos, sin of θ = (π/4)·uc, |uc| ≤ 1. APPROX (16-bit inputs): cos as the degree 4 minimax polynomial in uc on
    # [−1, 1] (Lawson's iteration, the powers of π/4 folded in; max error 1.0e-5 in float32, a thirtieth of what
    # tanh.approx's 2^-11 leaves in θ and of φ's float16 rounding, 2.4e-4), sin as the degree 7 series (3.1e-7) or,
    # with SIN5, the degree 5 minimax polynomial (6.2e-7). Which sine a kernel takes is a matter of how ptxas then
    # schedules it, not of accuracy. Session 21 on the H200 at 518K: _fwd_reduce_rr 56.6-56.8 → 55.1-55.2 → 63.3-63.4, fwd_map_kernel 55.6-55.9 → 55.1-55.4 → 54.4, bwd_query_kernel 165.7-165.9 →
    # 165.3-165.7 → 168.6-168.9, bwd_key_kernel 125.9-126.4 → 124.0-127.4 → 121.5-121.9
    #; with its whole-tile asm loads _fwd_reduce_rr takes the
    # degree 5 sine too: 52.2-52.4 against 52.8 µs. Float32 inputs:
    # sincos_small(θ), the accurate path (the float32 N = 1 gradient test sits at the
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
        c, s = sincos_small(uc * 0.7853981633974483)
    return c, s


@triton.jit
def sincos_any(t):
    # cos, sin of any float32 angle (RoPE adds ω·pos, up to ~1e3 rad): Cody–Waite reduction by π/2 in three
    # parts (each product exact for |quadrant| < 2^15) into [−π/4, π/4], then the quadrant picks sign and swap.
    kq = tl.floor(t * 0.6366197723675814 + 0.5)
    r = t - kq * 1.5703125
    r = r - kq * 4.837512969970703e-04
    r = r - kq * 7.549789954891882e-08
    c0, s0 = sincos_small(r)  # RoPE runs its products in tf32x3: the full-precision series
    quad = kq.to(tl.int32) & 3
    c = tl.where(quad == 0, c0, tl.where(quad == 1, -s0, tl.where(quad == 2, -c0, s0)))
    s = tl.where(quad == 0, s0, tl.where(quad == 1, c0, tl.where(quad == 2, -s0, -c0)))
    return c, s


@triton.jit
def column(t, cols, j):
    """Column j of a 2-D tile (cols indexes its columns) as a vector: the extra column a tensor-core product
    carries (z beside S, dz beside nothing) comes out of the accumulator this way, once per program."""
    return tl.sum(tl.where(cols[None, :] == j, t, 0.0), axis=1)


@triton.jit
def reduce_acc(M: tl.constexpr, K: tl.constexpr, GROUPS: tl.constexpr):
    """A zero accumulator for :func:`reduce_dot`: (GROUPS, M, K), or (M, K) when GROUPS is 1."""
    if GROUPS > 1:
        return tl.zeros((GROUPS, M, K), dtype=tl.float32)
    else:
        return tl.zeros((M, K), dtype=tl.float32)


@triton.jit
def reduce_dot(a, b, acc, GROUPS: tl.constexpr, PREC: tl.constexpr):
    """acc + aᵀ·b summed over the tile's tokens: a (BLOCK_N, M), b (BLOCK_N, K), acc from :func:`reduce_acc`.

    GROUPS > 1 splits the tokens into GROUPS consecutive groups, each one batch of a 3-D product (Triton gives
    each warp its own batch): a 2-D product splits only the (M, K) output across warps, and with M = 16 every
    warp reads the whole of a from shared memory, 4 times the operand loads at 4 warps. Sum the groups with
    :func:`reduce_total` after the loop. bwd_query_kernel uses groups of 16 tokens (two k-steps of a tf32 mma; 1 group
    per warp at the autotuner's picks, 64 tokens on 4 warps and 32 on 2)."""
    if GROUPS > 1:
        t: tl.constexpr = a.shape[0] // GROUPS
        a3 = tl.trans(tl.reshape(a, (GROUPS, t, a.shape[1])), (0, 2, 1))
        return tl.dot(a3, tl.reshape(b, (GROUPS, t, b.shape[1])), acc, input_precision=PREC)
    else:
        return tl.dot(tl.trans(a), b, acc, input_precision=PREC)


@triton.jit
def reduce_total(acc, GROUPS: tl.constexpr):
    """(M, K): the groups of a :func:`reduce_dot` accumulator summed (once per program, after the loop)."""
    if GROUPS > 1:
        return tl.sum(acc, axis=0)
    else:
        return acc


@triton.jit
def tf32(x):
    """x truncated to tf32 (its low 13 mantissa bits cleared): what a tf32 tl.dot takes of it,
    so a sum formed beside the product (z beside S) sees the same operand. Triton hands the tensor cores float32
    registers unrounded and they ignore those bits (triton-lang/triton#4574); rounding to nearest here instead made
    the ones-column z and the accumulated z differ by 5e-4 in the fp16 output on the H200, truncating by 1.7e-5."""
    return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def upcast(t, offs, EYE: tl.constexpr):
    """A 16-bit (BLOCK_N, BD) tile in float32. EYE: as t·I on the tensor cores — exact (one nonzero term per sum,
    accumulated in float32), and the result comes out in the product's accumulator layout, so Triton runs the
    elementwise math that follows there: the backward's product operands then convert from it in registers, where
    from the load's blocked layout each went through shared memory between barriers (see plan (eye)). The interpreter
    has no layouts (and its bfloat16 tl.dot is wrong): there EYE changes nothing."""
    if EYE and COMPILED:
        return tl.dot(t, (offs[:, None] == offs[None, :]).to(t.dtype))
    else:
        return t.to(tl.float32)


@triton.jit
def direction(x):
    """x: (BLOCK_N, BD) → Σx², r = (Σx² + 1e-12)^(-1/2) (BLOCK_N,), dir = x·r (BLOCK_N, BD)."""
    ss = tl.sum(x * x, axis=1)
    r = tl.rsqrt(ss + 1e-12)
    return ss, r, x * r[:, None]


U_MAX = tl.constexpr(0.9998726760455265)  # Θ / (π/4): θ = (π/4)·u is clamped at ±Θ where |u| passes this


@triton.jit
def angle_of(xa, APPROX: tl.constexpr, CLAMP: tl.constexpr):
    """θ = clamp((π/4)·tanh(α·dir), ±Θ) = (π/4)·uc from xa = α·dir. Returns u = tanh(α·dir) and uc = u clamped
    to ±Θ/(π/4); the clamp passes the gradient where |u| ≤ U_MAX. (π/4 stays out: sincos_angle takes uc.)
    Without CLAMP (|α| ≤ _CLAMP_FREE, see plan.clamp) uc is u: the clamp cannot bind there."""
    u = tanh_any(xa, APPROX)
    if CLAMP:
        return u, tl.minimum(tl.maximum(u, -U_MAX), U_MAX)
    else:
        return u, u


@triton.jit
def key_mag(x, x2, lam, LAM_INT: tl.constexpr):
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
        m = tl.where(a > 0, tl.exp2(lam * log2_fast(tl.where(a > 0, a, 1.0))), 0.0)
    return m


@triton.jit
def key_mag_grad(x, lam, LAM_INT: tl.constexpr, scale=1.0):
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
        g = tl.where(a > 0, (lam * scale) * tl.exp2((lam - 1.0) * log2_fast(tl.where(a > 0, a, 1.0))), 0.0) * sgn
    return g


@triton.jit
def query_mag(dirn, nrm, lam, tau, APPROX: tl.constexpr, MPOW: tl.constexpr = False):
    """m_q = |dir|^p, p = λ(τ + tanh‖q‖) per token. Returns tanh‖q‖, p (BLOCK_N,), log2|dir| (finite: 0 where
    dir = 0, or ≥ −126 with MPOW), m, and mo: with MPOW |dir|^(p−1) (m formed as mo·|dir|, no second exp2), else m
    itself (for the caller's unused slot)."""
    tn = tanh_any(nrm, APPROX)
    p = lam * (tau + tn)
    a = tl.abs(dirn)
    if MPOW:
        # No selects: log2 0 = −inf (so is the GPU's approximate log2 of a subnormal, which it flushes), and then
        # |dir|^(p−1) = 2^(−inf) = 0 exactly, as it must be for p > 1 (the host's rule: λτ > 1), so m = 0 too. Only
        # ∂L/∂p's m·log2|dir| needs a finite log2 there: clamped at −126 (m = 0 where the clamp binds). A power of
        # 2^(−126·(p−1)) at dir = 0, as from log2 max(|dir|, 2^-126), is not 0: r = 10^6 at q = 0 scales it into dq,
        # and the float16 N = 1 case's dq went 0.073 off.
        l2 = log2_fast(a)
        mo = tl.exp2((p - 1.0)[:, None] * l2)
        m = mo * a
        l2 = tl.maximum(l2, -126.0)
    else:
        # Subnormal |dir| counts as 0: the approximate log2 and division may flush it, and m = |dir|^p is 0 in
        # float32 there anyway (p ≥ λτ; the default 1.5 takes 1e-38 to 1e-57).
        pos = a >= FLT_MIN_NORMAL
        l2 = log2_fast(tl.where(pos, a, 1.0))
        m = tl.where(pos, tl.exp2(p[:, None] * l2), 0.0)
        mo = m
    return tn, p, l2, m, mo


@triton.jit
def query_mag_fwd(xa, nrm, lam, tau, lga, APPROX: tl.constexpr):
    """m_q = |dir|^p as 2^(p·log2|xa| − p·lga) from xa = α·dir (the angle's input) and lga = log2|α|: no dir, no
    masks, and no log2 a token; for the forward map of 16-bit inputs when λτ ≥ 1.5 and α is in _FASTMAG_ALPHA
    (FASTMAG, see _fastmag; float32 inputs keep query_mag, see sincos_angle). Against 2^(p·log2|x| + p·log2 r)
   : offline sm_90 444 → 439 loop instructions, 56 → 54 MUFU ops a warp and tile; on the H200
    (five A/B rounds in one process, two calls) the forward at 1M 0.2103-0.2158 against 0.2129-0.2160 ms, each round
    faster, at 518K unchanged.
    xa = 0 gives log2 0 = −inf and m = 0 (p > 0). A subnormal xa may flush to 0 in the approximate log2: then
    |dir| < 2^-126·2^20 (|α| ≥ 2^-20) and |dir|^p < 2^-159 at p ≥ 1.5, which is 0 in float32 as well."""
    p = lam * (tau + tanh_any(nrm, APPROX))
    return tl.exp2(p[:, None] * log2_fast(tl.abs(xa)) - (p * lga)[:, None])


@triton.jit
def f16_state(s_c, s_s):
    """The map's S halves (BD, BDV) as float16 product operands, scaled by the power of two that puts their largest
    entry in [0.5, 1) (exact; float16's range is 2^-24 .. 65504, S's is float32's), and the factor that undoes it.
    One factor for the tile, not one per column: per-column factors multiply every output element once more, and
    with them the map took 63.1 µs against 63.6 in tf32. All zeros or subnormals stay unscaled."""
    smax = tl.maximum(tl.max(tl.max(tl.abs(s_c), axis=1), axis=0), tl.max(tl.max(tl.abs(s_s), axis=1), axis=0))
    down, up = pow2_scale(smax)
    return (s_c * down).to(tl.float16), (s_s * down).to(tl.float16), up


@triton.jit
def pow2_scale(smax):
    """(down, up): the power of two that puts smax (≥ 0) in [0.5, 1), and its inverse; 1 for zero or subnormal smax."""
    e = (smax.to(tl.int32, bitcast=True) >> 23) & 255  # biased exponent: smax in [2^(e−127), 2^(e−126))
    e = tl.where(e == 0, 126, tl.minimum(e, 253))
    down = ((253 - e) << 23).to(tl.float32, bitcast=True)  # 2^(126 − e)
    up = ((e + 1) << 23).to(tl.float32, bitcast=True)  # 2^(e − 126)
    return down, up


@triton.jit
def rope_angle(offs_n, W, freq, offs_d, HALF: tl.constexpr):
    """a = ω_j·pos: angles j < D/2 use the row, D/2 ≤ j < 2·(D/2) the column (freq is 0 beyond). Same float32
    product as rope_angles() in the reference (row · ω), so θ + a rounds the same way."""
    row = offs_n // W
    col = offs_n - row * W
    pos = tl.where(offs_d[None, :] < HALF, row[:, None], col[:, None]).to(tl.float32)
    return pos * freq[None, :]


@triton.jit
def dtanh(dth, u, ka, APPROX: tl.constexpr):
    """∂L/∂dir's angle part, dth·ka·(1 − u²), from ∂L/∂θ (u = tanh(α·dir), ka = (π/4)·α and the caller's unit).
    APPROX (16-bit inputs): ka − ka·u², one FFMA on the u² the sine and cosine formed (offline sm_90: bwd_query_kernel
    613 → 605, bwd_key_kernel 411 → 401 loop instructions); its rounding of u² costs 1 − u² at most 2^-24 absolute, far
    below tanh.approx's 2^-11 in u. On the H200 (two A/B rounds in one process) the backward at 518K 0.2656-0.2662
    against 0.2682-0.2685 ms, at 1M 0.5257-0.5262 against 0.5282-0.5309.
    Float32 inputs keep (dth·ka)·(1 − u·u) with the fused 1 − u·u, as before."""
    if APPROX:
        return dth * (ka - ka * (u * u))
    else:
        return dth * ka * (1.0 - u * u)


@triton.jit
def feature_grad_angle(m, c, s, c2, s2, gc, gs, gc2, gs2, ROPE: tl.constexpr):
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
def slab_ptr(ptr, pid_b, pid_h, s_b, s_h):
    """Start of (b, h)'s (N, D) slab of a (B, N, H, D) tensor; 64-bit, as B·N·H·D can pass 2^31."""
    return ptr + pid_b.to(tl.int64) * s_b + pid_h.to(tl.int64) * s_h


@triton.jit
def chunk_range(pid_c, CHUNK, N):
    """Tokens [start, end) of chunk pid_c."""
    start = pid_c * CHUNK
    return start, tl.minimum(start + CHUNK, N)


@triton.jit
def span(pid_c, CHUNK, N, n_chunks, BLOCK_N: tl.constexpr, STRIDED: tl.constexpr):
    """(start, end, step) of chunk pid_c's loop over tiles of BLOCK_N tokens: CHUNK tokens from pid_c·CHUNK, step
    BLOCK_N; or with STRIDED (see plan.STRIDED) the tiles pid_c, pid_c + n_chunks, … up to N."""
    if STRIDED:
        start = pid_c * BLOCK_N
        end = N
        step = BLOCK_N * n_chunks
    else:
        start, end = chunk_range(pid_c, CHUNK, N)
        step = BLOCK_N
    return start, end, step


@triton.jit
def token_rows(n0, end, BLOCK_N: tl.constexpr, OFFS64: tl.constexpr):
    """Tokens n0 .. n0 + BLOCK_N: their indices, which are < end, and the row offsets (int64 when OFFS64)."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    return offs_n, offs_n < end, offs_n.to(tl.int64) if OFFS64 else offs_n


@triton.jit
def load_tile(base, n0, end, s_n, offs, s_d, dmask, BLOCK_N: tl.constexpr, OFFS64: tl.constexpr):
    """Rows n0 .. n0 + BLOCK_N (those < end) of a (N, BD) slab in the tensor's own dtype; 0 where masked.

    The streaming loops load the next tile before computing on the current one (the tile is a loop-carried
    value): the load is in flight during the math, which doubles the bytes in flight per program. The loads
    feed elementwise math, not tl.dot, so Triton's software pipeliner does not do this for us."""
    offs_n, nmask, rows = token_rows(n0, end, BLOCK_N, OFFS64)
    return tl.load(base + rows[:, None] * s_n + offs[None, :] * s_d, mask=nmask[:, None] & dmask[None, :], other=0.0)
