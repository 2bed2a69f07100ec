r"""The forward map with its products issued from registers: ``fwd_map_pair_kernel`` without shared memory.

Same result as :func:`nalasr_kernels.nala.fwd.fwd_map_pair_kernel` (HALF2: φq in float16 pairs, S and z scaled into float16,
o = num·up / (den + ε)) for the model's case: float16 q with unit-stride head dims, D = Dv = 16, an even head count, o
contiguous. ``nala_forward`` picks it where ``plan.map_rr`` says so.

Why. tl.dot takes its operands through shared memory: the pair map stores φq there and reads it back as mma
fragments, and its warps wait on that. But the
product o = φq·S does not care which head dim sits in which k slot of an mma, as long as S's rows follow. So each lane
(g, t) = (lane >> 2, lane & 3) of a one-warp program loads what its m16n8k16 float16 A fragments need: of the tokens
g, g + 8 of each 16-token m-tile, head dims 4t .. 4t + 3 (one 8-byte load a token and head). A token's 16 dims then sit
in the 4 lanes that share g (its norm: two xor-shuffles), the features run on those registers and come out as the
float16 pairs the fragments hold: k slots 2t, 2t + 1 are dims 4t, 4t + 1, k slots 2t + 8, 2t + 9 are dims 4t + 2, 4t + 3
(k-step 0 the cos half, 1 the sin half). S's B fragments (rows: those k slots; columns chosen so that a lane's outputs
of a token are 4 adjacent value columns, see _state_rr) and z's (every column z, so every column of that product is den) are loaded once a program.

Layout. The per-lane tensors are 1-D (128,): element e is lane e % 32, slot s = e // 32 (Triton's one-warp blocked
layout, kept because _opaque hides the lanes' neighbouring words from the coalescing pass), and slot s holds token
8s + g of the 32-token tile (m-tile s // 2, row g + 8·(s % 2)). The state's B words fill the four slots of three
tensors a head, so every register of them is used (see _state_rr). mma fragments
(PTX ISA, m16n8k16 .f16): A a0 = (row g, cols 2t, 2t + 1), a1 = (row g + 8, cols 2t, 2t + 1), a2 / a3 the same at
cols + 8; B b0 = (rows 2t, 2t + 1, col g), b1 = (rows 2t + 8, 2t + 9, col g); C c0, c1 = (row g, cols 2t, 2t + 1), c2, c3
= (row g + 8, cols 2t, 2t + 1).

Interpreter (TRITON_INTERPRET=1, no PTX): the shuffles are gathers and the products tl.dot on the same float16 values
rearranged into (token, dim) matrices and back into the fragments' order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import half2
from .device import COMPILED, FLT_MIN_NORMAL, log2_fast, pdl_launch, pdl_wait, pow2_scale, span, tanh_any
from .lanes import F16_MMA, dims4, lane_ids, to_words, token_sum, tokens_by_dim, word4, word_slab

TILE_TOKENS = 32  # tokens a loop iteration: two m-tiles of 16; chunks are multiples of it


def _mma_asm() -> str:
    """One head's 12 mma.sync m16n8k16 (f16 in, f32 out) over a 32-token tile: for each m-tile, n-tiles 0 and 1 of
    S and the z n-tile, each a cos k-step then a sin k-step. Operands, 4 registers (slots) each: D o(value column 4t)
    $0-$3, o(4t + 1) $4-$7, o(4t + 2) $8-$11, o(4t + 3) $12-$15, den $16-$19; A cos dims 4t, 4t + 1 $20-$23,
    4t + 2, 4t + 3 $24-$27, A sin $28-$31, $32-$35; B (see _state_rr) S cos $36-$39, S sin $40-$43, z $44-$47."""
    def o(k: int, slot: int) -> str:
        return f"${4 * k + slot}"

    def i(k: int, slot: int) -> str:
        return f"${20 + 4 * k + slot}"

    lines = ["{", ".reg .b32 zr, x0, x1;", "mov.b32 zr, 0;"]
    for mt in range(2):
        s0, s1 = 2 * mt, 2 * mt + 1
        a_c = ",".join([i(0, s0), i(0, s1), i(1, s0), i(1, s1)])
        a_s = ",".join([i(2, s0), i(2, s1), i(3, s0), i(3, s1)])
        for nt in range(3):
            if nt < 2:
                d = ",".join([o(2 * nt, s0), o(2 * nt + 1, s0), o(2 * nt, s1), o(2 * nt + 1, s1)])
                bc, bs = f"{i(4, 2 * nt)},{i(4, 2 * nt + 1)}", f"{i(5, 2 * nt)},{i(5, 2 * nt + 1)}"
            else:
                d = ",".join([o(4, s0), "x0", o(4, s1), "x1"])  # columns 2t + 1: den again
                bc, bs = f"{i(6, 0)},{i(6, 1)}", f"{i(6, 2)},{i(6, 3)}"
            lines.append(f"{F16_MMA} {{{d}}}, {{{a_c}}}, {{{bc}}}, {{zr,zr,zr,zr}};")
            lines.append(f"{F16_MMA} {{{d}}}, {{{a_s}}}, {{{bs}}}, {{{d}}};")
    return "\n".join(lines + ["}"])


_MMA = tl.constexpr(_mma_asm())
_MMA_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 20 + ["r"] * 28))


@triton.jit
def _state_matrix(b):
    """Interpreter: S's B words (see _state_rr) → the (16 dims, 16 columns) float16 values as float32."""
    x = tl.reshape(to_words(b), (2, 2, 4, 2, 4, 2))  # (nt, p, g // 2, g % 2, t, w): dim 4t + 2p + w
    return tl.reshape(tl.permute(x, (4, 1, 5, 2, 0, 3)), (16, 16))  # column 4·(g // 2) + 2nt + g % 2


