r"""The forward map's query features in packed float16 (HALF2, see ``plan.map_half2``).

``fwd_map_kernel`` multiplies φ̃q by S as float16 operands (F16) whatever precision φ̃q is formed in, so for float16 queries
the features may as well be formed in float16 pairs: one HFMA2 / HMUL2 does two elements. And with |α| ≤ 1 the angle's
cosine and sine are smooth functions of xa = α·dir on [−1, 1], so polynomials in xa take the place of tanh (a MUFU
operation an element) and of the sine and cosine of θ. The map looked bound by both its issue slots and the MUFU pipe
, so cutting both was meant to make it faster. It did
by 1-2% for a fifth fewer instructions and a quarter fewer MUFU operations: the map is bound elsewhere.

What stays float32 is what needs the range or the accuracy: Σx², the norm's tanh and the magnitude m = |dir|^p
(log2 and exp2 on the MUFU pipe: sm_90 runs tanh.approx.f16x2 and ex2.approx.f16x2 as two MUFU operations each, so
float16 MUFU forms save nothing there). m and xa = α·dir are rounded to float16 once, and the angle polynomials, m·F,
m·G run in float16 pairs: φq's halves take three float16 roundings where float32 features took one (at the
product's operand). den = φq·z + ε comes from two more float16 products (φq against matrices whose every column is z,
scaled into [0.5, 1) by a power of two): float32 sums of exact products. Measured: the output at 518K 3.90e-4 from the
float64 reference against 3.81e-4 with float32 features (``plan.map_half2``).

Interpreter (TRITON_INTERPRET=1, no PTX): the same polynomials in NumPy's float16 arithmetic, which rounds every
operation where the GPU's HFMA2 rounds a fused product and sum once; 1/den as a division.
"""

from __future__ import annotations

import struct

import triton
import triton.language as tl

from .device import COMPILED


# φq's angle part as functions of xa = α·dir without the tanh: F(x) = cos((π/4)·tanh x), G(x) = sin((π/4)·tanh x) on
# [−1, 1] (|α| ≤ 1, see plan.map_half2), F of degree 8 in x², G = x·(degree 3 in x²), fitted near-minimax with each
# coefficient rounded to float16 before the next is refitted. Evaluated in float16 with fused multiply-adds over every
# float16 x in [−1, 1]: F off by 9.4e-5 RMS (3.4e-4 at most), G by 5.6e-5 (5.4e-4), where rounding the exact values
# to float16 alone leaves 9.3e-5 and 3.3e-5 (2.4e-4 at most); tanh's MUFU operation goes.
F_POLY = (1.0, -0.3076171875, 0.212158203125, -0.10418701171875, 0.0260467529296875)  # x^0, x^2, .., x^8
G_POLY = (0.78466796875, -0.332275390625, 0.1468505859375, -0.03619384765625)  # x^1, x^3, .., x^7


def _f16_hex(c: float) -> str:
    """A float16 number's bits as PTX hex ("0x3C00"); refuses one that float16 does not hold exactly."""
    bits = struct.unpack("<H", struct.pack("<e", c))[0]
    if struct.unpack("<e", struct.pack("<H", bits))[0] != c:
        raise ValueError(f"{c!r} is not a float16 number")
    return f"0x{bits:04X}"


F_HEX = tuple(map(_f16_hex, F_POLY))  # the same numbers as float16 bits, for the PTX below
G_HEX = tuple(map(_f16_hex, G_POLY))


def _features_asm() -> str:
    """PTX for one pair of elements: inputs m, xa (2 × f32 each); outputs φ's cos and sin halves m·F(xa), m·G(xa)
    (f16x2 each)."""
    k = lambda h: h + h[2:]  # noqa: E731 — 0xABCD → 0xABCDABCD: the constant in both halves
    lines = ["{", ".reg .b32 m, x, q, c, t, w;",
             "cvt.rn.f16x2.f32 m, $3, $2;", "cvt.rn.f16x2.f32 x, $5, $4;", "mul.rn.f16x2 q, x, x;",
             f"mov.b32 c, {k(F_HEX[4])};"]
    for h in reversed(F_HEX[:4]):
        lines += [f"mov.b32 w, {k(h)};", "fma.rn.f16x2 c, c, q, w;"]
    lines.append(f"mov.b32 t, {k(G_HEX[3])};")
    for h in reversed(G_HEX[:3]):
        lines += [f"mov.b32 w, {k(h)};", "fma.rn.f16x2 t, t, q, w;"]
    lines += ["mul.rn.f16x2 t, t, x;", "mul.rn.f16x2 $0, m, c;", "mul.rn.f16x2 $1, m, t;", "}"]
    return "\n".join(lines)


