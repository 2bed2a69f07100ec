r"""The backward's query pass with its products issued from registers: ``bwd_query_kernel`` without shared memory.

Same gradients as :func:`nalasr_kernels.nala.bwd.bwd_query_kernel` with F16, CENTRE, MPOW and DZACC (the values centred
on v̄, S·dnum from the float16 g against S scaled into float16, m/dir as sign(dir)·|dir|^(p−1), dz summed in float32)
for the model's case: float16 q and ∂L/∂o with unit-stride head dims, D = Dv = 16, no RoPE, no clamp; dq contiguous.
``nala_backward`` takes it where ``plan.bwd_query_rr_ok`` says so.

Why. bwd_query_kernel holds 224 registers a thread (8 one-warp programs an SM: two warps a scheduler) and moves its tiles
between the elementwise and the products' layouts through shared memory. Here the layout is the register map's (:mod:`nalasr_kernels.nala.fwd_map_rr`): lane
(g, t) of a one-warp program holds head dims 4t .. 4t + 3 of the tokens g, g + 8 of a 16-token tile (slot s = e // 32
of a (64,) tensor), as loaded (one 8-byte word a token of q and of g = ∂L/∂o). The products a tile:
- D = g·(S − z·v̄ᵀ)ᵀ (cos and sin halves, ∂L/∂φ̃q = D·up/den): A = the raw g words (k slots = value dims 4t .. 4t + 3),
  B = the centred S scaled into float16, its columns permuted so that a lane's results are the feature dims 4t ..
  4t + 3 of its own tokens (bwd_key_rr's ∂L/∂φ̃k product, g in place of v);
- g·v̄ for dden's ε·v̄·dnum term: the same A against v̄ (scaled into float16) in every column of one n-tile;
- the partial dS = Σ φ̃q·dnumᵀ, a reduction over the tokens: A = φ̃qᵀ (feature rows × token k), B = dnum (token k ×
  value columns). A lane holds one token and four dims of each; ``movmatrix.trans`` turns each 8 × 8 block of float16
  words (rows: the slot's 8 tokens, column pairs: dims 4t, 4t + 1 or 4t + 2, 4t + 3) into the block the fragment wants
  (rows: the dims 4·(g // 2) + g % 2 (+ 2), column pairs: tokens 2t, 2t + 1), 12 a tile. dnum = g/den goes in as
  g·(1/den)·2^-E, E the exponent of the largest 1/den so far (a float16 operand cannot hold 1/den's range: den ≥ ε
  only); when a tile raises E, the accumulators are scaled down by the power of two (exact) first.
dz = Σ dden·φq stays elementwise in float32 (8 accumulators a lane, summed over the lanes once); den, dden, the norm,
∂L/∂p and the projection are sums over a token's 4 lanes (two xor-shuffles each), and dq goes out as one 8-byte word a
token.

The chain through the feature map is bwd_query_kernel's in float32 (den = φq·z + ε too), so dq matches it to float32
rounding (interpreter, batch3: 1.7e-6); dS's float16 operands take dk, dv 4.7e-4 from bwd_query_kernel's tf32 products,
each as near the float64 reference (the parity case fp16-bwd-query-rr: dk 5.5e-4 against 6.0e-4).

Measured: the pass 132.1 µs capped at 168 registers with 12
programs an SM (plan.BWD_QUERY_RR_MAXNREG), against bwd_query_kernel's 150.1-152.0 and its own 153.9-154.6 uncapped (213
registers, 8 an SM); 131.2-131.5 as the default. Offline sm_90 (168-register cap): 629 loop
instructions a 16-token tile (617 uncapped, bwd_query_kernel 605-613), 16 B of stack, no shared memory. Tried offline and
left out: den from φ̃q's float16 words against z's (two more mma, 598 instructions but 227 registers, dq 8% further
from the reference).

Interpreter (TRITON_INTERPRET=1, no PTX): the shuffles are gathers, the products tl.dot on the same float16 values
rearranged into (token, dim) matrices, and the transposes are implied by them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import half2
from .fwd import centre_state, load_state
from .lanes import F16_MMA, dims4, four_words, lane_ids, matrix, to_words, token_sum, tokens_by_dim, word4, word_slab
from .device import COMPILED, dtanh, log2_fast, pdl_launch, pow2_scale, sincos_angle, span, tanh_any

TILE_TOKENS = 16  # tokens a loop iteration: one m-tile, slot 0 its row g, slot 1 row g + 8


def _mma_asm() -> str:
    """One head's 9 mma.sync m16n8k16 (f16 in, f32 out) and 12 movmatrix over a 16-token tile. Operands, 2 registers
    (slots) each. Out: D cos at feature dims 4t + 2nt + w $2(2nt + w) ($0-$7), sin $8-$15; dS accumulators $16-$31
    (tensor 4h + 2nt + w, slot q: dS_h[4·(g // 2) + 2q + g % 2][4t + 2nt + w], h 0 cos / 1 sin); g·v̄ $32 / $33. In: g
    words (value dims 4t, 4t + 1 / 4t + 2, 4t + 3) $34 / $36; B (slot p: value dims 4t + 2p, + 1) of the centred S's
    cos n-tile 0 / 1 $38 / $40, sin $42 / $44; φ̃q's cos words (dims 4t, 4t + 1 / 4t + 2, 4t + 3) $46 / $48, sin $50 /
    $52; dnum's words (value dims 4t, 4t + 1 / 4t + 2, 4t + 3) $54 / $56; the dS accumulators' previous values
    $58-$73; v̄'s B words (slot p: value dims 4t + 2p, + 1; every column v̄) $74."""
    def o(k: int, slot: int) -> str:
        return f"${2 * k + slot}"

    def i(k: int, slot: int) -> str:
        return f"${34 + 2 * k + slot}"

    words = [(6, 0), (6, 1), (7, 0), (7, 1), (8, 0), (8, 1), (9, 0), (9, 1), (10, 0), (10, 1), (11, 0), (11, 1)]
    tr = {w: f"tr{n}" for n, w in enumerate(words)}  # each float16 word block, transposed
    lines = ["{", ".reg .b32 zr, x0, x1, " + ", ".join(tr.values()) + ";", "mov.b32 zr, 0;"]
    a_g = ",".join([i(0, 0), i(0, 1), i(1, 0), i(1, 1)])
    for h in range(2):
        for nt in range(2):
            d = ",".join([o(4 * h + 2 * nt, 0), o(4 * h + 2 * nt + 1, 0), o(4 * h + 2 * nt, 1),
                          o(4 * h + 2 * nt + 1, 1)])
            b = f"{i(2 + 2 * h + nt, 0)},{i(2 + 2 * h + nt, 1)}"
            lines.append(f"{F16_MMA} {{{d}}}, {{{a_g}}}, {{{b}}}, {{zr,zr,zr,zr}};")
    lines.append(f"{F16_MMA} {{{o(16, 0)}, x0, {o(16, 1)}, x1}}, {{{a_g}}}, {{{i(20, 0)},{i(20, 1)}}}, {{zr,zr,zr,zr}};")
    lines += [f"movmatrix.sync.aligned.m8n8.trans.b16 {tr[w]}, {i(*w)};" for w in words]
    for h in range(2):
        f01, f23 = 6 + 2 * h, 7 + 2 * h
        a = ",".join([tr[(f01, 0)], tr[(f23, 0)], tr[(f01, 1)], tr[(f23, 1)]])
        for nt in range(2):
            k = 4 * h + 2 * nt
            d = ",".join([o(8 + k, 0), o(8 + k + 1, 0), o(8 + k, 1), o(8 + k + 1, 1)])
            c = ",".join([i(12 + k, 0), i(12 + k + 1, 0), i(12 + k, 1), i(12 + k + 1, 1)])
            lines.append(f"{F16_MMA} {{{d}}}, {{{a}}}, {{{tr[(10 + nt, 0)]},{tr[(10 + nt, 1)]}}}, {{{c}}};")
    return "\n".join(lines + ["}"])


_MMA = tl.constexpr(_mma_asm())
_MMA_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 34 + ["r"] * 42))


@triton.jit
def _lane_vector(b):
    """Interpreter: B words that hold one vector in every column (slot p of lane (g, t): dims 4t + 2p, + 1, the same
    for every g; v̄'s) → that (16,) vector as float16 values in float32."""
    x = tl.reshape(to_words(b), (2, 8, 4, 2))  # (p, g, t, w): dim 4t + 2p + w
    x = tl.sum(tl.where((tl.arange(0, 8) == 0)[None, :, None, None], x, 0.0), axis=1)  # lanes g = 0 (exact)
    return tl.reshape(tl.permute(x, (1, 0, 2)), (16,))


@triton.jit
def _ds_index(s, g, t, NT: tl.constexpr, W: tl.constexpr):
    """Where the dS accumulator of n-tile NT, column offset W sits in a half's (16 dims, 16 value columns) row-major
    block: row 4·(g // 2) + 2s + g % 2 (slot s: the fragment's row g + 8s), column 4t + 2·NT + W."""
    return (4 * (g // 2) + 2 * s + g % 2) * 16 + 4 * t + 2 * NT + W


@triton.jit
def _ds_add(prod, a0, a1, a2, a3, s, g, t):
    """Interpreter: one half's (16 dims, 16 value columns) product added into its four accumulators."""
    flat = tl.reshape(prod, (256,))
    return (a0 + tl.gather(flat, _ds_index(s, g, t, 0, 0), 0), a1 + tl.gather(flat, _ds_index(s, g, t, 0, 1), 0),
            a2 + tl.gather(flat, _ds_index(s, g, t, 1, 0), 0), a3 + tl.gather(flat, _ds_index(s, g, t, 1, 1), 0))


@triton.jit
def _mma(g01, g23, bc0, bc1, bs0, bs1, fc01, fc23, fs01, fs23, n01, n23, a0, a1, a2, a3, a4, a5, a6, a7, bv,
         s, g, t):
    """One head's tile: the products of the module docstring. Returns D's cos and sin at the lane's four feature dims
    (each (64,) float32, slot s: token 8s + g), the eight dS accumulators with this tile's terms added, and g·v̄ in
    units of v̄'s scale."""
    if COMPILED:
        out = tl.inline_asm_elementwise(
            _MMA, _MMA_CONSTRAINTS,
            [g01, g23, bc0, bc1, bs0, bs1, fc01, fc23, fs01, fs23, n01, n23, a0, a1, a2, a3, a4, a5, a6, a7, bv],
            dtype=(tl.float32,) * 17, is_pure=True, pack=2)
    else:
        gg = tokens_by_dim(g01, g23)
        dc0, dc1, dc2, dc3 = four_words(tl.dot(gg, tl.trans(matrix(bc0, bc1, True)), input_precision="ieee"))
        ds0, ds1, ds2, ds3 = four_words(tl.dot(gg, tl.trans(matrix(bs0, bs1, True)), input_precision="ieee"))
        dn = tokens_by_dim(n01, n23)
        a0, a1, a2, a3 = _ds_add(tl.dot(tl.trans(tokens_by_dim(fc01, fc23)), dn, input_precision="ieee"),
                                 a0, a1, a2, a3, s, g, t)
        a4, a5, a6, a7 = _ds_add(tl.dot(tl.trans(tokens_by_dim(fs01, fs23)), dn, input_precision="ieee"),
                                 a4, a5, a6, a7, s, g, t)
        gv = tl.sum(gg * _lane_vector(bv)[None, :], axis=1)  # (16 tokens,)
        gv = tl.reshape(tl.broadcast_to(tl.reshape(gv, (2, 8, 1)), (2, 8, 4)), (64,))
        out = (dc0, dc1, dc2, dc3, ds0, ds1, ds2, ds3, a0, a1, a2, a3, a4, a5, a6, a7, gv)
    return out


@triton.jit
def _centred_word(st, z, vbar, row, col, down):
    """The float16 pair ((S − z·v̄ᵀ)[row][col], [row][col + 1])·down of one half (st: its S, z its (16,) z)."""
    lo = (tl.load(st + row * 16 + col) - tl.gather(z, row, 0) * tl.gather(vbar, col, 0)) * down
    hi = (tl.load(st + row * 16 + col + 1) - tl.gather(z, row, 0) * tl.gather(vbar, col + 1, 0)) * down
    return half2.pack_h2(lo, hi)


@triton.jit
def _state_query(STATE, bh, s, g, t):
    """One (b, h)'s operands: the centred S's B words (slot p of lane (g, t), n-tile nt: the pair at value dims 4t + 2p,
    + 1 of feature dim 4·(g // 2) + 2nt + g % 2, so that a lane's results are its own feature dims) scaled into float16
    by a power of two, and the factor that undoes it; v̄'s B words (slot p: value dims 4t + 2p, + 1, every column v̄)
    scaled likewise, and its factor; z (float32) at the lane's feature dims."""
    s_c, s_s, z_c, z_s = load_state(STATE, bh, 16, 16)
    vbar = centre_state(s_c, s_s, z_c, z_s)
    smax = tl.maximum(tl.max(tl.max(tl.abs(s_c - z_c[:, None] * vbar[None, :]), axis=1), axis=0),
                      tl.max(tl.max(tl.abs(s_s - z_s[:, None] * vbar[None, :]), axis=1), axis=0))
    down, up = pow2_scale(smax)
    st = STATE + bh.to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    row = 4 * (g // 2) + g % 2
    col = 4 * t + 2 * s
    bc0 = _centred_word(st, z_c, vbar, row, col, down)
    bc1 = _centred_word(st, z_c, vbar, row + 2, col, down)
    bs0 = _centred_word(st + 256, z_s, vbar, row, col, down)
    bs1 = _centred_word(st + 256, z_s, vbar, row + 2, col, down)
    vd, vu = pow2_scale(tl.max(tl.abs(vbar), axis=0))
    d = 4 * t
    bv = half2.pack_h2(tl.gather(vbar, col, 0) * vd, tl.gather(vbar, col + 1, 0) * vd)
    return (bc0, bc1, bs0, bs1, up, bv, vu,
            tl.gather(z_c, d, 0), tl.gather(z_c, d + 1, 0), tl.gather(z_c, d + 2, 0), tl.gather(z_c, d + 3, 0),
            tl.gather(z_s, d, 0), tl.gather(z_s, d + 1, 0), tl.gather(z_s, d + 2, 0), tl.gather(z_s, d + 3, 0))


@triton.jit
def _magnitude(d, pm1):
    """m = |dir|^p as mo·|dir|, mo = |dir|^(p−1) (one exp2; 0 at dir = 0, as p > 1); ∂L/∂p's m·log2|dir| (log2
    clamped at −126, finite: m = 0 where the clamp binds); m/dir = mo with dir's sign bit (see device.query_mag)."""
    a = tl.abs(d)
    l2 = log2_fast(a)
    mo = tl.exp2(pm1 * l2)
    mos = (mo.to(tl.int32, bitcast=True) | (d.to(tl.int32, bitcast=True) & -2147483648)).to(tl.float32, bitcast=True)
    m = mo * a
    return m, m * tl.maximum(l2, -126.0), mos


@triton.jit
def _dir_grad(gc, gs, pc, ps, c, s, u, mos, ml2, p, ka, APPROX: tl.constexpr):
    """One element's ∂L/∂dir (angle and magnitude parts) and its ∂L/∂p term from ∂L/∂φq's halves gc, gs (the
    numerator's and den's parts together); φq = (pc, ps) = m·(c, s), ml2 = m·log2|dir|. ∂L/∂θ = m·(gs·c − gc·s) as
    gs·pc − gc·ps: m need not stay live through the products."""
    dm = gc * c + gs * s
    ddir = dtanh(gs * pc - gc * ps, u, ka, APPROX) + dm * p * mos
    return ddir, dm * ml2


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _bwd_query_rr(Q, DO, STATE, DQ, PART, N, H, CHUNK, n_chunks, sq_b, sq_n, sq_h, sg_b, sg_n, sg_h, so_b, so_n,
                  alpha, lam, tau, eps, APPROX: tl.constexpr, PDL: tl.constexpr = False,
                  STRIDED: tl.constexpr = False):
    """dq of head program_id(0) over one chunk of queries and the chunk's partial dS, dz → PART (one warp). q, ∂L/∂o:
    (B, N, H, 16) float16, head dims unit-stride, the other strides multiples of 4, the data 8-byte aligned; dq:
    (B, N, H, 16) contiguous."""
    pdl_launch(PDL)  # the combine after this pass may start (it waits for PART); q, g come from before the call
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    s, g, t, tok = lane_ids(64)
    qp = word_slab(Q, pid_b, pid_h, sq_b, sq_h)
    gp = word_slab(DO, pid_b, pid_h, sg_b, sg_h)
    dqp = word_slab(DQ, pid_b, pid_h, so_b, 16)
    qoff = tok * (sq_n // 4) + t
    goff = tok * (sg_n // 4) + t
    ooff = tok * (so_n // 4) + t
    start, end, step = span(pid_c, CHUNK, N, n_chunks, 16, STRIDED)
    q_next = tl.load(qp + start * (sq_n // 4) + qoff, mask=start + tok < end, other=0)
    g_next = tl.load(gp + start * (sg_n // 4) + goff, mask=start + tok < end, other=0)
    (bc0, bc1, bs0, bs1, up, bv, vu, zc0, zc1, zc2, zc3, zs0, zs1, zs2, zs3) = _state_query(
        STATE, pid_b * H + pid_h, s, g, t)
    eps_v = eps * vu
    ka = 0.7853981633974483 * alpha
    zero = tl.zeros((64,), dtype=tl.float32)
    a0, a1, a2, a3, a4, a5, a6, a7 = zero, zero, zero, zero, zero, zero, zero, zero  # dS, in units of 2^(e_run − 126)
    y0, y1, y2, y3, w0, w1, w2, w3 = zero, zero, zero, zero, zero, zero, zero, zero  # dz cos, sin at dims 4t + j
    e_run = tl.full((), 1, tl.int32)  # the largest 1/den's biased exponent so far (1: the scale's floor)
    for n0 in tl.range(start, end, step):
        qw = q_next
        gw = g_next
        left = end - n0 - step
        q_next = tl.load(qp + (n0 + step) * (sq_n // 4) + qoff, mask=tok < left, other=0)
        g_next = tl.load(gp + (n0 + step) * (sg_n // 4) + goff, mask=tok < left, other=0)
        mask = n0 + tok < end  # masked tokens load q = g = 0: dnum = dden = 0, nothing added, dq not stored
        # ---- the forward's φq again, in float32
        x0, x1, x2, x3 = dims4(qw)
        ss = token_sum(x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3)
        r = tl.rsqrt(ss + 1e-12)
        tn = tanh_any(ss * r, APPROX)
        p = lam * (tau + tn)
        d0, d1, d2, d3 = x0 * r, x1 * r, x2 * r, x3 * r
        m0, l0, o0 = _magnitude(d0, p - 1.0)
        m1, l1, o1 = _magnitude(d1, p - 1.0)
        m2, l2, o2 = _magnitude(d2, p - 1.0)
        m3, l3, o3 = _magnitude(d3, p - 1.0)
        u0, u1 = tanh_any(alpha * d0, APPROX), tanh_any(alpha * d1, APPROX)
        u2, u3 = tanh_any(alpha * d2, APPROX), tanh_any(alpha * d3, APPROX)
        c0, s0 = sincos_angle(u0, APPROX)
        c1, s1 = sincos_angle(u1, APPROX)
        c2, s2 = sincos_angle(u2, APPROX)
        c3, s3 = sincos_angle(u3, APPROX)
        pc0, pc1, pc2, pc3 = m0 * c0, m1 * c1, m2 * c2, m3 * c3
        ps0, ps1, ps2, ps3 = m0 * s0, m1 * s1, m2 * s2, m3 * s3
        fc01, fc23 = half2.pack_h2(pc0, pc1), half2.pack_h2(pc2, pc3)
        fs01, fs23 = half2.pack_h2(ps0, ps1), half2.pack_h2(ps2, ps3)
        rden = half2.rcp_fast(token_sum(pc0 * zc0 + ps0 * zs0 + pc1 * zc1 + ps1 * zs1 + pc2 * zc2 + ps2 * zs2 + pc3 * zc3
                                     + ps3 * zs3) + eps)  # den ≥ ε: a normal float
        # ---- dnum = g/den as a float16 operand: 1/den·2^(126 − e_run) ≤ 1 for the tokens that count (q ≠ 0; a zero
        # query's φq is 0, so its dnum only has to be finite: the minimum)
        rmax = tl.max(tl.where(mask & (ss > 0), rden, 0.0), axis=0)
        e_tile = tl.minimum((rmax.to(tl.int32, bitcast=True) >> 23) & 255, 253)
        if e_tile > e_run:  # rare after the first tiles: the accumulators into the new units (exact powers of two)
            f = (tl.maximum(e_run - e_tile + 127, 0) << 23).to(tl.float32, bitcast=True)
            a0, a1, a2, a3, a4, a5, a6, a7 = a0 * f, a1 * f, a2 * f, a3 * f, a4 * f, a5 * f, a6 * f, a7 * f
            e_run = e_tile
        rs = tl.minimum(rden * ((253 - e_run) << 23).to(tl.float32, bitcast=True), 1.0)
        g0, g1, g2, g3 = dims4(gw)
        (dc0, dc1, dc2, dc3, ds0, ds1, ds2, ds3, a0, a1, a2, a3, a4, a5, a6, a7, gv) = _mma(
            gw.to(tl.int32), (gw >> 32).to(tl.int32), bc0, bc1, bs0, bs1, fc01, fc23, fs01, fs23,
            half2.pack_h2(g0 * rs, g1 * rs), half2.pack_h2(g2 * rs, g3 * rs), a0, a1, a2, a3, a4, a5, a6, a7, bv, s, g, t)
        # ---- dden = −(φq·(S − z·v̄ᵀ)·dnum − ε·v̄·dnum)/den with S·dnum = D·up/den
        dden = (eps_v * gv - up * token_sum(pc0 * dc0 + ps0 * ds0 + pc1 * dc1 + ps1 * ds1 + pc2 * dc2 + ps2 * ds2
                                             + pc3 * dc3 + ps3 * ds3)) * (rden * rden)
        y0, y1, y2, y3 = y0 + dden * pc0, y1 + dden * pc1, y2 + dden * pc2, y3 + dden * pc3
        w0, w1, w2, w3 = w0 + dden * ps0, w1 + dden * ps1, w2 + dden * ps2, w3 + dden * ps3
        ur = up * rden
        # ---- ∂L/∂φq = D·up/den + dden·z → ∂L/∂dir, ∂L/∂p (device.feature_grad_angle, dtanh, query_mag)
        e0, h0 = _dir_grad(dden * zc0 + dc0 * ur, dden * zs0 + ds0 * ur, pc0, ps0, c0, s0, u0, o0,
                          l0, p, ka, APPROX)
        e1, h1 = _dir_grad(dden * zc1 + dc1 * ur, dden * zs1 + ds1 * ur, pc1, ps1, c1, s1, u1, o1,
                          l1, p, ka, APPROX)
        e2, h2 = _dir_grad(dden * zc2 + dc2 * ur, dden * zs2 + ds2 * ur, pc2, ps2, c2, s2, u2, o2,
                          l2, p, ka, APPROX)
        e3, h3 = _dir_grad(dden * zc3 + dc3 * ur, dden * zs3 + ds3 * ur, pc3, ps3, c3, s3, u3, o3,
                          l3, p, ka, APPROX)
        dnrm = token_sum(h0 + h1 + h2 + h3) * (0.6931471805599453 * lam) * (1.0 - tn * tn)  # m·ln|dir| = m·l2·ln 2
        proj = token_sum(e0 * d0 + e1 * d1 + e2 * d2 + e3 * d3)
        # ---- dir = x·r and ‖x‖ = Σx²·r, r = (Σx² + 1e-12)^(-1/2)
        # dq = r·(∂L/∂dir − dir·proj) + ∂L/∂‖x‖·x·r·(2 − Σx²·r²) with x = dir/r: r·∂L/∂dir + β·dir (x not kept)
        beta = dnrm * (2.0 - ss * r * r) - r * proj
        tl.store(dqp + n0 * (so_n // 4) + ooff, word4(r * e0 + beta * d0, r * e1 + beta * d1, r * e2 + beta * d2,
                                                       r * e3 + beta * d3), mask=mask)
    # ---- the chunk's partial dS (back from units of 2^(e_run − 126)), dz summed over the lanes and slots
    st = PART + ((pid_b * H + pid_h) * n_chunks + pid_c).to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    unit = ((e_run - 126 + 127) << 23).to(tl.float32, bitcast=True)
    tl.store(st + _ds_index(s, g, t, 0, 0), a0 * unit)
    tl.store(st + _ds_index(s, g, t, 0, 1), a1 * unit)
    tl.store(st + _ds_index(s, g, t, 1, 0), a2 * unit)
    tl.store(st + _ds_index(s, g, t, 1, 1), a3 * unit)
    tl.store(st + 256 + _ds_index(s, g, t, 0, 0), a4 * unit)
    tl.store(st + 256 + _ds_index(s, g, t, 0, 1), a5 * unit)
    tl.store(st + 256 + _ds_index(s, g, t, 1, 0), a6 * unit)
    tl.store(st + 256 + _ds_index(s, g, t, 1, 1), a7 * unit)
    dims = 4 * tl.arange(0, 4)
    tl.store(st + 512 + dims, tl.sum(tl.reshape(y0, (16, 4)), axis=0))
    tl.store(st + 513 + dims, tl.sum(tl.reshape(y1, (16, 4)), axis=0))
    tl.store(st + 514 + dims, tl.sum(tl.reshape(y2, (16, 4)), axis=0))
    tl.store(st + 515 + dims, tl.sum(tl.reshape(y3, (16, 4)), axis=0))
    tl.store(st + 528 + dims, tl.sum(tl.reshape(w0, (16, 4)), axis=0))
    tl.store(st + 529 + dims, tl.sum(tl.reshape(w1, (16, 4)), axis=0))
    tl.store(st + 530 + dims, tl.sum(tl.reshape(w2, (16, 4)), axis=0))
    tl.store(st + 531 + dims, tl.sum(tl.reshape(w3, (16, 4)), axis=0))


def usable(q: Tensor, do: Tensor, dq: Tensor) -> bool:
    """Whether q, ∂L/∂o (and the contiguous dq) suit this kernel's word loads and stores: float16 (B, N, H, 16), head
    dims unit-stride, the other strides multiples of 4, 8-byte aligned data."""
    return (q.dtype == do.dtype == torch.float16 and q.shape[-1] == 16 and do.shape == q.shape == dq.shape
            and q.stride(3) == do.stride(3) == 1 and all(x % 4 == 0 for x in q.stride()[:3] + do.stride()[:3])
            and all(x.data_ptr() % 8 == 0 for x in (q, do, dq)) and dq.is_contiguous())


def launch(q: Tensor, do: Tensor, state: Tensor, dq: Tensor, part: Tensor, n: int, chunk: int, n_chunks: int,
           alpha: float, lam: float, tau: float, eps: float, approx: bool, pdl: bool = False,
           strided: bool = False, maxnreg: int | None = None) -> None:
    """The (H, chunks, B) grid over q, ∂L/∂o (B, N, H, 16) into dq and the chunks' partials (B·H·chunks·544,) with the
    forward's state (B·H, 544) float32; ``maxnreg``: a register cap (ptxas spills above it)."""
    b, _, h, _ = q.shape
    _bwd_query_rr[(h, n_chunks, b)](q, do, state, dq, part, n, h, chunk, n_chunks, q.stride(0), q.stride(1),
                                    q.stride(2), do.stride(0), do.stride(1), do.stride(2), dq.stride(0), dq.stride(1),
                                    float(alpha), float(lam), float(tau), float(eps), APPROX=approx, PDL=pdl,
                                    STRIDED=strided, num_warps=1, num_stages=1,
                                    **({"maxnreg": maxnreg} if maxnreg and COMPILED else {}))