@triton.jit
def _z_vectors(b):
    """Interpreter: z's B words (see _state_rr) → z_cos, z_sin (16,) as float16 values in float32."""
    x = tl.reshape(to_words(b), (2, 2, 8, 4, 2))  # (half, p, g, t, w): dim 4t + 2p + w, the same for every g
    x = tl.sum(tl.where((tl.arange(0, 8) == 0)[None, None, :, None, None], x, 0.0), axis=2)  # lanes g = 0 (exact)
    return tl.split(tl.reshape(tl.permute(x, (2, 1, 3, 0)), (16, 2)))


@triton.jit
def _mma(fc01, fc23, fs01, fs23, bc, bs, bz):
    """One head's tile: φq's (128,) words (cos / sin; dims 4t, 4t + 1 and 4t + 2, 4t + 3) against S's and z's B words
    → num at value columns 4t .. 4t + 3 and den, each (128,) float32 (slot i = e // 32: token 8i + g)."""
    if COMPILED:
        o00, o01, o10, o11, den = tl.inline_asm_elementwise(
            _MMA, _MMA_CONSTRAINTS, [fc01, fc23, fs01, fs23, bc, bs, bz],
            dtype=(tl.float32, tl.float32, tl.float32, tl.float32, tl.float32), is_pure=True, pack=4)
    else:
        fc = tokens_by_dim(fc01, fc23)
        fs = tokens_by_dim(fs01, fs23)
        num = tl.dot(fc, _state_matrix(bc), input_precision="ieee")
        num = tl.dot(fs, _state_matrix(bs), num, input_precision="ieee")
        zc, zs = _z_vectors(bz)
        d = tl.sum(fc * zc[None, :], axis=1) + tl.sum(fs * zs[None, :], axis=1)
        x = tl.reshape(num, (128, 2, 2))  # (slot, g, t, nt, w): column 4t + 2nt + w
        w0, w1 = tl.split(x)
        o00, o10 = tl.split(w0)
        o01, o11 = tl.split(w1)
        den = tl.reshape(tl.broadcast_to(tl.reshape(d, (4, 8, 1)), (4, 8, 4)), (128,))
    return o00, o01, o10, o11, den


