r"""The register reduce by k-steps: :mod:`nalasr_kernels.nala_rr` with one mma asm per (k-step, n-tile).

Same result as ``nala_rr._fwd_reduce_rr`` (one chunk's partial S = Σ φk vᵀ and z = Σ φk, tf32 products, z from the
very operands S multiplied) for the same inputs, and the same products in the same order: for every n-tile the four
k-steps of a tile chain into its accumulators one after the other, as in nala_rr's 16-mma block.

Why. nala_rr hands a tile's 16 mma of S (and the 16 of z) to one inline-asm block, whose 64 operands (v, φk's cos and
sin halves, the accumulators) are all live at that point: 125 registers under its 128 cap, which leaves room for 4
one-warp programs a scheduler, 16 an SM (each scheduler's warps draw on its own 16K registers; a cap of 112 fits no
more, and at 96 that kernel spills: nala_rr.MAXNREG). Here a tile's words are four (64,) k-step tensors (8 tokens
each) and each k-step forms its φk and runs its 8 mma (4 n-tiles of S, 4 of z) as 8 single-mma asm blocks, so nothing
forces a whole tile's feature maps to be live at once: offline (sm_90, Triton 3.6) the loop fits 96 registers
without spills, 411 instructions a tile (nala_rr: 386 with its asm loads, 462 counting its masked-load path), 5
programs a scheduler, 20 an SM (nala._PROGRAMS_PER_SM["fwd_reduce_ks"]). Not measured on the GPU yet: NALASR_REDUCE_RR_KSTEP=1 (or KSTEP)
takes it; benchmarks/compile_sm90.py --kernel fwd_reduce_rr_ks --const SK_N=64 --const SV_N=64 for the counts.

Layout. Lane (g, t) = (lane >> 2, lane & 3) holds, in k-step s, tokens t + 8s + 4·slot (slot 0, 1) and head dims
2g, 2g + 1: element e of a (64,) tensor is lane e % 32, slot e // 32, and _pair(lo, hi) makes the (128,) operands
whose 4 registers a lane are (slot, j) in order, element f = 64·slot + 8g + 2t + j. Those are nala_rr's m16n8k8 tf32
fragments for one k-step: A = vᵀ, a0..a3 = (row g, k t), (g + 8, t), (g, t + 4), (g + 8, t + 4), row g the value
column 2g and g + 8 the column 2g + 1, k slot κ token slot κ // 4; B of n-tile (half, j) = φk's half (cos, sin), its
b0, b1 the registers (slot 0, j), (slot 1, j): n slot g is dim 2g + j; D of n-tile (half, j): register (slot, jj)
is row g + 8·slot (value column 2g + slot), n slot 2t + jj (dim 2(2t + jj) + j).

Interpreter (TRITON_INTERPRET=1, no PTX): each mma is tl.dot on those fragments rearranged as (16 rows, 8 tokens)
and (8 tokens, 8 n) matrices, whose (16, 8) product is already in D's register order.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from .nala import _COMPILED, _INTERPRET, _forced, _pdl_launch, _slab
from .nala_rr import _features, _pair

KSTEP = False  # see the module docstring; NALASR_REDUCE_RR_KSTEP=0|1 overrides
MAXNREG = 96  # 5 one-warp programs a scheduler (5 · 96 · 32 ≤ 16K registers), 20 an SM


def _mma_asm(ones_a: bool, j: int) -> str:
    """One mma.sync m16n8k8 tf32: D $0-$3; A $4-$7 unless ``ones_a`` (all ones: z in every row); B the registers j
    and j + 2 of the next four (the n-tile of dims 2n + j); C the four after those."""
    b0 = 4 if ones_a else 8
    c0 = b0 + 4
    a = "one,one,one,one" if ones_a else "$4,$5,$6,$7"
    head = "{ .reg .b32 one; mov.b32 one, 0x3F800000; " if ones_a else "{ "
    return (head + f"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{$0,$1,$2,$3}}, {{{a}}}, "
            f"{{${b0 + j},${b0 + 2 + j}}}, {{${c0},${c0 + 1},${c0 + 2},${c0 + 3}}}; }}")


_S0 = tl.constexpr(_mma_asm(False, 0))
_S1 = tl.constexpr(_mma_asm(False, 1))
_Z0 = tl.constexpr(_mma_asm(True, 0))
_Z1 = tl.constexpr(_mma_asm(True, 1))
_S_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 4 + ["r"] * 12))
_Z_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 4 + ["r"] * 8))


@triton.jit
def _rows_by_tokens(a):
    """Interpreter: A's (128,) fragment as the (16 rows 8j + g, 8 tokens 4·slot + t) matrix."""
    return tl.reshape(tl.permute(tl.reshape(a, (2, 8, 4, 2)), (3, 1, 0, 2)), (16, 8))


