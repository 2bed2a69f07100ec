"""Issue 5: what the forward passes have in flight: the register cap, the token strides, the chunks.

    PYTHONPATH=.:kernels python benchmarks/prefetch_gpu.py --json OUT.json [--tokens 518400] [--layout dense]
        [--quick]

Both forward passes are latency-bound at the occupancy their registers leave (16 one-warp reduce programs an SM at
the 128-register cap, ~12 two-warp map programs). Each keeps the next tile's loads in flight in registers, but
ptxas issues most of them late in the loop body (offline sm_90: 11 of the register reduce's 16 loads after 253 of
its 471 instructions at the cap; _fwd_map's two at 360 of 491), so a load has a fraction of a step to arrive. With
its token strides as constexprs (nala_rr.STATIC_STRIDES) the reduce fits in 125 registers and issues all 16 in its
first 123 instructions. Rows: the register reduce alone (chunk, cap, static strides; its state checked against the
landed forward's), the map alone (BLOCK_N 64 on 2 warps, the autotuner's pick; chunk, cap; o checked), kernel µs from
torch.profiler; then the whole forward from a CUDA graph for the plan of before and the fastest variants.

Session 20 ran earlier forms of this script: call 1 (commit dcf9b7b) L2 prefetches (prefetch.global.L2) PF + 1
tiles ahead and chunks off the powers of two; call 2 (commit 4fa5d35) the register prefetch two tiles ahead (DIST)
and caps 128-160, each at the chunk filling one wave of the programs the cap lets an SM hold (a sub-partition holds
3 warps of 129-168 registers: 12 an SM). Call 4 ran this form with DIST (at 4fa5d35).
"""

from __future__ import annotations

import argparse
import json

import torch
import triton

from kernel_diag_gpu import HP, _inputs, graph_ms, kernel_us, rel_err as rel  # noqa: E402  (benchmarks/)
from nalasr_kernels import nala, nala_rr

STATE_N = nala._state_size(16, 16)