@triton.jit
def _state_rr(STATE, bh, eps, s, g, t):
    """One (b, h)'s B words (float16 pairs; S scaled into float16 by a power of two, z likewise) and the output factor
    and ε that undo the scales (as fwd._state_h2). Slot s of lane (g, t): S (bc cos, bs sin) n-tile s // 2, rows
    4t + 2·(s % 2), + 1 of column 4·(g // 2) + 2·(s // 2) + g % 2 (n-tile nt's columns 2t, 2t + 1 are value columns
    4t + 2nt, + 1, so a lane's four outputs of a token are 4 adjacent columns: one 8-byte store); z (bz) half s // 2,
    dims 4t + 2·(s % 2), + 1."""
    st = STATE + bh.to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    smax = tl.max(tl.abs(tl.load(st + tl.arange(0, 512))), axis=0)
    zmax = tl.max(tl.abs(tl.load(st + 512 + tl.arange(0, 32))), axis=0)
    down, up = pow2_scale(smax)
    zd, _ = pow2_scale(zmax)
    row = (4 * t + 2 * (s % 2)) * 16 + 4 * (g // 2) + 2 * (s // 2) + g % 2  # the pair's second row is 16 floats on
    bc = half2.pack_h2(tl.load(st + row) * down, tl.load(st + row + 16) * down)
    bs = half2.pack_h2(tl.load(st + 256 + row) * down, tl.load(st + 272 + row) * down)
    zrow = st + 512 + 16 * (s // 2) + 4 * t + 2 * (s % 2)  # z's pairs are adjacent
    bz = half2.pack_h2(tl.load(zrow) * zd, tl.load(zrow + 1) * zd)
    return bc, bs, bz, up * zd, eps * zd


@triton.jit
def _head(w, alpha, lga, lam, tau, APPROX: tl.constexpr):
    """φq of one head's (128,) int64 words (dims 4t .. 4t + 3 of token 8s + g) → the cos and sin pair words."""
    x0, x1, x2, x3 = dims4(w)
    ss = token_sum(x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3)
    r = tl.rsqrt(ss + 1e-12)
    p = lam * (tau + tanh_any(ss * r, APPROX))  # m = |dir|^p as 2^(p·log2|xa| − p·log2|α|) (device.query_mag_fwd)
    plga = p * lga
    ar = alpha * r
    xa0, xa1, xa2, xa3 = x0 * ar, x1 * ar, x2 * ar, x3 * ar
    m0 = tl.exp2(p * log2_fast(tl.abs(xa0)) - plga)
    m1 = tl.exp2(p * log2_fast(tl.abs(xa1)) - plga)
    m2 = tl.exp2(p * log2_fast(tl.abs(xa2)) - plga)
    m3 = tl.exp2(p * log2_fast(tl.abs(xa3)) - plga)
    fc01, fs01 = half2.features_pairs(m0, m1, xa0, xa1)
    fc23, fs23 = half2.features_pairs(m2, m3, xa2, xa3)
    return fc01, fc23, fs01, fs23


@triton.jit
def _store_head(op, o00, o01, o10, o11, den, up, eps, mask):
    """o = num·up / (den + ε) of one head's tile as float16: columns 4t .. 4t + 3 of each token, one 8-byte word at op.
    Storing columns 2t, 2t + 1 and 8 + 2t, 9 + 2t as two 4-byte words (16-byte halves of a token's
    32-byte sector a store) took the pass to 75 µs at 518K against the pair map's 48.5."""
    f = up * half2.rcp_fast(tl.maximum(den + eps, FLT_MIN_NORMAL))
    tl.store(op, word4(o00 * f, o01 * f, o10 * f, o11 * f), mask=mask)


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _fwd_map_rr(Q, STATE, O, N, H, CHUNK, n_chunks, sq_b, sq_n, sq_h, so_b, so_n, alpha, lam, tau, eps,
                APPROX: tl.constexpr, PDL: tl.constexpr = False, STRIDED: tl.constexpr = False):
    """o of heads 2·program_id(0), 2·program_id(0) + 1 over one chunk of queries (one warp). q: (B, N, H, 16) float16,
    head dims unit-stride, the other strides multiples of 4 and the data 8-byte aligned; o: (B, N, H, 16) contiguous.
    CHUNK a multiple of TILE_TOKENS. STRIDED: see plan.STRIDED."""
    pdl_launch(PDL)
    pid_p, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    h0 = 2 * pid_p
    s, g, t, tok = lane_ids(128)
    qa = word_slab(Q, pid_b, h0, sq_b, sq_h)
    qb = word_slab(Q, pid_b, h0 + 1, sq_b, sq_h)
    o_base = word_slab(O, pid_b, h0, so_b, 16)
    qoff = tok * (sq_n // 4) + t
    ooff = tok * (so_n // 4) + t  # columns 4t .. 4t + 3: word t of the head's 4
    start, end, step = span(pid_c, CHUNK, N, n_chunks, 32, STRIDED)
    wa_next = tl.load(qa + start * (sq_n // 4) + qoff, mask=start + tok < end, other=0)
    wb_next = tl.load(qb + start * (sq_n // 4) + qoff, mask=start + tok < end, other=0)
    pdl_wait(PDL)  # STATE comes from the combine before
    bca, bsa, bza, upa, epa = _state_rr(STATE, pid_b * H + h0, eps, s, g, t)
    bcb, bsb, bzb, upb, epb = _state_rr(STATE, pid_b * H + h0 + 1, eps, s, g, t)
    lga = log2_fast(tl.abs(alpha))
    for n0 in tl.range(start, end, step):
        wa = wa_next
        wb = wb_next
        left = end - n0 - step
        wa_next = tl.load(qa + (n0 + step) * (sq_n // 4) + qoff, mask=tok < left, other=0)
        wb_next = tl.load(qb + (n0 + step) * (sq_n // 4) + qoff, mask=tok < left, other=0)
        mask = n0 + tok < end
        op = o_base + n0 * (so_n // 4) + ooff
        fc01, fc23, fs01, fs23 = _head(wa, alpha, lga, lam, tau, APPROX)
        o00, o01, o10, o11, den = _mma(fc01, fc23, fs01, fs23, bca, bsa, bza)
        _store_head(op, o00, o01, o10, o11, den, upa, epa, mask)
        fc01, fc23, fs01, fs23 = _head(wb, alpha, lga, lam, tau, APPROX)
        o00, o01, o10, o11, den = _mma(fc01, fc23, fs01, fs23, bcb, bsb, bzb)
        _store_head(op + 4, o00, o01, o10, o11, den, upb, epb, mask)


def usable(q: Tensor, o: Tensor) -> bool:
    """Whether q and o suit this kernel's word loads and stores: float16 (B, N, H, 16), H even, q's head dims
    unit-stride with its other strides multiples of 4 and 8-byte aligned data, o contiguous and 8-byte aligned."""
    return (q.dtype == torch.float16 and q.shape[-1] == 16 and q.shape[2] % 2 == 0 and q.stride(3) == 1
            and all(s % 4 == 0 for s in q.stride()[:3]) and q.data_ptr() % 8 == 0 and o.is_contiguous()
            and o.shape == q.shape and o.data_ptr() % 8 == 0)


def launch(q: Tensor, state: Tensor, o: Tensor, n: int, chunk: int, n_chunks: int, alpha: float, lam: float,
           tau: float, eps: float, approx: bool, pdl: bool = False, strided: bool = False) -> None:
    """The (H/2, chunks, B) grid over q (B, N, H, 16) into o with the combined state (B·H, 544) float32; ``pdl``: PDL
    (plan.pdl), ``strided``: tile-strided chunks."""
    b, _, h, _ = q.shape
    _fwd_map_rr[(h // 2, n_chunks, b)](q, state, o, n, h, chunk, n_chunks, q.stride(0), q.stride(1), q.stride(2),
                                       o.stride(0), o.stride(1), float(alpha), float(lam), float(tau), float(eps),
                                       APPROX=approx, PDL=pdl, STRIDED=strided, num_warps=1, num_stages=1,
                                       **({"launch_pdl": True} if pdl else {}))
