"""Issue 5, next step: a register map — ``_fwd_map`` with its product issued from registers, as nala_rr does for the
reduce. A prototype beside the landed kernels, not called by them; measured by benchmarks/device_session19.sh:
wrong on the H200 (o off by 1.3-1.4 relative, so its nested joins do not pair the operands there as they do in the
interpreter) and slower anyway, 59.8-81.6 µs against _fwd_map's 56.4 (benchmarks/results/h200/session19/call1).
Kept as that call's record; not developed further.

    PYTHONPATH=.:kernels python benchmarks/rr_map_gpu.py --json OUT.json [--tokens 518400]   # on the GPU
    PYTHONPATH=.:kernels python benchmarks/rr_map_gpu.py --interpret                          # CPU check

num = φq·S over 8·SLOTS tokens a warp and iteration, as 2 k-steps (cos, sin) × 2 n-tiles × SLOTS / 2 m-tiles of
mma.sync m16n8k16 with float16 operands (the landed map's F16 product: S scaled into float16's range). The
fragments fix lane (g, t) = (lane >> 2, lane & 3) to rows (tokens) g and g + 8 of an m-tile; the k columns and
the n columns may be any permutation of the head dims and value columns, so lane (g, t) takes dims 4t .. 4t + 3 of
its tokens 8i + g (slot i: row g of m-tile i // 2 for even i, g + 8 for odd) and writes value columns 4t .. 4t + 3
of them: A columns 2t, 2t + 1 / 2t + 8, 2t + 9 are dims 4t, 4t + 1 / 4t + 2, 4t + 3; n column n of n-tile nt is value
column 4(n // 2) + 2nt + n % 2, so the accumulator's columns 2t, 2t + 1 are value columns 4t + 2nt, 4t + 2nt + 1.
q loads and o stores are 32-bit pairs; a token's norm and den take two xor-shuffles over its 4 lanes; S's
fragments are per-lane constants (16 float16 values a lane, packed in 8 registers).

Per-lane tensors are (SLOTS, 32): slot i, lane — Triton's default one-warp layout; per-lane constants are (1, 32) and
broadcast for free. The mma operands are joins of them, (SLOTS, 32, 2, 2), whose registers per lane run (slot, x, y), so
one pack of 8 (two slots) is one m-tile. Under TRITON_INTERPRET the shuffles are gathers and the product tl.dot on
the values rearranged into (token, dim) and (dim, column) matrices.
"""

from __future__ import annotations

import os
import sys

if "--interpret" in sys.argv:  # before triton is imported
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from nalasr_kernels import nala  # noqa: E402
from nalasr_kernels.nala_math import _COMPILED, _angle, _log2, _pow2_scale, _sincos_angle, _slab, _tanh  # noqa: E402
from nalasr_kernels.nala_rr import _lane_xor, _unpack  # noqa: E402

HP = (3.0, 0.5, 1.0, 1e-6, 0, 0, 100.0)  # λ, τ, α, ε, no RoPE


def _mma_asm() -> str:
    """One m-tile's num: for n-tile nt, D ($2nt, $2nt+1, $4+2nt, $5+2nt) = A_cos·B_cos + A_sin·B_sin. A $8-$15
    (register 4·row + 2·ks + pair: row 0 = token g, 1 = g + 8; pair 0 = dims 4t, 4t+1, 1 = 4t+2, 4t+3), B cos $16-$23
    and B sin $24-$31 (register 2nt + pair, twice: the constants broadcast over the two slots)."""
    lines = ["{", ".reg .f32 z;", "mov.f32 z, 0f00000000;"]
    for nt in range(2):
        d = f"${2 * nt},${2 * nt + 1},${4 + 2 * nt},${5 + 2 * nt}"
        for ks, b0 in ((0, 16), (1, 24)):
            a = f"${8 + 2 * ks},${12 + 2 * ks},${9 + 2 * ks},${13 + 2 * ks}"
            b = f"${b0 + 2 * nt},${b0 + 2 * nt + 1}"
            c = "z,z,z,z" if ks == 0 else d
            lines.append(f"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d}}}, {{{a}}}, {{{b}}}, {{{c}}};")
    return "\n".join(lines + ["}"])


_MMA = tl.constexpr(_mma_asm())
_MMA_CONSTRAINTS = tl.constexpr(",".join(["=r"] * 8 + ["r"] * 24))


