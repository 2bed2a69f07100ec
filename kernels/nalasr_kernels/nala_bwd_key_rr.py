r"""The backward's key pass with its products issued from registers: ``_bwd_key`` without shared memory.

Same gradients as :func:`nalasr_kernels.nala_bwd._bwd_key` with F16 and CENTRE (float16 products, the values centred
on v̄) for the model's case: float16 k and v with unit-stride head dims, D = Dv = 16, an integer λ, no RoPE, no clamp;
dk, dv contiguous. ``nala_backward`` takes it where ``nala._bwd_key_rr`` says so.

The layout is the register map's (:mod:`nalasr_kernels.nala_map_rr`): lane (g, t) of a one-warp program holds head
dims 4t .. 4t + 3 of the tokens 8s + g of a 32-token tile (slot s = e // 32 of a (128,) tensor), as loaded (one 8-byte
word a token of k and of v). Three m16n8k16 float16 products a tile and m-tile, and every operand and result of them
sits in that lane:
- dv = φ̃kᵀ-rows against dS: A = |dir|^λ·(cos, sin) as float16 pairs (k slots 2t, 2t + 1 = dims 4t, 4t + 1), B = dS
  (scaled into float16) with its columns permuted so that a lane's results are value columns 4t .. 4t + 3;
- ∂L/∂φ̃k = (v − v̄)·dSᵀ (cos and sin halves): A = the raw v words (k slots = value dims 4t .. 4t + 3, no conversion),
  B = dSᵀ with its columns permuted likewise (a lane's results: feature dims 4t .. 4t + 3, those of its own k), and
  the accumulator starts at dz − v̄·dSᵀ (per dim, once a program): centring and ∂L/∂φk come with the product. The
  centring is exact products of float16 v against float16 dS summed in float32, where ``_bwd_key`` rounds v − v̄ to
  float16 first (both are within float32 rounding of (v − v̄)·dSᵀ unless |v| / |v − v̄| passes ~2^13).
Then the feature-map chain rule is elementwise in the lane but for the norm and the projection (two xor-shuffles
each), and dk, dv go out as one 8-byte word a token each.

Not measured on the GPU yet (session 31 ran out of device time): ``nala._bwd_key_rr`` is off unless
NALASR_BWD_KEY_RR=1.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import half2
from .nala_fwd import _centre, _load_state
from .nala_map_rr import _opaque, _state_matrix, _tokens_by_dim, _words
from .nala_math import (
    _COMPILED, _dtanh, _f16_state, _key_mag, _key_mag_grad, _pdl_launch, _pdl_wait, _pow2_scale, _sincos_angle, _slab,
    _span, _tanh)
from .nala_rr import _lane_xor, _unpack

TILE_TOKENS = 32  # tokens a loop iteration: two m-tiles of 16


def _mma_asm() -> str:
    """One head's 16 mma.sync m16n8k16 (f16 in, f32 out) over a 32-token tile. Operands, 4 registers (slots) each:
    D dv value columns 4t + 2nt + w at $4(2nt + w) ($0-$15), ∂L/∂φ̃k cos dims 4t + 2nt + w $16-$31, sin $32-$47;
    A φ̃k cos words (dims 4t, 4t + 1 / 4t + 2, 4t + 3) $48 / $52, sin $56 / $60, v words $64 / $68; B dS cos $72, sin
    $76 (slot 2nt + p: n-tile nt, rows 4t + 2p, + 1), dSᵀ cos $80, sin $84 (slot 2nt + p: value rows 4t + 2p, + 1);
    the ∂L/∂φ̃k accumulators' start, cos $88, sin $92 (slot j: dim 4t + j, float32)."""
    def o(k: int, slot: int) -> str:
        return f"${4 * k + slot}"

    def i(k: int, slot: int) -> str:
        return f"${48 + 4 * k + slot}"

    mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    lines = ["{", ".reg .b32 zr;", "mov.b32 zr, 0;"]
    for mt in range(2):
        s0, s1 = 2 * mt, 2 * mt + 1
        a_c = ",".join([i(0, s0), i(0, s1), i(1, s0), i(1, s1)])
        a_s = ",".join([i(2, s0), i(2, s1), i(3, s0), i(3, s1)])
        a_v = ",".join([i(4, s0), i(4, s1), i(5, s0), i(5, s1)])
        for nt in range(2):
            d = ",".join([o(2 * nt, s0), o(2 * nt + 1, s0), o(2 * nt, s1), o(2 * nt + 1, s1)])
            lines.append(f"{mma} {{{d}}}, {{{a_c}}}, {{{i(6, 2 * nt)},{i(6, 2 * nt + 1)}}}, {{zr,zr,zr,zr}};")
            lines.append(f"{mma} {{{d}}}, {{{a_s}}}, {{{i(7, 2 * nt)},{i(7, 2 * nt + 1)}}}, {{{d}}};")
            for half in range(2):  # ∂L/∂φ̃k's cos (half 0), sin (half 1)
                base = 4 + 4 * half
                d = ",".join([o(base + 2 * nt, s0), o(base + 2 * nt + 1, s0), o(base + 2 * nt, s1),
                              o(base + 2 * nt + 1, s1)])
                c = ",".join([i(10 + half, 2 * nt), i(10 + half, 2 * nt + 1)] * 2)
                lines.append(f"{mma} {{{d}}}, {{{a_v}}}, {{{i(8 + half, 2 * nt)},{i(8 + half, 2 * nt + 1)}}}, {{{c}}};")
    return "\n".join(lines + ["}"])