_FEATURES_ASM = tl.constexpr(_features_asm())


@triton.jit
def features_h2(m, xa):
    """φq's halves (m·F(xa), m·G(xa)) as float16 product operands from m (BLOCK_N, BD) float32 and xa = α·dir
    (|xa| ≤ 1). Compiled: one PTX block a pair of elements (inline_asm_elementwise packs consecutive elements of a
    thread, the same two of either operand): 13 operations a pair of elements, none on the MUFU pipe, where float32
    features took 9 an element, one of them tanh's MUFU operation, and the conversion to float16."""
    if COMPILED:
        fc, fs = tl.inline_asm_elementwise(_FEATURES_ASM, "=r,=r,r,r,r,r", [m, xa], dtype=(tl.float16, tl.float16),
                                           is_pure=True, pack=2)
    else:
        m16 = m.to(tl.float16)
        x = xa.to(tl.float16)
        q = x * x
        c = (((F_POLY[4] * q + F_POLY[3]) * q + F_POLY[2]) * q + F_POLY[1]) * q + F_POLY[0]
        t = (((G_POLY[3] * q + G_POLY[2]) * q + G_POLY[1]) * q + G_POLY[0]) * x
        fc = m16 * c
        fs = m16 * t
    return fc, fs


@triton.jit
def pack_h2(lo, hi):
    """Two float32 tensors → int32 words of float16 pairs (lo in the low half), each rounded to nearest: one
    cvt.rn.f16x2.f32 a word (Triton's two conversions and the bit operations to join them took three instructions)."""
    if COMPILED:
        w = tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [lo, hi], dtype=tl.int32,
                                      is_pure=True, pack=1)
    else:
        a = lo.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 65535
        b = hi.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
        w = a | (b << 16)
    return w


@triton.jit
def features_pairs(m0, m1, x0, x1):
    """The register map's φq halves (nalasr_kernels.nala.fwd_map_rr) as int32 words of float16 pairs from four float32
    tensors of one shape: element pairs (m0, m1), (x0, x1) → (m·F(x), m·G(x)) for both, element 0 in the low half.
    The PTX of features_h2 (the same operand numbers: $2, $3 the two m, $4, $5 the two x), one word a call."""
    if COMPILED:
        fc, fs = tl.inline_asm_elementwise(_FEATURES_ASM, "=r,=r,r,r,r,r", [m0, m1, x0, x1],
                                           dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    else:
        fc0, fs0 = features_h2(m0, x0)
        fc1, fs1 = features_h2(m1, x1)
        fc = pack_h2(fc0.to(tl.float32), fc1.to(tl.float32))  # float16 values: exact through float32
        fs = pack_h2(fs0.to(tl.float32), fs1.to(tl.float32))
    return fc, fs


@triton.jit
def _first(a, b):
    """tl.reduce's combine for rows whose entries are all equal: any one of them; the shuffles it would wait for
    have no use and are removed."""
    return a


@triton.jit
def den_h2(fc, fs, zc_mat, zs_mat):
    """den − ε = φq·z (BLOCK_N,) from the float16 φq halves by two more products with (BD, BDV) matrices whose every
    column is z_c, z_s (float16): float32 sums of exact products, in the layout of the numerator's accumulator, so
    den needs no layout conversion and no reduction (every column holds it; _first takes the lane's own)."""
    den = tl.dot(fc, zc_mat)
    den = tl.dot(fs, zs_mat, den)
    return tl.reduce(den, 1, _first)


@triton.jit
def rcp_fast(x):
    """1/x for a normal float32 x (rcp.approx.ftz.f32, 1 ulp): one MUFU operation and no range fix-ups, where
    div.approx's operand scaling takes 8 instructions a row (4 rows a thread in the accumulator layout)."""
    if COMPILED:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)
    else:
        return 1.0 / x
