r"""The backward's key pass with its products issued from registers: ``bwd_key_kernel`` without shared memory.

Same gradients as :func:`nalasr_kernels.nala.bwd.bwd_key_kernel` with F16 and CENTRE (float16 products, the values centred
on v̄) for the model's case: float16 k and v with unit-stride head dims, D = Dv = 16, an integer λ, no RoPE, no clamp;
dk, dv contiguous. ``nala_backward`` takes it where ``plan.bwd_key_rr_ok`` says so.

The layout is the register map's (:mod:`nalasr_kernels.nala.fwd_map_rr`): lane (g, t) of a one-warp program holds head
dims 4t .. 4t + 3 of the tokens g, g + 8 of a 16-token tile (slot s = e // 32 of a (64,) tensor), as loaded (one 8-byte
word a token of k and of v). Three m16n8k16 float16 products a tile, and every operand and result of them
sits in that lane:
- dv = φ̃kᵀ-rows against dS: A = |dir|^λ·(cos, sin) as float16 pairs (k slots 2t, 2t + 1 = dims 4t, 4t + 1), B = dS
  (scaled into float16) with its columns permuted so that a lane's results are value columns 4t .. 4t + 3;
- ∂L/∂φ̃k = (v − v̄)·dSᵀ (cos and sin halves): A = the raw v words (k slots = value dims 4t .. 4t + 3, no conversion),
  B = dSᵀ with its columns permuted likewise (a lane's results: feature dims 4t .. 4t + 3, those of its own k), and
  the accumulator starts at dz − v̄·dSᵀ (per dim, once a program): centring and ∂L/∂φk come with the product. The
  centring is exact products of float16 v against float16 dS summed in float32 (relative error ~2^-24·|v| / |v − v̄|),
  where ``bwd_key_kernel`` rounds v − v̄ to float16 first (2^-11): this is the more accurate unless |v| / |v − v̄| passes ~2^13.
Then the feature-map chain rule is elementwise in the lane but for the norm and the projection (two xor-shuffles
each), and dk, dv go out as one 8-byte word a token each.

On the H200: 89.6-97.5 µs against bwd_key_kernel's
99.4-99.6, the backward at 1M 0.474-0.475 against 0.480-0.482 ms; at 12 or 8 programs an SM (16 by default) 95.5 /
130.1 µs. Offline sm_90: 124 registers (16 one-warp programs
an SM), 377 loop instructions a 16-token tile, no shared memory, no barrier, where bwd_key_kernel's 64-token tiles on 4
warps take 400 a warp (16 tokens), 5.6 KB of shared memory and 4 barriers.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import half2
from .fwd import centre_state, load_state
from .lanes import F16_MMA, dims4, four_words, lane_ids, matrix, token_sum, tokens_by_dim, word4, word_slab
from .device import (
    COMPILED, dtanh, f16_state, key_mag, key_mag_grad, pdl_launch, pdl_wait, pow2_scale, sincos_angle,
    span, tanh_any)

TILE_TOKENS = 16  # tokens a loop iteration: one m-tile, slot 0 its row g, slot 1 row g + 8
# One m-tile a loop iteration, not the register map's two: with two (4 slots a tensor) the loop held 243 registers
# offline (8 one-warp programs an SM), capped at 168 / 128 it spilled 224 / 392 B.


def _mma_asm() -> str:
    """One head's 8 mma.sync m16n8k16 (f16 in, f32 out) over a 16-token tile. Operands, 2 registers (slots) each: D dv
    value columns 4t + 2nt + w at $2(2nt + w) ($0-$7), ∂L/∂φ̃k cos dims 4t + 2nt + w $8-$15, sin $16-$23; A φ̃k cos
    words (dims 4t, 4t + 1 / 4t + 2, 4t + 3) $24 / $26, sin $28 / $30, v words $32 / $34; B (slot p: rows 4t + 2p, + 1
    of the product's k) dS cos n-tile 0 / 1 $36 / $38, sin $40 / $42, dSᵀ cos $44 / $46, sin $48 / $50; the ∂L/∂φ̃k
    accumulators' start (slot w: dim 4t + 2nt + w, float32) cos n-tile 0 / 1 $52 / $54, sin $56 / $58."""
    def o(k: int, slot: int) -> str:
        return f"${2 * k + slot}"

    def i(k: int, slot: int) -> str:
        return f"${24 + 2 * k + slot}"

    lines = ["{", ".reg .b32 zr;", "mov.b32 zr, 0;"]
    a_c = ",".join([i(0, 0), i(0, 1), i(1, 0), i(1, 1)])
    a_s = ",".join([i(2, 0), i(2, 1), i(3, 0), i(3, 1)])
    a_v = ",".join([i(4, 0), i(4, 1), i(5, 0), i(5, 1)])
    for nt in range(2):
        d = ",".join([o(2 * nt, 0), o(2 * nt + 1, 0), o(2 * nt, 1), o(2 * nt + 1, 1)])
        lines.append(f"{F16_MMA} {{{d}}}, {{{a_c}}}, {{{i(6 + nt, 0)},{i(6 + nt, 1)}}}, {{zr,zr,zr,zr}};")
        lines.append(f"{F16_MMA} {{{d}}}, {{{a_s}}}, {{{i(8 + nt, 0)},{i(8 + nt, 1)}}}, {{{d}}};")
        for half in range(2):  # ∂L/∂φ̃k's cos (half 0), sin (half 1)
            base = 4 + 4 * half
            d = ",".join([o(base + 2 * nt, 0), o(base + 2 * nt + 1, 0), o(base + 2 * nt, 1), o(base + 2 * nt + 1, 1)])
            b = f"{i(10 + 2 * half + nt, 0)},{i(10 + 2 * half + nt, 1)}"
            c = ",".join([i(14 + 2 * half + nt, 0), i(14 + 2 * half + nt, 1)] * 2)
            lines.append(f"{F16_MMA} {{{d}}}, {{{a_v}}}, {{{b}}}, {{{c}}};")
    return "\n".join(lines + ["}"])


_MMA = tl.constexpr(_mma_asm())
_MMA_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 24 + ["r"] * 36))