_MMA = tl.constexpr(_mma_asm())
_MMA_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 48 + ["r"] * 48))


@triton.jit
def _lanes(x):
    """Interpreter: (32 tokens 8s + g, 16 columns 4t + 2nt + w) → the (128, 2 nt, 2 w) lane order (e = 32s + 4g + t)."""
    return tl.reshape(x, (128, 2, 2))


@triton.jit
def _four(x):
    """Interpreter: (128, 2 nt, 2 w) → its four (128,) tensors, column 4t + 2nt + w at index 2nt + w."""
    w0, w1 = tl.split(x)
    a, c = tl.split(w0)
    b, d = tl.split(w1)
    return a, b, c, d


@triton.jit
def _transposed(b):
    """Interpreter: dSᵀ's B words (see _state_key) → dS itself (16 dims, 16 value columns) as float32."""
    x = tl.reshape(_words(b), (2, 2, 4, 2, 4, 2))  # (nt, p, g // 2, g % 2, t, w): value 4t + 2p + w
    return tl.reshape(tl.permute(x, (2, 0, 3, 4, 1, 5)), (16, 16))  # dim 4·(g // 2) + 2nt + g % 2


@triton.jit
def _mma(fc01, fc23, fs01, fs23, v01, v23, bc, bs, tc, ts, cc, cs):
    """One head's tile: the products of the module docstring. Returns dv's four value columns, then ∂L/∂φ̃k's cos and
    sin at the lane's four dims (each (128,) float32, slot s: token 8s + g)."""
    if _COMPILED:
        out = tl.inline_asm_elementwise(
            _MMA, _MMA_CONSTRAINTS, [fc01, fc23, fs01, fs23, v01, v23, bc, bs, tc, ts, cc, cs],
            dtype=(tl.float32,) * 12, is_pure=True, pack=4)
    else:
        fc = _tokens_by_dim(fc01, fc23)
        fs = _tokens_by_dim(fs01, fs23)
        dv = tl.dot(fc, _state_matrix(bc), input_precision="ieee")
        dv = tl.dot(fs, _state_matrix(bs), dv, input_precision="ieee")
        vv = _tokens_by_dim(v01, v23)
        # the accumulators' start as (16,) over dims 4t + j: slot j of the lanes g = 0 (every g holds the same)
        first = (tl.arange(0, 8) == 0)[None, :, None]
        c0 = tl.reshape(tl.permute(tl.sum(tl.where(first, tl.reshape(cc, (4, 8, 4)), 0.0), axis=1), (1, 0)), (16,))
        s0 = tl.reshape(tl.permute(tl.sum(tl.where(first, tl.reshape(cs, (4, 8, 4)), 0.0), axis=1), (1, 0)), (16,))
        gc = tl.dot(vv, tl.trans(_transposed(tc)), input_precision="ieee") + c0[None, :]
        gs = tl.dot(vv, tl.trans(_transposed(ts)), input_precision="ieee") + s0[None, :]
        d0, d1, d2, d3 = _four(_lanes(dv))
        c0_, c1_, c2_, c3_ = _four(_lanes(gc))
        s0_, s1_, s2_, s3_ = _four(_lanes(gs))
        out = (d0, d1, d2, d3, c0_, c1_, c2_, c3_, s0_, s1_, s2_, s3_)
    return out


