r"""The forward reduce with its products issued from registers: ``fwd_reduce_kernel`` without shared memory.

Same result as :func:`nalasr_kernels.nala.fwd.fwd_reduce_kernel` with ZDOT (one chunk's partial S = Σ φk vᵀ and z = Σ φk,
tf32 products, z from the very operands S multiplied), for the model's case: 16-bit k and v with unit-stride head
dims, D = Dv = 16, no RoPE. ``nala_forward`` picks it there (see ``plan.reduce_rr``).

Why. tl.dot takes its operands from shared memory: ``fwd_reduce_kernel`` stores φk and v there and reads them back as
mma fragments (12 st.shared.b128, 48 ld.shared and a barrier per warp and 32 tokens), and on the H200 its warps
wait on that. But S += Σ_j φk_j v_jᵀ does not care which token sits in which k slot of an mma, nor which
head dim in which row or column of S, as long as the final store undoes it. So each lane (g, t) = (lane >> 2,
lane & 3) of a one-warp program loads exactly what its m16n8k8 tf32 fragments need, as 32-bit pairs of 16-bit
values: tokens t + 4i (i = 0..7) of a 32-token tile, head dims 2g and 2g + 1 of k and of v. A token's 16 dims
then sit in the 8 lanes that share t (its norm: three xor-shuffles), the feature map runs on those registers,
and 16 mma.sync (4 k-steps of 8 tokens × 4 n-tiles: cos / sin of dims 2g / 2g + 1) accumulate Sᵀ, 16 more with
an all-ones A accumulate z. H200, 518K tokens, 4 heads of 16: 59.7 µs in the forward (57.4 alone) against
fwd_reduce_kernel's 67.1.

Layout. The per-lane tensors are 1-D: element e of a (256,) tensor is lane e % 32, slot i = e // 32 — Triton's
default one-warp blocked layout, which it keeps because the offsets are not contiguous; reshape(join(lo, hi))
gives (512,) operands whose 16 registers per lane are (i, j = lo / hi) in order, which is the order
inline_asm_elementwise hands one pack of 16 to the mma block. The mma fragments
(PTX ISA, m16n8k8 .tf32): A a0..a3 = (row g, col t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B b0, b1 = (row t, col
g), (t + 4, g); C c0..c3 = (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). Here A = vᵀ (rows: value columns, row
slot g is column 2g and g + 8 is 2g + 1; cols: k slots, slot κ of k-step s is token 8s + κ), B = φk (n slot n of
n-tile 0/1 is the cos of dim 2n / 2n + 1, of n-tile 2/3 the sin), so accumulator register (i, j) of lane (g, t)
holds half i // 4 (cos, sin), value column 2g + i % 2, dim 4t + 2j + (i // 2) % 2.

Interpreter (TRITON_INTERPRET=1, no PTX): the shuffles are gathers and each mma block is tl.dot on the same values
rearranged into (token, dim) matrices and back into the fragments' order, so a CPU run checks the index arithmetic
the GPU runs.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch import Tensor

from .device import COMPILED, INTERPRET, angle_of, key_mag, pdl_launch, sincos_angle, slab_ptr
from .lanes import lane_xor, unpack

TILE_TOKENS = 32  # tokens a loop iteration (the kernel's literal 32): 4 k-steps of 8; chunks are multiples of it
MAXNREG = 128  # 16 one-warp programs an SM; uncapped it takes 166 registers and ran 71.4 µs at 16 an SM
# Each scheduler's warps take registers from its own quarter of the file (16K), so any cap above 96 leaves 4 one-warp
# programs a scheduler: at 112 (no spills offline) 18 an SM took 68.6 against 52.9 µs at 518K, as a second wave; at 96
# (5 a scheduler, 96 B of spills) 20 an SM took 61.5-61.7.
# The same products one k-step at a time fit 96 registers without spills (20 an SM) but ran 52.3-53.8 against
# 51.2-52.4 µs.
# The token strides of k and v as constexprs (one compile per stride pair; the model passes one). With them ptxas
# fits the loop in 125 registers under the cap and issues all 16 of the next tile's loads within its first 123 of
# 474 instructions; with runtime strides 11 of them come after instruction 253 of 471, leaving them a fraction of a
# step to arrive.
# On the H200 at 518K: 55.3-55.7 against 55.7-55.9 µs alone, 56.7-57.1 against 57.7-58.3 in the forward, the forward
# 115.4-116.5 against 117.1-118.0.
STATIC_STRIDES = True
# With static strides, the loop's loads of a whole next tile (all but a chunk's last) as inline PTX with the 8 slots'
# offsets as immediates (_load8), one 64-bit address a tensor and tile: tl.load hands ptxas each of the 16 addresses
# as an opaque operand of its own inline asm, so the loop formed all 16 (32 IADD3) and their masks and zeroed
# destinations (16 ISETP / LOP3, 16 MOV) every tile. Offline sm_90: 455 → 402 loop instructions on the whole-tile
# path.
# On the H200 at 518K: 52.2-52.8 against 54.7-54.9 µs alone, the forward 0.110-0.111 against 0.112-0.113 ms, at 1M
# 0.207-0.208 against 0.215-0.216. Unrolled by two on top: 57.6-57.7.
ASM_LOADS = True
# The products with φk as A and [v | 1] as B (S = φkᵀ·v: 2 m-tiles of 16 dims, cos and sin, × 2 n-tiles of 8 value
# columns, and z from a third n-tile of ones) instead of vᵀ as A against φk's 4 n-tiles and an all-ones A for z:
# 24 mma a tile instead of 32, and 24 accumulator registers instead of 32 (z's product fills 8 of 8 columns' rows
# with one value where the ones A filled 16 rows). The same tf32 operands, the loads and features unchanged. Offline
# sm_90: 396 → 384 loop instructions on the whole-tile path, 127 → 116 registers. On the H200 at 518K dense, each
# setting its own process: the pass 48.8-49.0 against 51.4-52.0 µs, the forward 0.101-0.102 against
# 0.104-0.105 ms, at 1M 0.185 against 0.191-0.192. In
# one process (rr_cap_gpu.py, the old layout first) both took 49.3-49.6 at 518K: unexplained. Capped at 96 registers
# (no spills offline) for 20 programs an SM: 51.9-52.1 µs, slower.
FEAT_A = True
# Measured alternative: the tiles through a ring of shared memory, cp.async of the tile STAGES − 1 ahead
# into a .shared array of the kernel's own inline PTX, the mma words read back by ld.shared (STAGES − 1 tiles in
# flight for no registers; offline 445 against 386 loop instructions). On the H200 at 518K dense the pass took
# 57.1 / 56.9 against 51.2 / 51.3 µs, the forward graph 0.109-0.110 against 0.105 ms (3 slots); 2, 4 and 6 slots no
# better.


def _mma_feat_asm(z: bool) -> str:
    """FEAT_A's mma.sync m16n8k8 tf32 over one tile, φk as A (rows: row slot g is dim 2g, g + 8 is dim 2g + 1; m-tile
    0 the cos half, 1 the sin half). ``z`` False: B = v (n-tile 0: column slot g is value column 2g, n-tile 1: 2g + 1),
    16 products: D $0-$15 (m-tile mt, n-tile nt: $8mt+4nt..), A cos $16-$31 and A sin $32-$47 (register 4s + 2·slot
    + j, as _mma_asm's B), B $48-$63 (the same order: register 4s + 2·slot + nt), C in $64-$79. ``z`` True: B all ones
    (every column of D is z), 8 products over the lane's (8,) per-slot registers: D $0-$7 (m-tile mt: $4mt..), A from
    φk cos of dims 2g, 2g + 1 ($8-$15, $16-$23: slot i) and sin ($24-$31, $32-$39), C in $40-$47."""
    lines = ["{", ".reg .b32 one;", "mov.b32 one, 0x3F800000;"] if z else []
    for s in range(4):
        for mt in range(2):
            for nt in range(1 if z else 2):
                if z:
                    d = [f"${4 * mt + c}" for c in range(4)]
                    j0, j1 = 8 + 16 * mt, 16 + 16 * mt  # dim 2g, 2g + 1 of this half
                    a = [f"${j0 + 2 * s}", f"${j1 + 2 * s}", f"${j0 + 2 * s + 1}", f"${j1 + 2 * s + 1}"]
                    b = ["one", "one"]
                    cin = [f"${40 + 4 * mt + c}" for c in range(4)] if s == 0 else d
                else:
                    d = [f"${8 * mt + 4 * nt + c}" for c in range(4)]
                    a = [f"${16 + 16 * mt + 4 * s + c}" for c in range(4)]
                    b = [f"${48 + 4 * s + nt}", f"${48 + 4 * s + 2 + nt}"]
                    cin = [f"${64 + 8 * mt + 4 * nt + c}" for c in range(4)] if s == 0 else d
                lines.append("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                             f"{{{','.join(d)}}}, {{{','.join(a)}}}, {{{','.join(b)}}}, {{{','.join(cin)}}};")
    return "\n".join(lines + (["}"] if z else []))


_MMA_FS = tl.constexpr(_mma_feat_asm(False))
_MMA_FZ = tl.constexpr(_mma_feat_asm(True))
_MMA_FZ_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 8 + ["r"] * 40))
_MMA_S_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 16 + ["r"] * 64))


@functools.lru_cache(maxsize=16)
def load8_asm(stride_pairs: int) -> str:
    """PTX of one lane's 8 loads of a tile (see ASM_LOADS): slot i (token t + 4i) at [$8 + 16·stride_pairs·i] bytes,
    $8 the lane's address of slot 0, $0-$7 the 32-bit pairs loaded."""
    return " ".join(f"ld.global.b32 ${i}, [$8+{16 * stride_pairs * i}];" for i in range(8))


_LD8_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 8 + ["l"] * 8))


