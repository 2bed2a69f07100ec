"""Register and lane helpers shared by the attention's register passes (fwd_reduce_rr, fwd_map_rr, bwd_key_rr,
bwd_query_rr): the one-warp layout of their per-lane tensors, xor-shuffles, 16-bit pairs and 64-bit words of
float16, and the interpreter's views of mma fragments as (token, dim) matrices.

Layout: element e of a (32·slots,) tensor is lane e % 32, slot e // 32 — Triton's default one-warp blocked
layout. Lane (g, t) = ((e % 32) // 4, e % 4), as in the PTX ISA's mma fragments. Under TRITON_INTERPRET=1 (no PTX)
the shuffles are gathers, so a CPU run checks the index arithmetic the GPU runs.
"""

from __future__ import annotations

import triton
import triton.language as tl

from . import half2
from .device import COMPILED, slab_ptr

@triton.jit
def lane_xor(x, MASK: tl.constexpr):
    """x from lane (lane ^ MASK) (MASK 1, 2, 4, 8 or 16), same slot: shfl.sync.bfly on the GPU. x is (256,) with
    lane e % 32, or (SLOTS, 32) with the lane last; in the interpreter a gather along the last axis (for (256,),
    e ^ MASK keeps the slot e // 32, as MASK < 32)."""
    if COMPILED:
        if MASK == 1:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 1, 0x1f, -1;", "=r,r", [x],
                                          dtype=tl.float32, is_pure=True, pack=1)
        elif MASK == 2:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 2, 0x1f, -1;", "=r,r", [x],
                                          dtype=tl.float32, is_pure=True, pack=1)
        elif MASK == 4:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 4, 0x1f, -1;", "=r,r", [x],
                                          dtype=tl.float32, is_pure=True, pack=1)
        elif MASK == 8:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 8, 0x1f, -1;", "=r,r", [x],
                                          dtype=tl.float32, is_pure=True, pack=1)
        else:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 16, 0x1f, -1;", "=r,r", [x],
                                          dtype=tl.float32, is_pure=True, pack=1)
    else:
        idx = tl.arange(0, x.shape[-1]) ^ MASK
        if len(x.shape) == 1:
            y = tl.gather(x, idx, 0)
        else:
            y = tl.gather(x, tl.broadcast_to(idx[None, :], x.shape), 1)
    return y


@triton.jit
def unpack(p, DT: tl.constexpr):
    """(256,) int32 pairs of 16-bit floats (dtype DT) → the low and the high element in float32."""
    lo = (p & 65535).to(tl.int16).to(DT, bitcast=True).to(tl.float32)
    hi = (p >> 16).to(tl.int16).to(DT, bitcast=True).to(tl.float32)
    return lo, hi


F16_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"  # the register passes' product: f16 in, f32 out


@triton.jit
def _opaque(x):
    """x (int32), hidden from Triton's axis analysis: offsets built from it do not look contiguous along the lanes,
    so the coalescing pass leaves the loads and stores in the one-warp layout whose element e is lane e % 32 (the one
    the fragments and the shuffles assume) instead of giving a thread neighbouring words and converting layouts
    (offline sm_90, 2-D tiles: 24 layout conversions and 128 B of shared memory). The move is free in the SASS."""
    if COMPILED:
        y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    else:
        y = x
    return y


@triton.jit
def lane_ids(E: tl.constexpr):
    """The register passes' one-warp layout of (E,) tensors: element e is lane (g, t) = ((e % 32) // 4, e % 4) in slot
    s = e // 32, which holds token 8s + g of the tile. Returns s, g, t (opaque, see _opaque) and that token."""
    e = tl.arange(0, E)
    s = e // 32
    g = (e % 32) // 4
    return s, g, _opaque(e % 4), 8 * s + g


@triton.jit
def word_slab(X, pid_b, h, s_b, s_h):
    """Head h of batch pid_b of a float16 (B, N, H, 16) tensor as a pointer to 8-byte words (4 dims each)."""
    return slab_ptr(X, pid_b, h, s_b, s_h).to(tl.pointer_type(tl.int64))


@triton.jit
def dims4(w):
    """A lane's int64 words of 4 float16 (dims 4t .. 4t + 3 of its tokens) → the four dims in float32."""
    x0, x1 = unpack(w.to(tl.int32), tl.float16)  # the low word: dims 4t, 4t + 1
    x2, x3 = unpack((w >> 32).to(tl.int32), tl.float16)
    return x0, x1, x2, x3


@triton.jit
def word4(a, b, c, d):
    """Four float32 tensors (dims or columns 4t .. 4t + 3) → the int64 words of their float16 values, one store."""
    lo = half2.pack_h2(a, b).to(tl.int64) & 4294967295
    return lo | (half2.pack_h2(c, d).to(tl.int64) << 32)


@triton.jit
def token_sum(x):
    """x summed over the 4 lanes that share g (the 16 dims of a token): two xor-shuffles."""
    x = x + lane_xor(x, 1)
    return x + lane_xor(x, 2)


@triton.jit
def to_words(x):
    """Interpreter: (32·slots,) words → (slots, 32 lanes, 2) float32, the low and the high float16 of each."""
    lo, hi = unpack(tl.reshape(x, (x.shape[0] // 32, 32)), tl.float16)
    return tl.join(lo, hi)


@triton.jit
def tokens_by_dim(lo, hi):
    """Interpreter: words of dims (or value columns) 4t, 4t + 1 / 4t + 2, 4t + 3 → (8·slots tokens 8s + g, 16 dims
    4t + j)."""
    x = tl.join(to_words(lo), to_words(hi))  # (slot, lane, w, p): dim 4t + 2p + w
    return tl.reshape(tl.permute(x, (0, 1, 3, 2)), (lo.shape[0] // 4, 16))


@triton.jit
def matrix(b0, b1, TRANSPOSED: tl.constexpr):
    """Interpreter: dS's B words of n-tiles 0 and 1 (see _state_key) → dS (16 dims, 16 value columns) as float32."""
    x = tl.reshape(tl.join(to_words(b0), to_words(b1)), (2, 4, 2, 4, 2, 2))  # (p, g // 2, g % 2, t, w, nt)
    if TRANSPOSED:  # words of dS[4·(g // 2) + 2nt + g % 2][4t + 2p + w]
        x = tl.permute(x, (1, 5, 2, 3, 0, 4))
    else:  # words of dS[4t + 2p + w][4·(g // 2) + 2nt + g % 2]
        x = tl.permute(x, (3, 0, 4, 1, 5, 2))
    return tl.reshape(x, (16, 16))


@triton.jit
def four_words(x):
    """Interpreter: (16 tokens, 16 columns 4t + 2nt + w) → the four (64,) tensors of the lanes, index 2nt + w."""
    w0, w1 = tl.split(tl.reshape(x, (64, 2, 2)))
    a, c = tl.split(w0)
    b, d = tl.split(w1)
    return a, b, c, d