@triton.jit
def _start(c0, c1):
    """Interpreter: the accumulators' start of n-tiles 0, 1 (slot w: dim 4t + 2nt + w) → (16,) over the dims."""
    x = tl.reshape(tl.join(tl.reshape(c0, (2, 32)), tl.reshape(c1, (2, 32))), (2, 8, 4, 2))  # (w, g, t, nt)
    x = tl.sum(tl.where((tl.arange(0, 8) == 0)[None, :, None, None], x, 0.0), axis=1)  # lanes g = 0 (every g alike)
    return tl.reshape(tl.permute(x, (1, 2, 0)), (16,))


@triton.jit
def _mma(fc01, fc23, fs01, fs23, v01, v23, bc0, bc1, bs0, bs1, tc0, tc1, ts0, ts1, cc0, cc1, cs0, cs1):
    """One head's tile: the products of the module docstring. Returns dv's four value columns, then ∂L/∂φ̃k's cos and
    sin at the lane's four dims (each (64,) float32, slot s: token 8s + g)."""
    if COMPILED:
        out = tl.inline_asm_elementwise(
            _MMA, _MMA_CONSTRAINTS,
            [fc01, fc23, fs01, fs23, v01, v23, bc0, bc1, bs0, bs1, tc0, tc1, ts0, ts1, cc0, cc1, cs0, cs1],
            dtype=(tl.float32,) * 12, is_pure=True, pack=2)
    else:
        fc = tokens_by_dim(fc01, fc23)
        fs = tokens_by_dim(fs01, fs23)
        dv = tl.dot(fc, matrix(bc0, bc1, False), input_precision="ieee")
        dv = tl.dot(fs, matrix(bs0, bs1, False), dv, input_precision="ieee")
        vv = tokens_by_dim(v01, v23)
        gc = tl.dot(vv, tl.trans(matrix(tc0, tc1, True)), input_precision="ieee") + _start(cc0, cc1)[None, :]
        gs = tl.dot(vv, tl.trans(matrix(ts0, ts1, True)), input_precision="ieee") + _start(cs0, cs1)[None, :]
        d0, d1, d2, d3 = four_words(dv)
        c0, c1, c2, c3 = four_words(gc)
        s0, s1, s2, s3 = four_words(gs)
        out = (d0, d1, d2, d3, c0, c1, c2, c3, s0, s1, s2, s3)
    return out