@triton.jit
def _load8(lanep, ASM: tl.constexpr):
    """A whole tile's (256,) int32 pairs of k or v: ``lanep`` holds the lane's slot-0 address in every slot (one
    64-bit add a tile), ASM = :func:`load8_asm` of the token stride (the 8 addresses as immediate offsets)."""
    return tl.inline_asm_elementwise(ASM, _LD8_CONSTRAINTS, [lanep], dtype=tl.int32, is_pure=True, pack=8)


@triton.jit
def _pair(lo, hi):
    """(256,) lo / hi → the (512,) operand (f = 2e + j): a lane's registers (i, j), j fastest (any (M,) → (2M,))."""
    return tl.reshape(tl.join(lo, hi), (2 * lo.shape[0],))


@triton.jit
def _tokens_by_dim(p):
    """Interpreter: a (512,) operand (f = 64i + 8g + 2t + j) as (32 tokens t + 4i, 16 dims 2g + j)."""
    return tl.reshape(tl.permute(tl.reshape(p, (8, 8, 4, 2)), (0, 2, 1, 3)), (32, 16))


@triton.jit
def _to_fragments_feat(s_c, s_s):
    """Interpreter: FEAT_A's (16 dims, 16 columns) cos / sin halves → its (512,) accumulator in the lanes' order:
    register r = 2i + j = 8·half + 4·nt + c of lane (g, t) is dim 2g + c // 2, column 4t + 2·(c % 2) + nt."""
    s = tl.reshape(tl.join(s_c, s_s), (8, 2, 4, 2, 2, 2))  # (g, a, t, b, nt, half): dim 2g + a, column 4t + 2b + nt
    return tl.reshape(tl.permute(s, (5, 4, 1, 0, 2, 3)), (512,))  # f = 64·(4·half + 2·nt + a) + 8g + 2t + b


