r"""Fused NaLa attention in Triton: forward and backward, deterministic, any strides.

The math is ``nalasr.ops.nala.nala_attention_reference`` (the single source of truth; this package does not
import it). The device math is in ``device``, the kernels in ``fwd`` and ``bwd`` (the register passes,
which issue their mma from registers without shared memory for the model's float16 16-dim heads, in ``fwd_reduce_rr``,
``fwd_map_rr``, ``bwd_query_rr`` and ``bwd_key_rr``); ``plan`` chooses which runs and with which launch config
(docs/kernels.md; the tl.dot passes' configs from the table in ``configs``, nothing autotuned), this module launches
what the plan says and binds them to autograd. Per (batch b, head h), N
tokens, D = head dim, Dv = value dim, everything below in float32:

    r = (Σx² + 1e-12)^(-1/2),  dir = x·r,  ‖x‖ = Σx²·r
    θ(x)  = clamp((π/4)·tanh(α·dir), ±Θ),  Θ = π/4 − 1e-4            (the reference's THETA_MAX)
    m_q   = |dir(q)|^p,  p = λ(τ + tanh‖q‖)     m_k = |k|^λ
    φ(x)  = [m·cos θ, m·sin θ],   φ̃(x) = [m·cos(θ+a), m·sin(θ+a)],   a = ω·pos (RoPE; φ̃ = φ without)
    S = (1/N) Σ_j φ̃k_j v_jᵀ   (2D × Dv)        z = (1/N) Σ_j φk_j   (2D)
    o_t = num_t / den_t,   num_t = Sᵀ φ̃q_t,   den_t = φq_tᵀ z + ε

Forward, two stages (plus a tiny combine):
  1. ``fwd_reduce_kernel``: programs split the token axis into chunks; each computes φk on the fly from k and
     accumulates its chunk's partial S, z in registers (tl.dot for S), written to a partial buffer. For 16-bit k, v
     of 16 unit-stride dims without RoPE (the model's case) ``fwd_reduce_rr._fwd_reduce_rr`` does the same with its mma
     fragments loaded and computed in registers, no shared memory (see plan.reduce_rr).
  2. ``combine_kernel``: sums the partials in a fixed order (no atomics: bitwise reproducible) and scales by 1/N.
  3. ``fwd_map_kernel``: every query tile computes φq on the fly, num = φ̃qᵀS (tl.dot), den = φqᵀz + ε, writes o once.
  On sm_90+ the three chain by programmatic dependent launch (see plan.pdl): each starts in the tail of the one before.
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
  once, dq, dk, dv written once. For float16 q, k, v of 16 dims without RoPE the two passes are
  ``bwd_query_rr._bwd_query_rr`` and ``bwd_key_rr._bwd_key_rr`` (see plan.bwd_query_rr_ok, plan.bwd_key_rr_ok).

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
tf32x3 (≈ fp32) for fp32 inputs (plan.precision). Where a product would be tf32,
fp16 inputs give it float16 operands instead, scaled into range (the map's, plan (f16); the backward's gradient
products, plan.bwd_f16): the same 11 significant bits, rounded to nearest. The feature map's tanh and
sin/cos are accurate to ~1e-7; for fp16/bf16 inputs without RoPE (APPROX) they are tanh.approx.f32 (~2^-11
relative) and short sin/cos polynomials (cos < 1.1e-5, sin < 1e-6), errors below those inputs' own rounding
(plan.approx_math). For float16 queries with |α| ≤ 1 the forward map forms φq in float16 pairs instead (HALF2, plan.map_half2 and
nalasr_kernels.nala.half2: the angle's cosine and sine as polynomials in α·dir, no tanh; den from float16 products).

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
import math
from collections.abc import Callable
from typing import Any

import torch
import triton
from torch import Tensor

from . import bwd_key_rr, bwd_query_rr, fwd_map_rr, fwd_reduce_rr, plan
from .bwd import bwd_key_kernel, bwd_query_kernel
from .configs import LaunchConfig
from .device import INTERPRET
from .fwd import combine_kernel, fwd_map_kernel, fwd_map_pair_kernel, fwd_reduce_kernel
from .plan import backward_plan, dims, forward_plan, lam_int, offs64, state_size

__all__ = ["NalaAttentionFunction", "nala_attention_triton",
           "nala_backward", "nala_forward"]

# Must match nalasr/ops/nala.py (not imported: this package never imports nalasr). Kept here as Python
# floats; the kernels use the same numbers as literals (a Triton kernel reads module globals only as constexpr).
NORM_EPS = 1e-12
THETA_MAX = math.pi / 4 - 1e-4
DEFAULTS = dict(lam=3.0, tau=0.5, alpha=1.0, eps=1e-6)  # nalasr.ops.nala.NalaParams()


# ============================================================================================= launch configs
# The tl.dot passes (the fallbacks for bfloat16, float32, other head dims, RoPE) launch with the one config the plan
# gives each (Launch.config: configs.TABLE's, by products, head width and token-count bucket), so a first call
# compiles one kernel a pass and benchmarks nothing; the register passes fix their own tiles. The autotuner over
# configs.TUNING_SPACE is a benchmark tool only (nala.tuning, benchmarks/kernel_configs.py): it sets TUNE for the
# duration of its runs, which routes these launches to it. None in normal use.

TUNE: Callable[..., None] | None = None


# ================================================================================================ host side


def _pdl_kw(pdl: bool) -> dict:
    """Launch options of a kernel that waits for the one before (only given when set: older Tritons lack it)."""
    return {"launch_pdl": True} if pdl else {}


def _launch(pass_: str, kernel, cfg: LaunchConfig, bucket: int, grid, *args, **meta) -> None:
    """tl.dot pass ``pass_`` (configs.PASSES) on ``grid`` with the plan's launch config (TUNE's autotuner instead
    where a benchmark set it)."""
    if TUNE is not None:
        TUNE(pass_, kernel, cfg, bucket, grid, args, meta)
    else:
        kernel[grid](*args, **meta, **cfg.kwargs(compiled=not INTERPRET))


def _empty(shape, dtype, device) -> Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    if plan.OUT_FILL is not None:
        t.fill_(plan.OUT_FILL)
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


def _device_guard(t: Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else _NullCtx()


class _NullCtx:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _combine_launch(part: Tensor, out: Tensor, bh: int, n_chunks: int, scale: float, state: int,
                    pdl: bool = False) -> None:
    # Narrow column blocks, many chunks a load: the blocks narrow (32, 16, then 8 columns, one 32-byte sector of a
    # chunk's row) until there are 2 programs an SM, each loading up to 8,192 partial sums at once.
    block = next((b for b in (32, 16) if bh * triton.cdiv(state, b) >= 2 * plan.sms(part.device)), 8)
    cb = min(plan.pow2(n_chunks), 8192 // block)
    combine_kernel[(bh, triton.cdiv(state, block))](part, out, n_chunks, scale, STATE=state, BLOCK=block, CB=cb,
                                                    PDL=pdl, num_warps=4, **_pdl_kw(pdl))


def nala_forward(q: Tensor, k: Tensor, v: Tensor, lam: float, tau: float, alpha: float, eps: float,
                 rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor]:
    """o (B, N, H, Dv) contiguous in q's dtype, and the float32 state (B, H, 2·BD·BDV + 2·BD) = (S, z)."""
    b, n, h, d, dv, bd, bdv = dims(q, v)
    state_n = state_size(bd, bdv)
    rope = rope_h > 0
    dev = q.device
    o = _empty((b, n, h, dv), q.dtype, dev)
    state = _empty((b, h, state_n), torch.float32, dev)
    freq = _rope_freq(d, bd, float(rope_base), dev) if rope else state
    bucket = plan.n_bucket(b, n, h)
    with _device_guard(q):
        p = forward_plan(q, k, v, o, lam, tau, alpha, rope)
        red, mp, pdl = p.reduce, p.map, p.pdl
        part = _empty((b * h * red.n_chunks * state_n,), torch.float32, dev)
        if red.variant == "fwd_reduce_rr":
            fwd_reduce_rr.launch(k, v, part, n, red.chunk, red.n_chunks, alpha, lam, lam_int(lam), p.approx, p.clamp,
                                 pdl=pdl, strided=red.strided)
        else:
            _launch("fwd_reduce", fwd_reduce_kernel, red.config, bucket, (h, red.n_chunks, b),
                    k, v, freq, part, n, max(rope_w, 1), h, red.chunk, red.n_chunks, bucket,
                    *k.stride(), *v.stride(), float(alpha), float(lam),
                    D=d, DV=dv, BD=bd, BDV=bdv, BDZ=bdv if p.zacc or dv < bdv else 2 * bdv, LAM_INT=lam_int(lam),
                    ROPE=rope, PREC=p.prec, APPROX=p.approx, OFFS64=offs64(n, k, v), ZACC=p.zacc,
                    CLAMP=p.clamp, ZDOT=p.zdot, PDL=pdl)
        _combine_launch(part, state, b * h, red.n_chunks, 1.0 / n, state_n, pdl)
        if mp.variant == "fwd_map_rr":
            fwd_map_rr.launch(q, state, o, n, mp.chunk, mp.n_chunks, alpha, lam, tau, eps, p.approx, pdl=pdl,
                              strided=mp.strided)
        elif mp.variant == "fwd_map_pair":
            tile = mp.config
            fwd_map_pair_kernel[(h // 2, mp.n_chunks, b)](
                q, state, o, n, h, mp.chunk, mp.n_chunks, *q.stride(), o.stride(0), o.stride(1),
                float(alpha), float(lam), float(tau), float(eps), BD=bd, APPROX=p.approx, OFFS64=offs64(n, q, o),
                PDL=pdl, STRIDED=mp.strided, **tile.kwargs(compiled=not INTERPRET), **_pdl_kw(pdl))
        else:
            _launch("fwd_map", fwd_map_kernel, mp.config, bucket, (h, mp.n_chunks, b),
                    q, state, freq, o, n, max(rope_w, 1), h, mp.chunk, mp.n_chunks, bucket,
                    *q.stride(), *o.stride(), float(alpha), float(lam), float(tau), float(eps),
                    D=d, DV=dv, BD=bd, BDV=bdv, ROPE=rope, PREC=p.prec, APPROX=p.approx, OFFS64=offs64(n, q, o),
                    FASTMAG=p.fastmag, F16=p.f16, CLAMP=p.clamp, PDL=pdl, HALF2=p.half2, STRIDED=mp.strided,
                    **_pdl_kw(pdl))
    return o, state


def nala_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, state: Tensor, lam: float, tau: float, alpha: float,
                  eps: float, rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv (contiguous, in the dtypes of q, k, v) from dO = ∂L/∂o and the forward's state."""
    b, n, h, d, dv, bd, bdv = dims(q, v)
    state_n = state_size(bd, bdv)
    rope = rope_h > 0
    dev = q.device
    dq = _empty(q.shape, q.dtype, dev)
    dk = _empty(k.shape, k.dtype, dev)
    dvv = _empty(v.shape, v.dtype, dev)
    dstate = _empty((b, h, state_n), torch.float32, dev)
    freq = _rope_freq(d, bd, float(rope_base), dev) if rope else state
    bucket = plan.n_bucket(b, n, h)
    with _device_guard(q):
        p = backward_plan(q, k, v, do, dq, dk, dvv, lam, tau, alpha, rope)
        qp, kp, pdl = p.query, p.key, p.pdl
        part = _empty((b * h * qp.n_chunks * state_n,), torch.float32, dev)
        if qp.variant == "bwd_query_rr":
            bwd_query_rr.launch(q, do, state, dq, part, n, qp.chunk, qp.n_chunks, alpha, lam, tau, eps, p.approx,
                                pdl=pdl, strided=qp.strided, maxnreg=plan.BWD_QUERY_RR_MAXNREG)
        else:
            _launch("bwd_query", bwd_query_kernel, qp.config, bucket, (h, qp.n_chunks, b),
                    q, do, state, freq, dq, part, n, max(rope_w, 1), h, qp.chunk, qp.n_chunks, bucket,
                    *q.stride(), *do.stride(), *dq.stride(), float(alpha), float(lam), float(tau), float(eps),
                    D=d, DV=dv, BD=bd, BDV=bdv, ROPE=rope, PREC_G=p.prec_g, CENTRE=p.centre, APPROX=p.approx,
                    OFFS64=offs64(n, q, do, dq), EYE=p.eye_query, MPOW=p.mpow, CLAMP=p.clamp,
                    PDL=pdl, F16=p.query_f16, STRIDED=qp.strided)
        _combine_launch(part, dstate, b * h, qp.n_chunks, 1.0 / n, state_n, pdl)
        if kp.variant == "bwd_key_rr":
            bwd_key_rr.launch(k, v, state, dstate, dk, dvv, n, kp.chunk, kp.n_chunks, alpha, lam, lam_int(lam),
                              p.approx, pdl=pdl, strided=kp.strided)
        else:
            _launch("bwd_key", bwd_key_kernel, kp.config, bucket, (h, kp.n_chunks, b),
                    k, v, state, dstate, freq, dk, dvv, n, max(rope_w, 1), h, kp.chunk, kp.n_chunks, bucket,
                    *k.stride(), *v.stride(), *dk.stride(), *dvv.stride(), float(alpha), float(lam),
                    D=d, DV=dv, BD=bd, BDV=bdv, LAM_INT=lam_int(lam), ROPE=rope, PREC=p.prec, PREC_G=p.prec_g,
                    CENTRE=p.centre, APPROX=p.approx, OFFS64=offs64(n, k, v, dk, dvv),
                    EYE=p.eye_key, CLAMP=p.clamp, PDL=pdl, F16=p.key_f16, STRIDED=kp.strided, **_pdl_kw(pdl))
    return dq, dk, dvv


# ============================================================================================ torch binding
# Custom ops make the kernels opaque to torch.compile (no graph break around the Triton launches, and the
# fake implementations give shapes without running anything); the autograd.Function ties them together.


@torch.library.custom_op("nalasr_kernels::fwd", mutates_args=())
def _nala_fwd_op(q: Tensor, k: Tensor, v: Tensor, lam: float, tau: float, alpha: float, eps: float,
                 rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor]:
    return nala_forward(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base)


@_nala_fwd_op.register_fake
def _(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
    b, n, h, d, dv, bd, bdv = dims(q, v)
    return q.new_empty((b, n, h, dv)), q.new_empty((b, h, state_size(bd, bdv)), dtype=torch.float32)


@torch.library.custom_op("nalasr_kernels::bwd", mutates_args=())
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
          for name, default in DEFAULTS.items()}
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