@triton.jit
def _pack2(lo, hi, F16: tl.constexpr):
    """Two float32 tensors → int32 pairs of their 16-bit values (float16; bfloat16 unless F16), lo in the low half."""
    if _COMPILED:
        if F16:
            out = tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [lo, hi], dtype=tl.int32,
                                            is_pure=True, pack=1)
        else:
            out = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [lo, hi], dtype=tl.int32,
                                            is_pure=True, pack=1)
    elif F16:
        out = ((lo.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 65535)
               | (hi.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) << 16))
    else:
        out = ((lo.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 65535)
               | (hi.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) << 16))
    return out


@triton.jit
def _quad(a, b, c, d):
    """Four tensors → one (…, 2, 2) holding [[a, b], [c, d]] in its last two axes. tl.join puts its new axis last,
    and that axis is a lane's fastest register, so the inner joins pair a with c: a lane's registers are then
    a, b, c, d in order (and in the logical row-major order of the two axes)."""
    return tl.join(tl.join(a, c), tl.join(b, d))


@triton.jit
def _s_matrix(b):
    """Interpreter: B (1, 32, 2 nt, 2 pair) int32 → S (16 dims, 16 value columns) in float32."""
    lo, hi = _unpack(b, tl.float16)
    s = tl.reshape(tl.join(lo, hi), (4, 2, 4, 2, 2, 2))  # (g2, g1, t, nt, pair, half): dim 4t + 2·pair + half
    return tl.reshape(tl.permute(s, (2, 4, 5, 0, 3, 1)), (16, 16))  # column 4·g2 + 2nt + g1


@triton.jit
def _mma(a, bc, bs, SLOTS: tl.constexpr):
    """num (SLOTS, 32, 2, 2) float32: slot i, lane (g, t), value column 4t + 2x + y of token 8i + g."""
    if _COMPILED:
        out = tl.inline_asm_elementwise(_MMA, _MMA_CONSTRAINTS, [a, tl.broadcast_to(bc, a.shape),
                                                                  tl.broadcast_to(bs, a.shape)],
                                        dtype=tl.float32, is_pure=True, pack=8)
    else:
        lo, hi = _unpack(a, tl.float16)
        phi = tl.reshape(tl.join(lo, hi), (SLOTS, 8, 4, 2, 2, 2))  # (i, g, t, ks, pair, half)
        # token 8i + g, φ dim 16·ks + 4t + 2·pair + half
        phi = tl.reshape(tl.permute(phi, (0, 1, 3, 2, 4, 5)), (8 * SLOTS, 32))
        s = tl.reshape(tl.permute(tl.join(_s_matrix(bc), _s_matrix(bs)), (2, 0, 1)), (32, 16))
        out = tl.reshape(tl.dot(phi, s), (SLOTS, 32, 2, 2))
    return out


