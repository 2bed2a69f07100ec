"""Issue 5 prototype: the forward map with one program for all heads of its tokens, o stored as whole 128-byte rows.

    PYTHONPATH=.:kernels python benchmarks/rows_map_gpu.py --json OUT.json [--tokens 518400] [--configs 32x1x4x1,...]
    TRITON_INTERPRET=1 PYTHONPATH=.:kernels python benchmarks/rows_map_gpu.py --interpret   # CPU parity check

Why (benchmarks/results/h200/session19/call4, rows_floor_gpu.py): the map's traffic alone takes 44.9 µs at 518K when
each store instruction writes one head's 32 bytes of a row — also when one warp stores the four heads back to back —
and 35.1 µs when a store writes whole rows; loads do not care (the reduce's traffic: 42-43 µs either way). So this
map computes each head as ``_fwd_map`` does (heads_group_gpu._map_tile: _fwd_map's loop body), joins the four
(BLOCK_N, 16) outputs into (BLOCK_N, 64) and stores that once. The model's case only:
H = 4, D = Dv = 16, 16-bit q, o contiguous (B, N, 4, 16), no RoPE, λτ ≥ 1.5 (FASTMAG).

A config is BLOCK_NxWARPSxHEADSxHALF2: HEADS 2 stores half rows (64 bytes); HALF2 1 computes each head as HALF2 does
(nala_fwd._map_tile_h2, float16 features; float16 q only), 0 with float32 features. Session 19 (float32 features, before
they shrank): 67.8 µs at best for four heads, 59.5 for two, against the landed map's 56.1-56.4. Session 25 (call 2):
with HALF2 tiles four heads take 61.1-72.9 µs; two heads 54.4 at best on the benchmark's strided views (qkvg) against
the landed HALF2 map's 53.4, but 49.1 with dense q (the model's layout since session 5) against its 51.9 (the landed
map then at 36 programs an SM). Landed in session 26 as nala._fwd_map_pair (two heads, HALF2, dense q from 400K tokens).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton
import triton.language as tl

from heads_group_gpu import HP, _head_state, _map_tile  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala
from nalasr_kernels.nala_fwd import _query_h2, _state_h2
from nalasr_kernels.nala_math import _load_tile, _log2, _slab, _token_rows


@triton.jit
def _head(STATE, bh, eps, HALF2: tl.constexpr):
    """One head's map operands: S halves (float16), z (vectors, or HALF2's matrices), the output factor and ε."""
    if HALF2:
        return _state_h2(STATE, bh, eps, 16)
    else:
        s_c, s_s, z_c, z_s, up = _head_state(STATE, bh, 16, 16)
        return s_c, s_s, z_c, z_s, up, eps


@triton.jit
def _tile(x, s_c, s_s, z_c, z_s, up, eps, alpha, lga, lam, tau, APPROX: tl.constexpr, CLAMP: tl.constexpr,
          HALF2: tl.constexpr):
    """o (BLOCK_N, 16) float32 of one head's query tile x: _fwd_map's loop body, float32 or HALF2 features."""
    if HALF2:
        return _query_h2(x, s_c, s_s, z_c, z_s, up, eps, alpha, lga, lam, tau, APPROX)
    else:
        return _map_tile(x, s_c, s_s, z_c, z_s, up, alpha, lga, lam, tau, eps, APPROX, CLAMP)


@triton.jit
def _fwd_map_rows(Q, STATE, O, N, CHUNK, sq_b, sq_n, sq_h, so_b, so_n, alpha, lam, tau, eps,
                  APPROX: tl.constexpr, CLAMP: tl.constexpr, BLOCK_N: tl.constexpr, HEADS: tl.constexpr,
                  HALF2: tl.constexpr):
    """Queries [chunk] of batch b, HEADS (2 or 4) adjacent heads from HEADS·program_id(1) on: o (BLOCK_N, 16·HEADS)
    a tile, heads adjacent as in O's rows (heads 2, 3 computed on 0, 1's tiles when HEADS = 2, and not stored)."""
    pid_c = tl.program_id(0)
    h0 = tl.program_id(1) * HEADS
    pid_b = tl.program_id(2)
    offs_d = tl.arange(0, 16)
    dmask = offs_d < 16
    sc0, ss0, zc0, zs0, up0, ep0 = _head(STATE, pid_b * 4 + h0, eps, HALF2)
    sc1, ss1, zc1, zs1, up1, ep1 = _head(STATE, pid_b * 4 + h0 + 1, eps, HALF2)
    qb0 = _slab(Q, pid_b, h0, sq_b, sq_h)
    qb1 = qb0 + sq_h
    if HEADS == 4:
        sc2, ss2, zc2, zs2, up2, ep2 = _head(STATE, pid_b * 4 + 2, eps, HALF2)
        sc3, ss3, zc3, zs3, up3, ep3 = _head(STATE, pid_b * 4 + 3, eps, HALF2)
        qb2 = qb1 + sq_h
        qb3 = qb2 + sq_h
    else:
        sc2, ss2, zc2, zs2, up2, ep2 = sc0, ss0, zc0, zs0, up0, ep0
        sc3, ss3, zc3, zs3, up3, ep3 = sc1, ss1, zc1, zs1, up1, ep1
        qb2 = qb0
        qb3 = qb1
    o_base = O + pid_b.to(tl.int64) * so_b + h0 * 16
    offs_o = tl.arange(0, 16 * HEADS)
    lga = _log2(tl.abs(alpha))
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    x0n = _load_tile(qb0, start, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
    x1n = _load_tile(qb1, start, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
    x2n = x0n
    x3n = x1n
    if HEADS == 4:
        x2n = _load_tile(qb2, start, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
        x3n = _load_tile(qb3, start, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
    for n0 in tl.range(start, end, BLOCK_N):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, False)
        x0 = x0n
        x1 = x1n
        x2 = x2n
        x3 = x3n
        x0n = _load_tile(qb0, n0 + BLOCK_N, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
        x1n = _load_tile(qb1, n0 + BLOCK_N, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
        o0 = _tile(x0, sc0, ss0, zc0, zs0, up0, ep0, alpha, lga, lam, tau, APPROX, CLAMP,
                       HALF2).to(O.dtype.element_ty)
        o1 = _tile(x1, sc1, ss1, zc1, zs1, up1, ep1, alpha, lga, lam, tau, APPROX, CLAMP,
                       HALF2).to(O.dtype.element_ty)
        if HEADS == 4:
            x2n = _load_tile(qb2, n0 + BLOCK_N, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
            x3n = _load_tile(qb3, n0 + BLOCK_N, end, sq_n, offs_d, 1, dmask, BLOCK_N, False)
            o2 = _tile(x2, sc2, ss2, zc2, zs2, up2, ep2, alpha, lga, lam, tau, APPROX, CLAMP,
                       HALF2).to(O.dtype.element_ty)
            o3 = _tile(x3, sc3, ss3, zc3, zs3, up3, ep3, alpha, lga, lam, tau, APPROX, CLAMP,
                       HALF2).to(O.dtype.element_ty)
            # [n, d, a, b] = head 2b + a → (n, b, a, d) → column 16·(2b + a) + d
            o = tl.join(tl.join(o0, o1), tl.join(o2, o3))
            o = tl.reshape(tl.permute(o, (0, 3, 2, 1)), (BLOCK_N, 64))
        else:
            o = tl.reshape(tl.permute(tl.join(o0, o1), (0, 2, 1)), (BLOCK_N, 32))
        tl.store(o_base + rows[:, None] * so_n + offs_o[None, :], o.to(O.dtype.element_ty), mask=nmask[:, None])


def rows_map(q: torch.Tensor, state: torch.Tensor, o: torch.Tensor, block_n: int, warps: int, ppsm: int,
             heads: int = 4, half: bool = False) -> None:
    """o (B, N, 4, 16) contiguous from q (B, N, 4, 16) token-major and the combined state (B, 4, 544)."""
    b, n, h, d = q.shape
    assert h == 4 and d == 16 and o.is_contiguous() and q.stride(3) == 1
    chunk, n_chunks = nala._plan(n, b * 4 // heads, q.device, ppsm) if q.is_cuda else (64, -(-n // 64))
    chunk = -(-chunk // block_n) * block_n
    n_chunks = -(-n // chunk)
    lam, tau, alpha, eps = HP[0], HP[1], HP[2], HP[3]
    _fwd_map_rows[(n_chunks, 4 // heads, b)](q, state, o, n, chunk, q.stride(0), q.stride(1), q.stride(2), o.stride(0),
                                 o.stride(1), alpha, lam, tau, eps, APPROX=True, CLAMP=False, BLOCK_N=block_n,
                                 HEADS=heads, HALF2=half, num_warps=warps)


def _check_cpu() -> None:
    for dtype, b, n in ((torch.float16, 1, 300), (torch.bfloat16, 2, 77)):
        x = torch.randn(b, n, 16, 16, dtype=dtype)
        q, k, v = (x[..., 4 * i:4 * i + 4, :] for i in range(3))  # qkvg-like views, head stride 16
        k, v = k.contiguous(), v.contiguous()
        ref, state = nala.nala_forward(q, k, v, *HP)
        for heads, half in ((2, False), (4, False), (2, True), (4, True)):
            if half and dtype != torch.float16:
                continue
            o = torch.full_like(ref, float("nan"))
            rows_map(q, state, o, 16, 1, 1, heads, half)
            rel = float((o.float() - ref.float()).norm() / ref.float().norm())
            print(f"{dtype} B{b} N{n} heads {heads} half2 {half}: rel {rel:.2e}, NaN {bool(o.isnan().any())}")
            assert rel < 2e-3 and not o.isnan().any()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--json")
    ap.add_argument("--configs", default="16x1,32x1,32x2,64x2,64x4",
                    help="BLOCK_NxWARPSxHEADSxHALF2 (HEADS 4 and HALF2 0 if left out)")
    ap.add_argument("--ppsm", default="8,16,32")
    ap.add_argument("--interpret", action="store_true")
    a = ap.parse_args()
    if a.interpret:
        assert os.environ.get("TRITON_INTERPRET") == "1"
        _check_cpu()
        return
    from kernel_diag_gpu import _inputs, graph_ms, kernel_us

    rows = []
    for lay in ("dense", "qkvg"):
        q, k, v, _ = _inputs(a.tokens, lay)
        ref, state = nala.nala_forward(q, k, v, *HP)
        us = kernel_us(lambda: nala.nala_forward(q, k, v, *HP))
        rows.append({"layout": lay, "kernel": "landed", "map_us": us.get("_fwd_map"), "all": us,
                     "forward_ms": graph_ms(lambda: nala.nala_forward(q, k, v, *HP))})
        print(json.dumps(rows[-1]), flush=True)
        for cfg in a.configs.split(","):
            bn, warps, heads, half = ([int(x) for x in cfg.split("x")] + [4, 0][len(cfg.split("x")) - 2:])[:4]
            for ppsm in (int(p) for p in a.ppsm.split(",")):
                o = torch.full_like(ref, float("nan"))
                try:
                    fn = lambda: rows_map(q, state, o, bn, warps, ppsm, heads, bool(half))  # noqa: E731
                    fn()
                    rel = float((o.float() - ref.float()).norm() / ref.float().norm())
                    t = kernel_us(fn)["_fwd_map_rows"]
                except Exception as e:  # a config that does not compile (registers) is a row, not the end
                    rows.append({"layout": lay, "kernel": "rows", "config": cfg, "ppsm": ppsm, "error": repr(e)[:200]})
                    continue
                rows.append({"layout": lay, "kernel": "rows", "config": cfg, "ppsm": ppsm, "map_us": t, "o_rel": rel,
                             "nan": bool(o.isnan().any())})
                print(json.dumps(rows[-1]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": rows}, f, indent=1)
    print("summary (µs):")
    for r in rows:
        if "error" in r:
            print(f"  {r['layout']:6s} rows {r['config']:6s} ppsm {r['ppsm']:3d} error {r['error'][:80]}")
        elif r["kernel"] == "landed":
            print(f"  {r['layout']:6s} landed map {r['map_us']:6.1f}  forward {r['forward_ms'] * 1e3:6.1f}")
        else:
            print(f"  {r['layout']:6s} rows {r['config']:6s} ppsm {r['ppsm']:3d} map {r['map_us']:6.1f}  "
                  f"o rel {r['o_rel']:.1e}{'  NaN' if r['nan'] else ''}")


if __name__ == "__main__":
    main()