@triton.jit
def _state_key(STATE, DSTATE, bh, s, g, t, lane_dim):
    """One (b, h)'s operands: dS's B words for dv (map layout, see nala_map_rr._state_rr) and for ∂L/∂φ̃k (dSᵀ: slot
    2nt + p of lane (g, t) is dS[4·(g // 2) + 2nt + g % 2][4t + 2p, + 1]), both scaled into float16 by one power of
    two; the accumulators' start dz − v̄·dSᵀ in units of that scale (slot j: dim lane_dim = 4t + j, cos and sin); the
    scale (dS = ds_up · the float16 words)."""
    ds_c, ds_s, dz_c, dz_s = _load_state(DSTATE, bh, 16, 16)  # dS already scaled by 1/N
    s_c, s_s, z_c, z_s = _load_state(STATE, bh, 16, 16)
    vbar = _centre(s_c, s_s, z_c, z_s)
    ds_c16, ds_s16, ds_up = _f16_state(ds_c, ds_s)
    inv = 1.0 / ds_up
    start_c = dz_c * inv - tl.sum(ds_c16.to(tl.float32) * vbar[None, :], axis=1)  # (16,) over dims
    start_s = dz_s * inv - tl.sum(ds_s16.to(tl.float32) * vbar[None, :], axis=1)
    cc = tl.gather(start_c, lane_dim, 0)
    cs = tl.gather(start_s, lane_dim, 0)
    smax = tl.maximum(tl.max(tl.max(tl.abs(ds_c), axis=1), axis=0), tl.max(tl.max(tl.abs(ds_s), axis=1), axis=0))
    down, _ = _pow2_scale(smax)  # the factor _f16_state applied
    st = DSTATE + bh.to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    row = (4 * t + 2 * (s % 2)) * 16 + 4 * (g // 2) + 2 * (s // 2) + g % 2
    bc = half2._pack(tl.load(st + row) * down, tl.load(st + row + 16) * down)
    bs = half2._pack(tl.load(st + 256 + row) * down, tl.load(st + 272 + row) * down)
    trow = (4 * (g // 2) + 2 * (s // 2) + g % 2) * 16 + 4 * t + 2 * (s % 2)
    tc = half2._pack(tl.load(st + trow) * down, tl.load(st + trow + 1) * down)
    ts = half2._pack(tl.load(st + 256 + trow) * down, tl.load(st + 257 + trow) * down)
    return bc, bs, tc, ts, cc, cs, ds_up


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _bwd_key_rr(K, V, STATE, DSTATE, DK, DV_, N, H, CHUNK, n_chunks, sk_b, sk_n, sk_h, sv_b, sv_n, sv_h, so_b, so_n,
                alpha, lam, LAM_INT: tl.constexpr, APPROX: tl.constexpr, PDL: tl.constexpr = False,
                STRIDED: tl.constexpr = False):
    """dk, dv of head program_id(0) over one chunk of keys (one warp). k, v: (B, N, H, 16) float16, head dims
    unit-stride, the other strides multiples of 4, the data 8-byte aligned; dk, dv: (B, N, H, 16) contiguous."""
    _pdl_launch(PDL)
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    e = tl.arange(0, 128)
    s = e // 32
    g = (e % 32) // 4
    t = _opaque(e % 4)  # see nala_map_rr._opaque
    tok = 8 * s + g
    kp = _slab(K, pid_b, pid_h, sk_b, sk_h).to(tl.pointer_type(tl.int64))  # 8-byte words: 4 dims
    vp = _slab(V, pid_b, pid_h, sv_b, sv_h).to(tl.pointer_type(tl.int64))
    dkp = _slab(DK, pid_b, pid_h, so_b, 16).to(tl.pointer_type(tl.int64))
    dvp = _slab(DV_, pid_b, pid_h, so_b, 16).to(tl.pointer_type(tl.int64))
    koff = tok * (sk_n // 4) + t
    voff = tok * (sv_n // 4) + t
    ooff = tok * (so_n // 4) + t
    start, end, step = _span(pid_c, CHUNK, N, n_chunks, 32, STRIDED)
    k_next = tl.load(kp + start * (sk_n // 4) + koff, mask=start + tok < end, other=0)
    v_next = tl.load(vp + start * (sv_n // 4) + voff, mask=start + tok < end, other=0)
    _pdl_wait(PDL)  # DSTATE comes from the combine before
    bc, bs, tc, ts, cc, cs, unit = _state_key(STATE, DSTATE, pid_b * H + pid_h, s, g, t, 4 * t + s)
    ka = 0.7853981633974483 * alpha * unit
    for n0 in tl.range(start, end, step):
        kw = k_next
        vw = v_next
        left = end - n0 - step
        k_next = tl.load(kp + (n0 + step) * (sk_n // 4) + koff, mask=tok < left, other=0)
        v_next = tl.load(vp + (n0 + step) * (sv_n // 4) + voff, mask=tok < left, other=0)
        mask = n0 + tok < end
        x0, x1 = _unpack(kw.to(tl.int32), tl.float16)
        x2, x3 = _unpack((kw >> 32).to(tl.int32), tl.float16)
        q0, q1, q2, q3 = x0 * x0, x1 * x1, x2 * x2, x3 * x3
        ss = q0 + q1 + q2 + q3
        ss = ss + _lane_xor(ss, 1)  # the token's other 12 dims, in the lanes that share g
        ss = ss + _lane_xor(ss, 2)
        r = tl.rsqrt(ss + 1e-12)
        rl = _key_mag(r, r * r, lam, LAM_INT)  # r^λ: m·r^λ = |dir|^λ in [0, 1]
        d0, d1, d2, d3 = x0 * r, x1 * r, x2 * r, x3 * r
        u0, u1 = _tanh(alpha * d0, APPROX), _tanh(alpha * d1, APPROX)
        u2, u3 = _tanh(alpha * d2, APPROX), _tanh(alpha * d3, APPROX)
        c0, s0 = _sincos_angle(u0, APPROX, SIN5=True)
        c1, s1 = _sincos_angle(u1, APPROX, SIN5=True)
        c2, s2 = _sincos_angle(u2, APPROX, SIN5=True)
        c3, s3 = _sincos_angle(u3, APPROX, SIN5=True)
        m0, m1 = _key_mag(x0, q0, lam, LAM_INT), _key_mag(x1, q1, lam, LAM_INT)
        m2, m3 = _key_mag(x2, q2, lam, LAM_INT), _key_mag(x3, q3, lam, LAM_INT)
        n0_, n1_, n2_, n3_ = m0 * rl, m1 * rl, m2 * rl, m3 * rl
        fc01 = half2._pack(n0_ * c0, n1_ * c1)
        fc23 = half2._pack(n2_ * c2, n3_ * c3)
        fs01 = half2._pack(n0_ * s0, n1_ * s1)
        fs23 = half2._pack(n2_ * s2, n3_ * s3)
        (dv0, dv1, dv2, dv3, gc0, gc1, gc2, gc3, gs0, gs1, gs2, gs3) = _mma(
            fc01, fc23, fs01, fs23, vw.to(tl.int32), (vw >> 32).to(tl.int32),
            bc, bs, tc, ts, cc, cs)
        f = unit / rl
        lo = half2._pack(dv0 * f, dv1 * f).to(tl.int64) & 4294967295
        hi = half2._pack(dv2 * f, dv3 * f).to(tl.int64)
        tl.store(dvp + n0 * (so_n // 4) + ooff, lo | (hi << 32), mask=mask)
        # ∂L/∂m, ∂L/∂θ (nala_math._feature_grad_angle without RoPE: gc, gs already hold ∂L/∂φk + ∂L/∂φ̃k), then dir
        e0 = _dtanh(m0 * (gs0 * c0 - gc0 * s0), u0, ka, APPROX)
        e1 = _dtanh(m1 * (gs1 * c1 - gc1 * s1), u1, ka, APPROX)
        e2 = _dtanh(m2 * (gs2 * c2 - gc2 * s2), u2, ka, APPROX)
        e3 = _dtanh(m3 * (gs3 * c3 - gc3 * s3), u3, ka, APPROX)
        proj = e0 * d0 + e1 * d1 + e2 * d2 + e3 * d3
        proj = proj + _lane_xor(proj, 1)
        proj = proj + _lane_xor(proj, 2)
        k0 = r * (e0 - d0 * proj) + (gc0 * c0 + gs0 * s0) * _key_mag_grad(x0, lam, LAM_INT, unit)
        k1 = r * (e1 - d1 * proj) + (gc1 * c1 + gs1 * s1) * _key_mag_grad(x1, lam, LAM_INT, unit)
        k2 = r * (e2 - d2 * proj) + (gc2 * c2 + gs2 * s2) * _key_mag_grad(x2, lam, LAM_INT, unit)
        k3 = r * (e3 - d3 * proj) + (gc3 * c3 + gs3 * s3) * _key_mag_grad(x3, lam, LAM_INT, unit)
        lo = half2._pack(k0, k1).to(tl.int64) & 4294967295
        hi = half2._pack(k2, k3).to(tl.int64)
        tl.store(dkp + n0 * (so_n // 4) + ooff, lo | (hi << 32), mask=mask)


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