@triton.jit
def _tokens_by_n(b, J: tl.constexpr):
    """Interpreter: B's (128,) operand, registers (slot, J) of every lane, as the (8 tokens 4·slot + t, 8 n = g)
    matrix."""
    lo, hi = tl.split(tl.reshape(b, (2, 8, 4, 2)))  # (slot, g, t) each
    x = lo if J == 0 else hi
    return tl.reshape(tl.permute(x, (0, 2, 1)), (8, 8))


@triton.jit
def _mma_s(a, b, acc, J: tl.constexpr):
    """acc + one k-step's product for the n-tile of dims 2n + J: a = v, b = a half of φk, acc (128,) (see Layout)."""
    if _COMPILED:
        if J == 0:
            out = tl.inline_asm_elementwise(_S0, _S_CONSTRAINTS, [a, b, acc], dtype=tl.float32, is_pure=True,
                                            pack=4)
        else:
            out = tl.inline_asm_elementwise(_S1, _S_CONSTRAINTS, [a, b, acc], dtype=tl.float32, is_pure=True,
                                            pack=4)
    else:
        out = acc + tl.reshape(tl.dot(_rows_by_tokens(a), _tokens_by_n(b, J), input_precision="tf32"), (128,))
    return out


@triton.jit
def _mma_z(b, acc, J: tl.constexpr):
    """acc + one k-step's Σ φk of the n-tile of dims 2n + J in every row (an all-ones A, tf32 as for S)."""
    if _COMPILED:
        if J == 0:
            out = tl.inline_asm_elementwise(_Z0, _Z_CONSTRAINTS, [b, acc], dtype=tl.float32, is_pure=True, pack=4)
        else:
            out = tl.inline_asm_elementwise(_Z1, _Z_CONSTRAINTS, [b, acc], dtype=tl.float32, is_pure=True, pack=4)
    else:
        ones = tl.full((16, 8), 1.0, tl.float32)
        out = acc + tl.reshape(tl.dot(ones, _tokens_by_n(b, J), input_precision="tf32"), (128,))
    return out


@triton.jit
def _kstep(kk, vv, s0, s1, s2, s3, z0, z1, z2, z3, alpha, lam, DT: tl.constexpr, LAM_INT: tl.constexpr,
           APPROX: tl.constexpr, CLAMP: tl.constexpr):
    """One k-step: φk of its 8 tokens (kk, vv: (64,) int32 pairs of k and v) into the accumulators of S's n-tiles
    (s0, s1: cos of dims 2n, 2n + 1; s2, s3: sin) and of z's (z0-z3, the same order)."""
    v0, v1, pc0, pc1, ps0, ps1 = _features(kk, vv, alpha, lam, DT, LAM_INT, APPROX, CLAMP)
    bc = _pair(pc0, pc1)
    bs = _pair(ps0, ps1)
    a = _pair(v0, v1)
    s0 = _mma_s(a, bc, s0, 0)
    s1 = _mma_s(a, bc, s1, 1)
    s2 = _mma_s(a, bs, s2, 0)
    s3 = _mma_s(a, bs, s3, 1)
    z0 = _mma_z(bc, z0, 0)
    z1 = _mma_z(bc, z1, 1)
    z2 = _mma_z(bs, z2, 0)
    z3 = _mma_z(bs, z3, 1)
    return s0, s1, s2, s3, z0, z1, z2, z3