@triton.jit
def _lane_state(STATE, bh, OFF: tl.constexpr):
    """Lane (g, t)'s 8 entries of one S half (OFF 0: cos, 256: sin), (1, 32) each: n-tile nt, pair p, dims 4t + 2p
    and 4t + 2p + 1, column 4(g // 2) + 2nt + g % 2, in the order (nt, p, dim)."""
    lane = tl.arange(0, 32)[None, :]
    g = lane // 4
    base = STATE + bh.to(tl.int64) * 544 + OFF + (4 * (lane % 4)) * 16 + 4 * (g // 2) + g % 2
    return (tl.load(base), tl.load(base + 16), tl.load(base + 32), tl.load(base + 48),
            tl.load(base + 2), tl.load(base + 18), tl.load(base + 34), tl.load(base + 50))


@triton.jit
def _absmax(a, b, c, d, e, f, g, h):
    return tl.maximum(tl.maximum(tl.maximum(tl.abs(a), tl.abs(b)), tl.maximum(tl.abs(c), tl.abs(d))),
                      tl.maximum(tl.maximum(tl.abs(e), tl.abs(f)), tl.maximum(tl.abs(g), tl.abs(h))))


@triton.jit
def _fragments(a, b, c, d, e, f, g, h, down):
    """The 8 entries of _lane_state, scaled by ``down``, as the (1, 32, 2 nt, 2 pair) B operand."""
    return _quad(_pack2(a * down, b * down, True), _pack2(c * down, d * down, True),
                 _pack2(e * down, f * down, True), _pack2(g * down, h * down, True))


@triton.jit(do_not_specialize=["N"])
def _fwd_map_rr(Q, STATE, O, N, H, CHUNK, sq_b, sq_n, sq_h, so_b, so_n, so_h, alpha, lam, tau, eps,
                APPROX: tl.constexpr, CLAMP: tl.constexpr, OUT_F16: tl.constexpr, SLOTS: tl.constexpr):
    """o = φqᵀS / (φqᵀz + ε) over one chunk of one (b, h) (16-bit q, 16 unit-stride dims, FASTMAG, no RoPE);
    8·SLOTS tokens an iteration (SLOTS even: two a m-tile)."""
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    bh = pid_b * H + pid_h
    # S's fragments: 16 float32 a lane, scaled by one power of two into float16's range (as nala_math._f16_state).
    c0, c1, c2, c3, c4, c5, c6, c7 = _lane_state(STATE, bh, 0)
    s0, s1, s2, s3, s4, s5, s6, s7 = _lane_state(STATE, bh, 256)
    m = tl.maximum(_absmax(c0, c1, c2, c3, c4, c5, c6, c7), _absmax(s0, s1, s2, s3, s4, s5, s6, s7))
    down, up = _pow2_scale(tl.max(tl.max(m, axis=1), axis=0))
    bc = _fragments(c0, c1, c2, c3, c4, c5, c6, c7, down)
    bs = _fragments(s0, s1, s2, s3, s4, s5, s6, s7, down)
    lane = tl.arange(0, 32)[None, :]
    t = lane % 4
    zb = STATE + bh.to(tl.int64) * 544 + 512 + 4 * t
    zc0, zc1, zc2, zc3 = tl.load(zb), tl.load(zb + 1), tl.load(zb + 2), tl.load(zb + 3)
    zs0, zs1, zs2, zs3 = tl.load(zb + 16), tl.load(zb + 17), tl.load(zb + 18), tl.load(zb + 19)
    row = 8 * tl.arange(0, SLOTS)[:, None] + lane // 4  # token 8i + g of the tile, (SLOTS, 32)
    qp = _slab(Q, pid_b, pid_h, sq_b, sq_h).to(tl.pointer_type(tl.int32))
    op = _slab(O, pid_b, pid_h, so_b, so_h).to(tl.pointer_type(tl.int32))
    qoff = row * (sq_n // 2) + 2 * t  # the pair of dims 4t, 4t + 1; + 1: 4t + 2, 4t + 3
    ooff = row * (so_n // 2) + 2 * t
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    qa = tl.load(qp + start * (sq_n // 2) + qoff, mask=start + row < end, other=0)
    qb = tl.load(qp + start * (sq_n // 2) + qoff + 1, mask=start + row < end, other=0)
    for n0 in tl.range(start, end, 8 * SLOTS):
        xa, xb = _unpack(qa, Q.dtype.element_ty)
        xc, xd = _unpack(qb, Q.dtype.element_ty)
        keep = row < end - n0
        nxt = n0 + 8 * SLOTS
        qa = tl.load(qp + nxt * (sq_n // 2) + qoff, mask=row < end - nxt, other=0)  # the next tile in flight
        qb = tl.load(qp + nxt * (sq_n // 2) + qoff + 1, mask=row < end - nxt, other=0)
        ss = xa * xa + xb * xb + xc * xc + xd * xd
        ss = ss + _lane_xor(ss, 1)
        ss = ss + _lane_xor(ss, 2)
        r = tl.rsqrt(ss + 1e-12)
        p = lam * (tau + _tanh(ss * r, APPROX))  # m = |dir|^p = 2^(p·log2|x| + p·log2 r) (nala_math._query_mag_fwd)
        pr = p * _log2(r)
        ar = alpha * r
        ma = tl.exp2(p * _log2(tl.abs(xa)) + pr)
        mb = tl.exp2(p * _log2(tl.abs(xb)) + pr)
        mc = tl.exp2(p * _log2(tl.abs(xc)) + pr)
        md = tl.exp2(p * _log2(tl.abs(xd)) + pr)
        ua, uca = _angle(xa * ar, APPROX, CLAMP)
        ub, ucb = _angle(xb * ar, APPROX, CLAMP)
        uc, ucc = _angle(xc * ar, APPROX, CLAMP)
        ud, ucd = _angle(xd * ar, APPROX, CLAMP)
        ca, sa = _sincos_angle(uca, APPROX)
        cb, sb = _sincos_angle(ucb, APPROX)
        cc, sc = _sincos_angle(ucc, APPROX)
        cd, sd = _sincos_angle(ucd, APPROX)
        den = (ma * (ca * zc0 + sa * zs0) + mb * (cb * zc1 + sb * zs1) + mc * (cc * zc2 + sc * zs2)
               + md * (cd * zc3 + sd * zs3))
        den = den + _lane_xor(den, 1)
        den = den + _lane_xor(den, 2) + eps
        a = _quad(_pack2(ma * ca, mb * cb, True), _pack2(mc * cc, md * cd, True),
                  _pack2(ma * sa, mb * sb, True), _pack2(mc * sc, md * sd, True))
        num = _mma(a, bc, bs, SLOTS)
        f = up / den
        o_y0, o_y1 = tl.split(num)  # value columns 4t + 2x and 4t + 2x + 1
        o0, o2 = tl.split(o_y0)
        o1, o3 = tl.split(o_y1)
        tl.store(op + n0 * (so_n // 2) + ooff, _pack2(o0 * f, o1 * f, OUT_F16), mask=keep)
        tl.store(op + n0 * (so_n // 2) + ooff + 1, _pack2(o2 * f, o3 * f, OUT_F16), mask=keep)


def rr_map(q, state, o, ppsm: int, maxnreg: int | None = None, slots: int = 4) -> torch.Tensor:
    b, n, h, _ = q.shape
    chunk, n_chunks = nala._plan(n, b * h, q.device, ppsm)
    extra = {"maxnreg": maxnreg} if maxnreg and not nala._INTERPRET else {}
    _fwd_map_rr[(h, n_chunks, b)](q, state, o, n, h, chunk, q.stride(0), q.stride(1), q.stride(2), o.stride(0),
                                  o.stride(1), o.stride(2), HP[2], HP[0], HP[1], HP[3], APPROX=True, CLAMP=False,
                                  OUT_F16=o.dtype == torch.float16, SLOTS=slots, num_warps=1, num_stages=1, **extra)
    return o


def _check_cpu() -> None:
    torch.manual_seed(0)
    cases = ((1, 300, 2, torch.float16, 4), (2, 130, 1, torch.bfloat16, 2), (1, 77, 3, torch.float16, 8))
    for b, n, h, dt, sl in cases:
        q, k, v = (torch.randn(b, n, h, 16, dtype=dt) for _ in range(3))
        o_ref, state = nala.nala_forward(q, k, v, *HP)
        o = rr_map(q, state, torch.full_like(q, float("nan")), 16, None, sl)
        rel = float((o.float() - o_ref.float()).norm() / o_ref.float().norm())
        print(f"{dt} B{b} N{n} H{h} SLOTS {sl}: rel {rel:.2e}, NaN {bool(o.isnan().any())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interpret", action="store_true", help="a CPU check under TRITON_INTERPRET")
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--json")
    ap.add_argument("--ppsm", default="16,32,64")
    ap.add_argument("--maxnreg", default="0,128")
    ap.add_argument("--slots", default="2,4", help="SLOTS: 8·SLOTS tokens a warp and iteration")
    ap.add_argument("--layouts", default="dense,qkvg")
    a = ap.parse_args()
    if a.interpret:
        _check_cpu()
        return
    from kernel_diag_gpu import _inputs, kernel_us  # noqa: E402  (benchmarks/ is the script's directory)

    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "tokens": a.tokens, "rows": []}
    for lay in a.layouts.split(","):
        q, k, v, _ = _inputs(a.tokens, lay)
        o_ref, state = nala.nala_forward(q, k, v, *HP)
        res["rows"].append({"layout": lay, "kernel": "landed", **kernel_us(lambda: nala.nala_forward(q, k, v, *HP))})
        print(res["rows"][-1], flush=True)
        for sl, pp, cap in ((int(w), int(x), int(c) or None) for w in a.slots.split(",") for x in a.ppsm.split(",")
                            for c in a.maxnreg.split(",")):
            o = torch.full_like(q, float("nan"))
            cfg = {"layout": lay, "kernel": "rr_map", "slots": sl, "ppsm": pp, "maxnreg": cap}
            try:
                rr_map(q, state, o, pp, cap, sl)
                torch.cuda.synchronize()
                row = {**cfg, "nan": bool(o.isnan().any()),
                       "o_rel": float((o.float() - o_ref.float()).norm() / o_ref.float().norm()),
                       **kernel_us(lambda: rr_map(q, state, o, pp, cap, sl))}
            except Exception as e:  # one failing config must not cost the others
                row = {**cfg, "error": repr(e)[:300]}
            res["rows"].append(row)
            print(row, flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
    print("\nsummary (µs):")
    for r in res["rows"]:
        print(f"  {r['layout']:6s} {r['kernel']:7s} slots {r.get('slots', '-')!s:2s} ppsm {r.get('ppsm', '-')!s:3s} "
              f"cap {r.get('maxnreg')!s:4s} "
              f"map {r.get('_fwd_map_rr', r.get('_fwd_map', float('nan'))):6.1f}  o rel {r.get('o_rel', 0):.1e} "
              f"{r.get('error', '')}")


if __name__ == "__main__":
    main()