@triton.jit
def _state_key(STATE, DSTATE, bh, s, g, t):
    """One (b, h)'s operands: dS's B words for dv (slot p of lane (g, t), n-tile nt: dS[4t + 2p, + 1][4·(g // 2) + 2nt
    + g % 2], so that a lane's results are value columns 4t .. 4t + 3) and for ∂L/∂φ̃k (dSᵀ: dS[4·(g // 2) + 2nt +
    g % 2][4t + 2p, + 1], results at the lane's own dims), scaled into float16 by one power of two; the accumulators'
    start dz − v̄·dSᵀ in units of that scale (slot w of n-tile nt: dim 4t + 2nt + w); the scale."""
    ds_c, ds_s, dz_c, dz_s = load_state(DSTATE, bh, 16, 16)  # dS already scaled by 1/N
    s_c, s_s, z_c, z_s = load_state(STATE, bh, 16, 16)
    vbar = centre_state(s_c, s_s, z_c, z_s)
    ds_c16, ds_s16, ds_up = f16_state(ds_c, ds_s)
    inv = 1.0 / ds_up
    start_c = dz_c * inv - tl.sum(ds_c16.to(tl.float32) * vbar[None, :], axis=1)  # (16,) over dims
    start_s = dz_s * inv - tl.sum(ds_s16.to(tl.float32) * vbar[None, :], axis=1)
    smax = tl.maximum(tl.max(tl.max(tl.abs(ds_c), axis=1), axis=0), tl.max(tl.max(tl.abs(ds_s), axis=1), axis=0))
    down, _ = pow2_scale(smax)  # the factor f16_state applied
    st = DSTATE + bh.to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    col = 4 * (g // 2) + g % 2
    row0 = (4 * t + 2 * s) * 16 + col  # n-tile 0; n-tile 1 is 2 columns on, the pair's second row 16 floats on
    trow0 = col * 16 + 4 * t + 2 * s  # n-tile 1: 2 rows (32 floats) on, the pair's second value adjacent
    bc0 = half2.pack_h2(tl.load(st + row0) * down, tl.load(st + row0 + 16) * down)
    bc1 = half2.pack_h2(tl.load(st + row0 + 2) * down, tl.load(st + row0 + 18) * down)
    bs0 = half2.pack_h2(tl.load(st + 256 + row0) * down, tl.load(st + 272 + row0) * down)
    bs1 = half2.pack_h2(tl.load(st + 258 + row0) * down, tl.load(st + 274 + row0) * down)
    tc0 = half2.pack_h2(tl.load(st + trow0) * down, tl.load(st + trow0 + 1) * down)
    tc1 = half2.pack_h2(tl.load(st + trow0 + 32) * down, tl.load(st + trow0 + 33) * down)
    ts0 = half2.pack_h2(tl.load(st + 256 + trow0) * down, tl.load(st + 257 + trow0) * down)
    ts1 = half2.pack_h2(tl.load(st + 288 + trow0) * down, tl.load(st + 289 + trow0) * down)
    cc0 = tl.gather(start_c, 4 * t + s, 0)
    cc1 = tl.gather(start_c, 4 * t + 2 + s, 0)
    cs0 = tl.gather(start_s, 4 * t + s, 0)
    cs1 = tl.gather(start_s, 4 * t + 2 + s, 0)
    return bc0, bc1, bs0, bs1, tc0, tc1, ts0, ts1, cc0, cc1, cs0, cs1, ds_up


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _bwd_key_rr(K, V, STATE, DSTATE, DK, DV_, N, H, CHUNK, n_chunks, sk_b, sk_n, sk_h, sv_b, sv_n, sv_h, so_b, so_n,
                alpha, lam, LAM_INT: tl.constexpr, APPROX: tl.constexpr, PDL: tl.constexpr = False,
                STRIDED: tl.constexpr = False):
    """dk, dv of head program_id(0) over one chunk of keys (one warp). k, v: (B, N, H, 16) float16, head dims
    unit-stride, the other strides multiples of 4, the data 8-byte aligned; dk, dv: (B, N, H, 16) contiguous."""
    pdl_launch(PDL)
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    s, g, t, tok = lane_ids(64)
    kp = word_slab(K, pid_b, pid_h, sk_b, sk_h)
    vp = word_slab(V, pid_b, pid_h, sv_b, sv_h)
    dkp = word_slab(DK, pid_b, pid_h, so_b, 16)
    dvp = word_slab(DV_, pid_b, pid_h, so_b, 16)
    koff = tok * (sk_n // 4) + t
    voff = tok * (sv_n // 4) + t
    ooff = tok * (so_n // 4) + t
    start, end, step = span(pid_c, CHUNK, N, n_chunks, 16, STRIDED)
    k_next = tl.load(kp + start * (sk_n // 4) + koff, mask=start + tok < end, other=0)
    v_next = tl.load(vp + start * (sv_n // 4) + voff, mask=start + tok < end, other=0)
    pdl_wait(PDL)  # DSTATE comes from the combine before
    bc0, bc1, bs0, bs1, tc0, tc1, ts0, ts1, cc0, cc1, cs0, cs1, unit = _state_key(STATE, DSTATE, pid_b * H + pid_h,
                                                                                s, g, t)
    ka = 0.7853981633974483 * alpha * unit
    for n0 in tl.range(start, end, step):
        kw = k_next
        vw = v_next
        left = end - n0 - step
        k_next = tl.load(kp + (n0 + step) * (sk_n // 4) + koff, mask=tok < left, other=0)
        v_next = tl.load(vp + (n0 + step) * (sv_n // 4) + voff, mask=tok < left, other=0)
        mask = n0 + tok < end
        x0, x1, x2, x3 = dims4(kw)
        q0, q1, q2, q3 = x0 * x0, x1 * x1, x2 * x2, x3 * x3
        ss = token_sum(q0 + q1 + q2 + q3)
        r = tl.rsqrt(ss + 1e-12)
        rl = key_mag(r, r * r, lam, LAM_INT)  # r^λ: m·r^λ = |dir|^λ in [0, 1]
        d0, d1, d2, d3 = x0 * r, x1 * r, x2 * r, x3 * r
        u0, u1 = tanh_any(alpha * d0, APPROX), tanh_any(alpha * d1, APPROX)
        u2, u3 = tanh_any(alpha * d2, APPROX), tanh_any(alpha * d3, APPROX)
        c0, s0 = sincos_angle(u0, APPROX, SIN5=True)
        c1, s1 = sincos_angle(u1, APPROX, SIN5=True)
        c2, s2 = sincos_angle(u2, APPROX, SIN5=True)
        c3, s3 = sincos_angle(u3, APPROX, SIN5=True)
        m0, m1 = key_mag(x0, q0, lam, LAM_INT), key_mag(x1, q1, lam, LAM_INT)
        m2, m3 = key_mag(x2, q2, lam, LAM_INT), key_mag(x3, q3, lam, LAM_INT)
        n0_, n1_, n2_, n3_ = m0 * rl, m1 * rl, m2 * rl, m3 * rl
        fc01 = half2.pack_h2(n0_ * c0, n1_ * c1)
        fc23 = half2.pack_h2(n2_ * c2, n3_ * c3)
        fs01 = half2.pack_h2(n0_ * s0, n1_ * s1)
        fs23 = half2.pack_h2(n2_ * s2, n3_ * s3)
        (dv0, dv1, dv2, dv3, gc0, gc1, gc2, gc3, gs0, gs1, gs2, gs3) = _mma(
            fc01, fc23, fs01, fs23, vw.to(tl.int32), (vw >> 32).to(tl.int32),
            bc0, bc1, bs0, bs1, tc0, tc1, ts0, ts1, cc0, cc1, cs0, cs1)
        f = unit * half2.rcp_fast(rl)  # rl = r^λ: a normal float (r ≤ 1e6, λ ≤ 4)
        tl.store(dvp + n0 * (so_n // 4) + ooff, word4(dv0 * f, dv1 * f, dv2 * f, dv3 * f), mask=mask)
        # ∂L/∂m, ∂L/∂θ (device.feature_grad_angle without RoPE: gc, gs already hold ∂L/∂φk + ∂L/∂φ̃k), then dir
        e0 = dtanh(m0 * (gs0 * c0 - gc0 * s0), u0, ka, APPROX)
        e1 = dtanh(m1 * (gs1 * c1 - gc1 * s1), u1, ka, APPROX)
        e2 = dtanh(m2 * (gs2 * c2 - gc2 * s2), u2, ka, APPROX)
        e3 = dtanh(m3 * (gs3 * c3 - gc3 * s3), u3, ka, APPROX)
        proj = token_sum(e0 * d0 + e1 * d1 + e2 * d2 + e3 * d3)
        k0 = r * (e0 - d0 * proj) + (gc0 * c0 + gs0 * s0) * key_mag_grad(x0, lam, LAM_INT, unit)
        k1 = r * (e1 - d1 * proj) + (gc1 * c1 + gs1 * s1) * key_mag_grad(x1, lam, LAM_INT, unit)
        k2 = r * (e2 - d2 * proj) + (gc2 * c2 + gs2 * s2) * key_mag_grad(x2, lam, LAM_INT, unit)
        k3 = r * (e3 - d3 * proj) + (gc3 * c3 + gs3 * s3) * key_mag_grad(x3, lam, LAM_INT, unit)
        tl.store(dkp + n0 * (so_n // 4) + ooff, word4(k0, k1, k2, k3), mask=mask)


def usable(k: Tensor, v: Tensor, dk: Tensor, dv: Tensor) -> bool:
    """Whether k, v (and the contiguous dk, dv) suit this kernel's word loads and stores: float16 (B, N, H, 16), head
    dims unit-stride, the other strides multiples of 4, 8-byte aligned data."""
    return (k.dtype == v.dtype == torch.float16 and k.shape[-1] == v.shape[-1] == 16 and k.shape == v.shape
            and k.stride(3) == v.stride(3) == 1 and all(x % 4 == 0 for x in k.stride()[:3] + v.stride()[:3])
            and all(x.data_ptr() % 8 == 0 for x in (k, v, dk, dv)) and dk.is_contiguous() and dv.is_contiguous()
            and dk.shape == dv.shape == k.shape)


def launch(k: Tensor, v: Tensor, state: Tensor, dstate: Tensor, dk: Tensor, dv: Tensor, n: int, chunk: int,
           n_chunks: int, alpha: float, lam: float, lam_int: int, approx: bool, pdl: bool = False,
           strided: bool = False) -> None:
    """The (H, chunks, B) grid over k, v (B, N, H, 16) into dk, dv with the forward's state and the combined dS, dz."""
    b, _, h, _ = k.shape
    _bwd_key_rr[(h, n_chunks, b)](k, v, state, dstate, dk, dv, n, h, chunk, n_chunks, k.stride(0), k.stride(1),
                                  k.stride(2), v.stride(0), v.stride(1), v.stride(2), dk.stride(0), dk.stride(1),
                                  float(alpha), float(lam), LAM_INT=lam_int, APPROX=approx, PDL=pdl, STRIDED=strided,
                                  num_warps=1, num_stages=1, **({"launch_pdl": True} if pdl else {}))
