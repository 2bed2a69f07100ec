"""Issue 5: a register-resident forward reduce — the S and z products issued as mma.sync from registers.

    PYTHONPATH=.:kernels python benchmarks/rr_reduce_gpu.py --json OUT.json [--tokens 518400]

``_fwd_reduce`` stages φk and v through shared memory for tl.dot (12 st.shared.b128, 48 ld.shared and a barrier a
warp-tile of 32 tokens; Nsight Compute, session 18 call 4: stalls on MIO throttle 16%, short scoreboard 20%).
The product S += Σ φk vᵀ does not care which token sits in which k slot of an mma, nor which head dim in which
row or column of S, as long as the final store undoes it. So every lane (g, t) = (lane >> 2, lane & 3) of a
one-warp program loads exactly the values its m16n8k8 tf32 fragments need, as 32-bit pairs: tokens t + 4i
(i = 0..7) of a 32-token tile, head dims 2g and 2g + 1 of k and of v. A token's 16 dims sit in the 8 lanes
that share t, so its norm takes 3 xor-shuffles; the feature map runs on these registers as they are; then 16
mma.sync (4 k-steps × 4 n-tiles: cos / sin × dims 2g / 2g + 1) accumulate Sᵀ, and 16 more with an all-ones A
give z from the same tf32 operands (as ZDOT). No shared memory, no barrier in the loop.

Per-thread tensors are 1-D: element e of a (256,) tensor is lane e % 32, token slot i = e // 32 (the default
one-warp blocked layout: the offsets are not contiguous, so Triton keeps one element a thread a repetition);
reshape(join(lo, hi)) gives the (512,) operands whose 16 registers a thread are (i, j = lo / hi) in order, the
register order inline_asm_elementwise hands to one pack of 16. Under TRITON_INTERPRET the shuffles are gathers and
the products are tl.dot on the same values rearranged (the index arithmetic is what a CPU run can check).

This is a prototype beside the landed kernels (fp16/bf16 k, v with unit-stride head dims, D = Dv = 16, no RoPE,
|α| ≤ 4); the script checks its partial state against _fwd_reduce's and times both.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton
import triton.language as tl

from nalasr_kernels import nala
from nalasr_kernels.nala import _COMPILED, _angle, _key_mag, _sincos_angle, _slab


def _mma_s_asm() -> str:
    """16 mma.sync m16n8k8 tf32: outputs $0-$15 (4 n-tiles × c0..c3), A $16-$31 (k-step s: $16+4s..), B cos
    $32-$47, B sin $48-$63 (register 4s + 2·slot + dim: slot 0 = token t, 1 = token t + 4), C in $64-$79."""
    lines = []
    for s in range(4):
        for nt in range(4):
            base = 32 if nt < 2 else 48
            j = nt % 2
            d = ",".join(f"${4 * nt + c}" for c in range(4))
            a = ",".join(f"${16 + 4 * s + c}" for c in range(4))
            b = f"${base + 4 * s + j},${base + 4 * s + 2 + j}"
            cin = ",".join(f"${64 + 4 * nt + c}" for c in range(4)) if s == 0 else d
            lines.append(f"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d}}}, {{{a}}}, {{{b}}}, {{{cin}}};")
    return "\n".join(lines)


def _mma_z_asm() -> str:
    """16 mma.sync with an all-ones A: outputs $0-$15, B cos $16-$31, B sin $32-$47, C in $48-$63."""
    lines = ["{", ".reg .b32 one;", "mov.b32 one, 0x3F800000;"]
    for s in range(4):
        for nt in range(4):
            base = 16 if nt < 2 else 32
            j = nt % 2
            d = ",".join(f"${4 * nt + c}" for c in range(4))
            b = f"${base + 4 * s + j},${base + 4 * s + 2 + j}"
            cin = ",".join(f"${48 + 4 * nt + c}" for c in range(4)) if s == 0 else d
            lines.append(f"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d}}}, {{one,one,one,one}}, {{{b}}}, "
                         f"{{{cin}}};")
    lines.append("}")
    return "\n".join(lines)


_MMA_S = tl.constexpr(_mma_s_asm())
_MMA_S_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 16 + ["r"] * 64))
_MMA_Z = tl.constexpr(_mma_z_asm())
_MMA_Z_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 16 + ["r"] * 48))


@triton.jit
def _lane_xor(x, MASK: tl.constexpr):
    """x from lane (lane ^ MASK), same token slot: shfl.sync.bfly on the GPU, a gather in the interpreter."""
    if _COMPILED:
        if MASK == 4:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 4, 0x1f, -1;", "=r,r", [x], dtype=tl.float32,
                                          is_pure=True, pack=1)
        elif MASK == 8:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 8, 0x1f, -1;", "=r,r", [x], dtype=tl.float32,
                                          is_pure=True, pack=1)
        else:
            y = tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 16, 0x1f, -1;", "=r,r", [x], dtype=tl.float32,
                                          is_pure=True, pack=1)
    else:
        y = tl.gather(x, tl.arange(0, 256) ^ MASK, 0)
    return y


@triton.jit
def _pair(lo, hi):
    """(256,) lo / hi halves → the (512,) operand: registers (i, j) of each lane, j fastest."""
    return tl.reshape(tl.join(lo, hi), (512,))


@triton.jit
def _tokens_by_dim(p):
    """Interpreter: a (512,) operand (f = 64i + 8g + 2t + j) as (32 tokens t + 4i, 16 dims 2g + j)."""
    return tl.reshape(tl.permute(tl.reshape(p, (8, 8, 4, 2)), (0, 2, 1, 3)), (32, 16))


@triton.jit
def _to_fragments(s_c, s_s):
    """Interpreter: Sᵀ halves (16 rows m, 16 dims) → the (512,) accumulator a thread holds: register (i, j) of lane
    (g, t) is half i // 4, row 2g + i % 2, dim 4t + 2j + (i // 2) % 2."""
    s = tl.join(tl.trans(s_c), tl.trans(s_s))  # (dim, m, half)
    s = tl.reshape(s, (4, 2, 2, 8, 2, 2))  # (t, j, b, g, a, half): dim = 4t + 2j + b, m = 2g + a
    return tl.reshape(tl.permute(s, (5, 2, 4, 3, 0, 1)), (512,))