def plan(n: int, chunk: int) -> tuple[int, int]:
    return chunk, -(-n // chunk)


def reduce_state(k, v, chunk: int, cap: int | None, static: bool = False) -> torch.Tensor:
    """(B, H, 544) state from the register reduce over ``chunk``-token chunks and the landed combine."""
    b, n, h, _ = k.shape
    chunk, n_chunks = plan(n, chunk)
    part = torch.full((b * h * n_chunks * STATE_N,), float("nan"), dtype=torch.float32, device=k.device)
    state = torch.empty((b, h, STATE_N), dtype=torch.float32, device=k.device)
    nala_rr.launch(k, v, part, n, chunk, n_chunks, HP[2], HP[0], 3, True, False, cap, static=static)
    nala._combine_launch(part, state, b * h, n_chunks, 1.0 / n, STATE_N)
    return state


def map_out(q, state, chunk: int, maxnreg: int | None, out=None) -> torch.Tensor:
    """o from _fwd_map at BLOCK_N 64 on 2 warps (the pick at 518K) over ``chunk``-token chunks."""
    b, n, h, _ = q.shape
    o = out if out is not None else torch.full(q.shape, float("nan"), dtype=q.dtype, device=q.device)
    chunk, n_chunks = plan(n, chunk)
    extra = {"maxnreg": maxnreg} if maxnreg else {}
    nala._fwd_map[(h, n_chunks, b)](
        q, state, state, o, n, 1, h, chunk, n_chunks, nala._pow2(b * n * h), *q.stride(), *o.stride(),
        HP[2], HP[0], HP[1], HP[3], D=16, DV=16, BD=16, BDV=16, ROPE=False, PREC="tf32", APPROX=True, OFFS64=False,
        FASTMAG=True, F16=True, BLOCK_N=64, CLAMP=False, num_warps=2, num_stages=2, **extra)
    return o


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--layout", default="dense")
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="a few variants only (a smoke run)")
    a = ap.parse_args()
    q, k, v, _ = _inputs(a.tokens, a.layout)
    o_ref, st_ref = nala.nala_forward(q, k, v, *HP)
    torch.cuda.synchronize()
    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "tokens": a.tokens,
                 "layout": a.layout, "rows": []}

    def save():
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)

    landed = kernel_us(lambda: nala.nala_forward(q, k, v, *HP), reps=30)
    res["rows"].append({"pass": "forward", "variant": "landed", **landed})
    print(res["rows"][-1], flush=True)

    # (chunk, register cap, static strides)
    red = [(992, 128, False), (992, 128, True), (1024, 128, True), (1024, 128, False), (992, 128, False),
           (992, 128, True)]
    # (chunk, register cap)
    mp = [(512, None), (448, None), (384, None), (512, None)]
    if a.quick:
        red, mp = red[:3], mp[:3]
    for chunk, cap, static in red:
        st = reduce_state(k, v, chunk, cap, static)
        torch.cuda.synchronize()
        us = kernel_us(lambda: reduce_state(k, v, chunk, cap, static), reps=30)
        row = {"pass": "reduce", "chunk": chunk, "cap": cap, "static": static,
               "nan": bool(st.isnan().any()),
               "state_rel": rel(st, st_ref), "us": us.get("_fwd_reduce_rr"), "combine": us.get("_combine")}
        res["rows"].append(row)
        print(row, flush=True)
        save()
    for chunk, cap in mp:
        o = map_out(q, st_ref, chunk, cap)
        torch.cuda.synchronize()
        buf = torch.empty_like(q)
        us = kernel_us(lambda: map_out(q, st_ref, chunk, cap, buf), reps=30)
        row = {"pass": "map", "chunk": chunk, "maxnreg": cap,
               "nan": bool(o.isnan().any()), "o_rel": rel(o, o_ref), "us": us.get("_fwd_map")}
        res["rows"].append(row)
        print(row, flush=True)
        save()

    def best(kind: str, first: dict) -> dict:
        rows = [r for r in res["rows"] if r["pass"] == kind and r["us"] and not r["nan"]]
        return min(rows, key=lambda r: r["us"]) if rows else first

    base_r = {"chunk": 1024, "cap": 128, "static": False}
    base_m = {"chunk": 512, "maxnreg": None}
    br, bm = best("reduce", base_r), best("map", base_m)
    o_buf = torch.empty_like(q)
    for name, r, m in (("plan of before", base_r, base_m), ("best reduce", br, base_m), ("best map", base_r, bm),
                       ("both", br, bm), ("plan of before again", base_r, base_m)):
        def fwd(r=r, m=m):
            st = reduce_state(k, v, r["chunk"], r["cap"], r["static"])
            return map_out(q, st, m["chunk"], m["maxnreg"], o_buf)
        o = fwd()
        torch.cuda.synchronize()
        row = {"pass": "forward graph", "variant": name, "reduce": {x: r[x] for x in base_r},
               "map": {x: m[x] for x in base_m}, "o_rel": rel(o, o_ref), "ms": graph_ms(fwd, reps=100)}
        res["rows"].append(row)
        print(row, flush=True)
        save()
    land_ms = graph_ms(lambda: nala.nala_forward(q, k, v, *HP), reps=100)
    res["rows"].append({"pass": "forward graph", "variant": "nala_forward", "ms": land_ms})
    save()
    print("\nsummary:")
    for r in res["rows"]:
        if r["pass"] == "reduce":
            print(f"  reduce chunk {r['chunk']:5d} cap {r['cap']} static {int(r['static'])}: "
                  f"{r['us']:6.1f} µs  "
                  f"state rel {r['state_rel']:.1e}{'  NaN' if r['nan'] else ''}")
        elif r["pass"] == "map":
            print(f"  map    chunk {r['chunk']:5d} cap {r['maxnreg']!s:4s}: {r['us']:6.1f} µs  o rel {r['o_rel']:.1e}{'  NaN' if r['nan'] else ''}")
        elif r["pass"] == "forward graph":
            print(f"  forward graph {r['variant']:18s} {r['ms'] * 1e3:6.1f} µs  {r.get('reduce', '')} {r.get('map', '')}")
        else:
            print(f"  {r}")


if __name__ == "__main__":
    main()