@triton.jit
def _mma_feat_s(ac, as_, b, acc):
    """FEAT_A: acc + the tile's S = φkᵀ·v, ac / as_ = φk's cos / sin halves, b = v, all (512,) in the lanes' order."""
    if COMPILED:
        out = tl.inline_asm_elementwise(_MMA_FS, _MMA_S_CONSTRAINTS, [ac, as_, b, acc], dtype=tl.float32,
                                        is_pure=True, pack=16)
    else:
        v = _tokens_by_dim(b)
        out = acc + _to_fragments_feat(tl.dot(tl.trans(_tokens_by_dim(ac)), v, input_precision="tf32"),
                                       tl.dot(tl.trans(_tokens_by_dim(as_)), v, input_precision="tf32"))
    return out


@triton.jit
def _mma_feat_z(pc0, pc1, ps0, ps1, acc):
    """FEAT_A: acc (256,) + the tile's Σ φk (an all-ones B), from φk's cos / sin of dims 2g, 2g + 1 (the (256,) slots
    _features returns); register i = 4·half + c of lane (g, t) holds z of dim 2g + c // 2 (every column alike)."""
    if COMPILED:
        out = tl.inline_asm_elementwise(_MMA_FZ, _MMA_FZ_CONSTRAINTS, [pc0, pc1, ps0, ps1, acc], dtype=tl.float32,
                                        is_pure=True, pack=8)
    else:
        ones = tl.full((16, 32), 1.0, tl.float32)
        first = tl.arange(0, 16)[:, None] == 0  # every row of the ones product is z: take row 0 (exact)
        zc = tl.sum(tl.where(first, tl.dot(ones, _tokens_by_dim(_pair(pc0, pc1)), input_precision="tf32"), 0.0), 0)
        zs = tl.sum(tl.where(first, tl.dot(ones, _tokens_by_dim(_pair(ps0, ps1)), input_precision="tf32"), 0.0), 0)
        z = tl.reshape(tl.permute(tl.reshape(tl.join(zc, zs), (8, 2, 2)), (2, 1, 0)), (2, 2, 1, 8, 1))  # (half, a, g)
        out = acc + tl.reshape(tl.broadcast_to(z, (2, 2, 2, 8, 4)), (256,))  # e = 32·(4·half + 2a + b) + 4g + t
    return out