@triton.jit
def _words(tile, S: tl.constexpr, stride, off, tok, left):
    """K-step S's (64,) int32 pairs of a tile whose token 0 is at ``tile``: tokens 8S + tok, those < left (0 past
    it), ``off`` pairs into their rows. With static strides 8S·stride is an immediate offset of one tile address."""
    return tl.load(tile + (8 * S) * stride + off, mask=tok + 8 * S < left, other=0)


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _fwd_reduce_rr_ks(K, V, PART, N, CHUNK, n_chunks, H, sk_b, sk_h, sv_b, sv_h, alpha, lam,
                      LAM_INT: tl.constexpr, APPROX: tl.constexpr, CLAMP: tl.constexpr, SK_N: tl.constexpr,
                      SV_N: tl.constexpr, PDL: tl.constexpr = False):
    """Partial Σφk vᵀ and Σφk over one chunk of one (b, h) → PART[b, h, chunk, :], as nala_rr._fwd_reduce_rr with
    its strides static (SK_N, SV_N: k's and v's token strides in elements)."""
    _pdl_launch(PDL)
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    e = tl.arange(0, 64)
    lane = e % 32
    g = lane // 4
    t = lane % 4
    # (nala_rr's prologue, kept inline in both: through a shared helper nala_rr's loop compiled differently offline,
    # 96 of its 462 instructions beyond register names, which it must not without a measurement)
    kp = _slab(K, pid_b, pid_h, sk_b, sk_h).to(tl.pointer_type(tl.int32))
    vp = _slab(V, pid_b, pid_h, sv_b, sv_h).to(tl.pointer_type(tl.int32))
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    skp: tl.constexpr = SK_N // 2  # static strides only: the k-steps' offsets 8s·stride are immediates
    svp: tl.constexpr = SV_N // 2
    tok = t + 4 * (e // 32)  # the k-step's token of the element; k-step s adds 8s
    koff = tok * skp + g
    voff = tok * svp + g
    dt = K.dtype.element_ty
    # Tokens past the end load as 0: φk(0) = 0, v = 0, they add nothing to S or z.
    kt, vt, left = kp + start * skp, vp + start * svp, end - start
    k0, k1, k2, k3 = (_words(kt, 0, skp, koff, tok, left), _words(kt, 1, skp, koff, tok, left),
                      _words(kt, 2, skp, koff, tok, left), _words(kt, 3, skp, koff, tok, left))
    w0, w1, w2, w3 = (_words(vt, 0, svp, voff, tok, left), _words(vt, 1, svp, voff, tok, left),
                      _words(vt, 2, svp, voff, tok, left), _words(vt, 3, svp, voff, tok, left))
    zero = tl.zeros((64,), dtype=tl.float32)
    s0 = _pair(zero, zero)  # built like the operands, so they have their layout
    s1 = _pair(zero, zero)
    s2 = _pair(zero, zero)
    s3 = _pair(zero, zero)
    z0 = _pair(zero, zero)
    z1 = _pair(zero, zero)
    z2 = _pair(zero, zero)
    z3 = _pair(zero, zero)
    for n0 in tl.range(start, end, 32):
        kk0, kk1, kk2, kk3 = k0, k1, k2, k3
        vv0, vv1, vv2, vv3 = w0, w1, w2, w3
        kt, vt, left = kp + (n0 + 32) * skp, vp + (n0 + 32) * svp, end - n0 - 32  # the next tile, in flight
        k0, k1, k2, k3 = (_words(kt, 0, skp, koff, tok, left), _words(kt, 1, skp, koff, tok, left),
                          _words(kt, 2, skp, koff, tok, left), _words(kt, 3, skp, koff, tok, left))
        w0, w1, w2, w3 = (_words(vt, 0, svp, voff, tok, left), _words(vt, 1, svp, voff, tok, left),
                          _words(vt, 2, svp, voff, tok, left), _words(vt, 3, svp, voff, tok, left))
        s0, s1, s2, s3, z0, z1, z2, z3 = _kstep(kk0, vv0, s0, s1, s2, s3, z0, z1, z2, z3, alpha, lam, dt, LAM_INT,
                                                APPROX, CLAMP)
        s0, s1, s2, s3, z0, z1, z2, z3 = _kstep(kk1, vv1, s0, s1, s2, s3, z0, z1, z2, z3, alpha, lam, dt, LAM_INT,
                                                APPROX, CLAMP)
        s0, s1, s2, s3, z0, z1, z2, z3 = _kstep(kk2, vv2, s0, s1, s2, s3, z0, z1, z2, z3, alpha, lam, dt, LAM_INT,
                                                APPROX, CLAMP)
        s0, s1, s2, s3, z0, z1, z2, z3 = _kstep(kk3, vv3, s0, s1, s2, s3, z0, z1, z2, z3, alpha, lam, dt, LAM_INT,
                                                APPROX, CLAMP)
    f = tl.arange(0, 128)  # register (slot, jj) = (f // 64, f % 2) of lane (g, t) = ((f // 8) % 8, (f // 2) % 4)
    col = 2 * ((f // 8) % 8) + f // 64  # value column of row g + 8·slot
    n = 2 * ((f // 2) % 4) + f % 2  # n slot 2t + jj: dim 2n + j of n-tile j
    st = PART + ((pid_b * H + pid_h) * n_chunks + pid_c).to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    tl.store(st + (2 * n) * 16 + col, s0)  # [S_cos (16×16) | S_sin | z_cos (16) | z_sin (16)], S as dim · 16 + col
    tl.store(st + (2 * n + 1) * 16 + col, s1)
    tl.store(st + 256 + (2 * n) * 16 + col, s2)
    tl.store(st + 256 + (2 * n + 1) * 16 + col, s3)
    first = col == 0  # every row of the ones product is z
    tl.store(st + 512 + 2 * n, z0, mask=first)
    tl.store(st + 512 + 2 * n + 1, z1, mask=first)
    tl.store(st + 528 + 2 * n, z2, mask=first)
    tl.store(st + 528 + 2 * n + 1, z3, mask=first)


def wanted() -> bool:
    """Whether the forward's register reduce runs by k-steps: NALASR_REDUCE_RR_KSTEP (0 or 1), else KSTEP."""
    forced = _forced("NALASR_REDUCE_RR_KSTEP", ("0", "1"))
    return KSTEP if forced is None else forced == "1"


def launch(k: Tensor, v: Tensor, part: Tensor, n: int, chunk: int, n_chunks: int, alpha: float, lam: float,
           lam_int: int, approx: bool, clamp: bool, maxnreg: int | None = MAXNREG, pdl: bool = False) -> None:
    """As nala_rr.launch (the (H, chunks, B) grid over k, v (B, N, H, 16) into part), by k-steps, the token strides
    compiled in (one compile per stride pair, as nala_rr.STATIC_STRIDES)."""
    b, _, h, _ = k.shape
    extra = {} if _INTERPRET or not maxnreg else {"maxnreg": maxnreg}
    _fwd_reduce_rr_ks[(h, n_chunks, b)](k, v, part, n, chunk, n_chunks, h, k.stride(0), k.stride(2), v.stride(0),
                                        v.stride(2), float(alpha), float(lam),
                                        LAM_INT=lam_int, APPROX=approx, CLAMP=clamp, PDL=pdl,
                                        SK_N=k.stride(1), SV_N=v.stride(1),
                                        num_warps=1, num_stages=1, **extra)