@triton.jit
def _mma_s(a, bc, bs, acc):
    if _COMPILED:
        return tl.inline_asm_elementwise(_MMA_S, _MMA_S_CONSTRAINTS, [a, bc, bs, acc], dtype=tl.float32,
                                         is_pure=True, pack=16)
    else:
        v = _tokens_by_dim(a)
        s_c = tl.dot(tl.trans(v), _tokens_by_dim(bc), input_precision="tf32")
        s_s = tl.dot(tl.trans(v), _tokens_by_dim(bs), input_precision="tf32")
        return acc + _to_fragments(s_c, s_s)


@triton.jit
def _mma_z(bc, bs, acc):
    if _COMPILED:
        return tl.inline_asm_elementwise(_MMA_Z, _MMA_Z_CONSTRAINTS, [bc, bs, acc], dtype=tl.float32, is_pure=True,
                                         pack=16)
    else:
        ones = tl.full((16, 32), 1.0, tl.float32)
        z_c = tl.dot(ones, _tokens_by_dim(bc), input_precision="tf32")
        z_s = tl.dot(ones, _tokens_by_dim(bs), input_precision="tf32")
        return acc + _to_fragments(z_c, z_s)


@triton.jit
def _unpack(p):
    """(256,) int32 pairs of 16-bit floats → the low and the high element in float32."""
    lo = (p & 65535).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    hi = (p >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _fwd_reduce_rr(K, V, PART, N, CHUNK, n_chunks, H, sk_b, sk_n, sk_h, sv_b, sv_n, sv_h, alpha, lam,
                   LAM_INT: tl.constexpr, APPROX: tl.constexpr):
    """Partial Σφk vᵀ and Σφk over one chunk of one (b, h) → PART, as _fwd_reduce (D = Dv = 16, 16-bit inputs with
    unit-stride dims, no RoPE, no clamp); one warp, 32 tokens an iteration. Strides in elements."""
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    e = tl.arange(0, 256)
    lane = e % 32
    i = e // 32
    g = lane // 4
    t = lane % 4
    kp = _slab(K, pid_b, pid_h, sk_b, sk_h).to(tl.pointer_type(tl.int32))
    vp = _slab(V, pid_b, pid_h, sv_b, sv_h).to(tl.pointer_type(tl.int32))
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    tok = t + 4 * i
    koff = tok * (sk_n // 2) + g  # int32 offsets, loop-invariant; the tile's start moves the scalar base
    voff = tok * (sv_n // 2) + g
    kn = tl.load(kp + start * (sk_n // 2) + koff, mask=start + tok < end, other=0)
    vn = tl.load(vp + start * (sv_n // 2) + voff, mask=start + tok < end, other=0)
    zero = tl.zeros((256,), dtype=tl.float32)
    acc = _pair(zero, zero)  # in the operands' layout (a (512,) zeros would take another, and a conversion a step)
    zacc = _pair(zero, zero)
    for n0 in tl.range(start, end, 32):
        kk = kn
        vv = vn
        left = end - n0 - 32
        kn = tl.load(kp + (n0 + 32) * (sk_n // 2) + koff, mask=tok < left, other=0)
        vn = tl.load(vp + (n0 + 32) * (sv_n // 2) + voff, mask=tok < left, other=0)
        x0, x1 = _unpack(kk)
        v0, v1 = _unpack(vv)
        x20 = x0 * x0
        x21 = x1 * x1
        ss = x20 + x21
        ss = ss + _lane_xor(ss, 4)
        ss = ss + _lane_xor(ss, 8)
        ss = ss + _lane_xor(ss, 16)
        ar = alpha * tl.rsqrt(ss + 1e-12)
        u0, uc0 = _angle(x0 * ar, APPROX, False)
        u1, uc1 = _angle(x1 * ar, APPROX, False)
        c0, s0 = _sincos_angle(uc0, APPROX)
        c1, s1 = _sincos_angle(uc1, APPROX)
        m0 = _key_mag(x0, x20, lam, LAM_INT)
        m1 = _key_mag(x1, x21, lam, LAM_INT)
        bc = _pair(m0 * c0, m1 * c1)
        bs = _pair(m0 * s0, m1 * s1)
        acc = _mma_s(_pair(v0, v1), bc, bs, acc)
        zacc = _mma_z(bc, bs, zacc)
    # Register (i, j) of lane (g, t): half i // 4 (cos, sin), value column 2g + i % 2, dim 4t + 2j + (i // 2) % 2.
    f = tl.arange(0, 512)
    fi = f // 64
    fg = (f // 8) % 8
    ft = (f // 2) % 4
    fj = f % 2
    half = fi // 4
    dim = 4 * ft + 2 * fj + (fi // 2) % 2
    col = 2 * fg + fi % 2
    st = PART + ((pid_b * H + pid_h) * n_chunks + pid_c).to(tl.int64) * (2 * 16 * 16 + 2 * 16)
    tl.store(st + half * 256 + dim * 16 + col, acc)
    tl.store(st + 512 + half * 16 + dim, zacc, mask=col == 0)  # every row of the ones product is z


def rr_state(k, v, ppsm: int = 16, maxnreg: int | None = None, kernel=None):
    """(B, H, 544) float32 state from the prototype reduce and the landed combine."""
    from nalasr_kernels import nala_rr

    b, n, h, d = k.shape
    dev = k.device
    state_n = nala._state_size(16, 16)
    chunk, n_chunks = nala._plan(n, b * h, dev, ppsm)
    part = torch.full((b * h * n_chunks * state_n,), float("nan"), dtype=torch.float32, device=dev)
    state = torch.empty((b, h, state_n), dtype=torch.float32, device=dev)
    extra = {"CLAMP": False} if kernel is not None else {}
    (kernel or _fwd_reduce_rr)[(h, n_chunks, b)](
        k, v, part, n, chunk, n_chunks, h, k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
        v.stride(2), 1.0, 3.0, LAM_INT=3, APPROX=True, num_warps=1, num_stages=1,
        **({"maxnreg": maxnreg} if maxnreg else {}), **extra)
    nala._combine_launch(part, state, b * h, n_chunks, 1.0 / n, state_n)
    return state


def main() -> None:
    from kernel_diag_gpu import _inputs, graph_ms, kernel_us  # noqa: E402  (benchmarks/ is the script's dir)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--json", required=True)
    ap.add_argument("--ppsm", default="8,16,24")
    ap.add_argument("--maxnreg", default="0,128", help="register caps to try (0: none)")
    ap.add_argument("--variants", default="rr,landed_nospec,landed_spec")
    ap.add_argument("--layouts", default="dense,qkvg,hmajor")
    a = ap.parse_args()
    hp = (3.0, 0.5, 1.0, 1e-6, 0, 0, 100.0)
    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": []}
    from nalasr_kernels import nala_rr

    variants = {"rr": None, "landed_nospec": nala_rr._fwd_reduce_rr, "landed_spec": triton.jit(nala_rr._fwd_reduce_rr.fn)}
    for lay in a.layouts.split(","):
        q, k, v, _ = _inputs(a.tokens, lay)
        _, ref = nala.nala_forward(q, k, v, *hp)
        fn = lambda: nala.nala_forward(q, k, v, *hp)  # noqa: E731
        us = kernel_us(fn)
        res["rows"].append({"layout": lay, "kernel": "landed", **us})
        print(lay, "landed", us, flush=True)
        for name, pp, cap in ((v_, int(x), int(c) or None) for v_ in a.variants.split(",")
                              for x in a.ppsm.split(",") for c in a.maxnreg.split(",")):
            kern = variants[name]
            st = rr_state(k, v, pp, cap, kern)
            torch.cuda.synchronize()
            err = float((st - ref).norm() / ref.norm())
            fn = lambda: rr_state(k, v, pp, cap, kern)  # noqa: E731
            us = kernel_us(fn)
            us = {("_fwd_reduce_rr" if key.startswith("_fwd_reduce_rr") else key): t for key, t in us.items()}
            row = {"layout": lay, "kernel": name, "ppsm": pp, "maxnreg": cap, "state_rel": err,
                   "nan": bool(st.isnan().any()), **us}
            res["rows"].append(row)
            print(row, flush=True)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print("\nsummary:")
    for r in res["rows"]:
        print(f"  {r['layout']:7s} {r['kernel']:6s} ppsm {r.get('ppsm', '-')!s:3s} cap {r.get('maxnreg')!s:4s} reduce "
              f"{r.get('_fwd_reduce_rr', r.get('_fwd_reduce', float('nan'))):6.1f} µs combine "
              f"{r.get('_combine', float('nan')):4.1f}  state rel {r.get('state_rel', 0):.1e}")


if __name__ == "__main__":
    main()