@triton.jit
def _features(kk, vv, alpha, lam, DT: tl.constexpr, LAM_INT: tl.constexpr, APPROX: tl.constexpr,
              CLAMP: tl.constexpr):
    """The lane's int32 pairs of k and v (a tile's (256,)) → v's dims 2g, 2g + 1
    and φk's cos and sin halves of each (float32, the same shape): v0, v1, cos0, cos1, sin0, sin1."""
    x0, x1 = unpack(kk, DT)
    v0, v1 = unpack(vv, DT)
    x20 = x0 * x0
    x21 = x1 * x1
    ss = x20 + x21
    ss = ss + lane_xor(ss, 4)  # the token's other 14 dims, in the lanes that share t
    ss = ss + lane_xor(ss, 8)
    ss = ss + lane_xor(ss, 16)
    ar = alpha * tl.rsqrt(ss + 1e-12)
    u0, uc0 = angle_of(x0 * ar, APPROX, CLAMP)
    u1, uc1 = angle_of(x1 * ar, APPROX, CLAMP)
    # The degree-5 sine, not the degree 7 series: 402 → 386 loop instructions (offline sm_90); 52.2-52.4 against
    # 52.8 µs at 518K. Before the asm loads it ran
    # 63.3 against 55.1 µs (see sincos_angle): ptxas put two loads on a shuffle's scoreboard then.
    c0, s0 = sincos_angle(uc0, APPROX, SIN5=True)
    c1, s1 = sincos_angle(uc1, APPROX, SIN5=True)
    m0 = key_mag(x0, x20, lam, LAM_INT)
    m1 = key_mag(x1, x21, lam, LAM_INT)
    return v0, v1, m0 * c0, m1 * c1, m0 * s0, m1 * s1


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _fwd_reduce_rr(K, V, PART, N, CHUNK, n_chunks, H, sk_b, sk_n, sk_h, sv_b, sv_n, sv_h, alpha, lam,
                   LAM_INT: tl.constexpr, APPROX: tl.constexpr, CLAMP: tl.constexpr, PDL: tl.constexpr = False,
                   SK_N: tl.constexpr = 0, SV_N: tl.constexpr = 0, LD_K: tl.constexpr = "", LD_V: tl.constexpr = "",
                   ASM_LOADS: tl.constexpr = False, STRIDED: tl.constexpr = False):
    """Partial Σφk vᵀ and Σφk over one chunk of one (b, h) → PART[b, h, chunk, :] (the layout of store_state).
    k, v: (B, N, H, 16) 16-bit, strides in elements, all even, head dims unit-stride; CHUNK a multiple of
    TILE_TOKENS. PDL: see plan.pdl. SK_N, SV_N > 0: sk_n, sv_n as compile-time constants (see STATIC_STRIDES).
    STRIDED: chunk pid_c is the tiles pid_c, pid_c + n_chunks, … instead of CHUNK tokens from pid_c·CHUNK (see
    plan.STRIDED). The products take φk as A (see FEAT_A)."""
    pdl_launch(PDL)
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    # The statements in the prototype's order: ptxas scheduled a
    # reordering of these lines 68 instructions differently in the loop (where the next tile's loads issue among
    # the MUFU ops), and that ran 65.3 against 57.7 µs.
    e = tl.arange(0, 256)
    lane = e % 32
    i = e // 32
    g = lane // 4
    t = lane % 4
    kp = slab_ptr(K, pid_b, pid_h, sk_b, sk_h).to(tl.pointer_type(tl.int32))
    vp = slab_ptr(V, pid_b, pid_h, sv_b, sv_h).to(tl.pointer_type(tl.int32))
    # device.span inline: through the helper ptxas scheduled this kernel otherwise (102 of its 784 SASS opcodes
    # moved, offline sm_90), where the four kernels of fwd and bwd compile the same either way; measured is
    # this form.
    if STRIDED:
        start = pid_c * 32
        end = N
        step = 32 * n_chunks
    else:
        start = pid_c * CHUNK
        end = tl.minimum(start + CHUNK, N)
        step: tl.constexpr = 32
    if SK_N > 0:
        skp: tl.constexpr = SK_N // 2
    else:
        skp = sk_n // 2
    if SV_N > 0:
        svp: tl.constexpr = SV_N // 2
    else:
        svp = sv_n // 2
    tok = t + 4 * i  # token t + 4i of the tile
    koff = tok * skp + g  # in pairs; loop-invariant, the tile's start moves the scalar base
    voff = tok * svp + g
    klane = t * skp + g  # the same in every slot: koff without the slot's 4i·skp
    vlane = t * svp + g
    # Tokens past the end load as 0: φk(0) = 0, v = 0, they add nothing to S or z.
    kn = tl.load(kp + start * skp + koff, mask=start + tok < end, other=0)
    vn = tl.load(vp + start * svp + voff, mask=start + tok < end, other=0)
    zero = tl.zeros((256,), dtype=tl.float32)
    acc = _pair(zero, zero)  # built like the operands, so it has their layout (no conversion a step)
    zacc = zero  # (256,): 8 registers a lane, z of dims 2g, 2g + 1 in both halves (see _mma_feat_z)
    # Measured alternative: the loop unrolled by two (loop_unroll_factor=2: no end-of-tile copies of the
    # next tile's registers), 56.2-56.4 against 55.1-55.3 µs at 518K.
    for n0 in tl.range(start, end, step):
        kk = kn
        vv = vn
        left = end - n0 - step
        if ASM_LOADS and left >= 32:  # a whole next tile: no masks (see ASM_LOADS)
            kn = _load8(kp + (n0 + step) * skp + klane, LD_K)
            vn = _load8(vp + (n0 + step) * svp + vlane, LD_V)
        else:  # the next tile in flight (past the end when left ≤ 0: all masked, nothing read)
            kn = tl.load(kp + (n0 + step) * skp + koff, mask=tok < left, other=0)
            vn = tl.load(vp + (n0 + step) * svp + voff, mask=tok < left, other=0)
        v0, v1, pc0, pc1, ps0, ps1 = _features(kk, vv, alpha, lam, K.dtype.element_ty, LAM_INT, APPROX, CLAMP)
        bc = _pair(pc0, pc1)
        bs = _pair(ps0, ps1)
        acc = _mma_feat_s(bc, bs, _pair(v0, v1), acc)
        zacc = _mma_feat_z(pc0, pc1, ps0, ps1, zacc)
    st = PART + ((pid_b * H + pid_h) * n_chunks + pid_c).to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    f = tl.arange(0, 512)  # register (i, j) = (f // 64, f % 2) of lane (g, t) = ((f // 8) % 8, (f // 2) % 4)
    fi = f // 64
    # register 2i + j = 8·half + 4·nt + c: dim 2g + c // 2, column 4t + 2·(c % 2) + nt
    half = fi // 4
    dim = 2 * ((f // 8) % 8) + fi % 2
    col = 4 * ((f // 2) % 4) + 2 * (f % 2) + (fi // 2) % 2
    tl.store(st + half * 256 + dim * 16 + col, acc)  # [S_cos (16×16) | S_sin | z_cos (16) | z_sin (16)]
    ez = tl.arange(0, 256)  # register i = 4·half + c of lane (g, t): dim 2g + c // 2, column 2t + c % 2
    iz = ez // 32
    zdim = 2 * ((ez % 32) // 4) + (iz // 2) % 2
    tl.store(st + 512 + (iz // 4) * 16 + zdim, zacc, mask=(ez % 4 == 0) & (iz % 2 == 0))  # column 0 of each


def usable(k: Tensor, v: Tensor, chunk: int) -> bool:
    """Whether k, v suit this kernel's loads: 16-bit, one dtype, (B, N, H, 16) with unit-stride head dims, every
    other stride even and 4-byte aligned data (the 32-bit pair loads); chunks of whole tiles."""
    return (k.dtype == v.dtype and k.dtype in (torch.float16, torch.bfloat16) and k.shape[-1] == v.shape[-1] == 16
            and k.stride(3) == v.stride(3) == 1 and all(s % 2 == 0 for s in k.stride()[:3] + v.stride()[:3])
            and k.data_ptr() % 4 == 0 and v.data_ptr() % 4 == 0 and chunk % TILE_TOKENS == 0)


def asm_loads_fit(k: Tensor, v: Tensor) -> bool:
    """Whether the launch takes ASM_LOADS: on the GPU (the interpreter runs no PTX) and the last slot's offset, 7·4
    tokens on, within the load's signed 24-bit immediate."""
    return not INTERPRET and max(k.stride(1), v.stride(1)) * 2 * 28 < 2**23


def launch(k: Tensor, v: Tensor, part: Tensor, n: int, chunk: int, n_chunks: int, alpha: float, lam: float,
           lam_int: int, approx: bool, clamp: bool, pdl: bool = False, strided: bool = False) -> None:
    """The (H, chunks, B) grid over k, v (B, N, H, 16) into part (B·H·chunks·544 float32), MAXNREG registers a
    thread, the token strides as constexprs (STATIC_STRIDES), whole tiles by :func:`_load8` where they fit
    (ASM_LOADS); ``pdl``: PDL; ``strided``: tile-strided chunks."""
    b, _, h, _ = k.shape
    extra = {} if INTERPRET else {"maxnreg": MAXNREG}
    if asm_loads_fit(k, v):
        extra.update(LD_K=load8_asm(k.stride(1) // 2), LD_V=load8_asm(v.stride(1) // 2), ASM_LOADS=True)
    _fwd_reduce_rr[(h, n_chunks, b)](k, v, part, n, chunk, n_chunks, h, k.stride(0), k.stride(1), k.stride(2),
                                     v.stride(0), v.stride(1), v.stride(2), float(alpha), float(lam),
                                     LAM_INT=lam_int, APPROX=approx, CLAMP=clamp, PDL=pdl,
                                     SK_N=k.stride(1), SV_N=v.stride(1), num_warps=1, num_stages=1,
                                     STRIDED=strided, **extra)
