"""Issue 5: the passes chained by programmatic dependent launch (nala._pdl) and the register reduce's finer chunk plan.

    PYTHONPATH=.:kernels python benchmarks/pdl_gpu.py --json OUT.json [--sizes 518400,1048576] [--rounds 2]

Three variants of the landed code, switched in one process and run in turn ``--rounds`` times:
  - ``before``: no PDL, the register reduce's chunks rounded to 256 tokens (as up to session 19);
  - ``plan``: chunks rounded to its 32-token tile (nala._plan's quantum);
  - ``plan+pdl``: and PDL between the passes;
  - ``plan+pdl+static``: and the register reduce's token strides as constexprs (nala_rr.STATIC_STRIDES);
  - ``all+bwd plan``: and the backward's plans of now (the defaults): _bwd_query's chunks in multiples of 64 tokens
    (nala._BWD_QUERY_QUANTUM), _bwd_key at 8 programs an SM in multiples of 64 (nala._BWD_KEY_QUANTUM); the other
    variants keep the backward's plans of before (256-token rounding, _bwd_key at 32).
  Session 20: call 3 ran the first three, call 4 the first four, call 5 all five (then all+bwd plan had only
  _bwd_query's new plan), call 7 all five. ``--bwd-key-plans`` sweeps _bwd_key's plan instead (call 6).
For each: forward and backward from CUDA graphs (dense (1, N, 4, 16) fp16 inputs, as the model passes them), the
backward/forward ratio (issue 5's ≤ 2.5), the kernels' µs from torch.profiler, and the outputs' differences to
``before`` (PDL changes nothing; the plan changes the summation order of the partial sums).
"""

from __future__ import annotations

import argparse
import json
from unittest import mock

import torch
import triton

from kernel_diag_gpu import HP, _inputs, graph_ms, kernel_us, rel_err  # noqa: E402  (benchmarks/)
from nalasr_kernels import nala, nala_rr

# name: (the reduce's chunk quantum, PDL, static strides, the backward's plans of now)
VARIANTS = {"before": (256, False, False, False), "plan": (nala_rr.TILE_TOKENS, False, False, False),
            "plan+pdl": (nala_rr.TILE_TOKENS, True, False, False),
            "plan+pdl+static": (nala_rr.TILE_TOKENS, True, True, False),
            "all+bwd plan": (nala_rr.TILE_TOKENS, True, True, True)}


def run(q, k, v, do, quantum: int, pdl: bool, static: bool, bwd_plan: bool) -> dict:
    """One variant; without ``bwd_plan`` the backward passes take their plans of before session 20 (256-token
    rounding, _bwd_key at 32 programs an SM)."""
    pdl_fn = nala._pdl if pdl else (lambda device: False)
    old = {name: getattr(nala, name) if bwd_plan else nala._MAX_BLOCK_N
           for name in ("_BWD_QUERY_QUANTUM", "_BWD_KEY_QUANTUM")}
    pp = nala._PROGRAMS_PER_SM if bwd_plan else {**nala._PROGRAMS_PER_SM, "bwd_key": 32}
    with mock.patch.object(nala_rr, "TILE_TOKENS", quantum), mock.patch.object(nala, "_pdl", pdl_fn), \
            mock.patch.object(nala_rr, "STATIC_STRIDES", static), mock.patch.multiple(nala, **old), \
            mock.patch.dict(nala._PROGRAMS_PER_SM, pp):
        def fwd():
            return nala.nala_forward(q, k, v, *HP)

        o, state = fwd()

        def bwd():
            return nala.nala_backward(do, q, k, v, state, *HP)

        grads = bwd()
        torch.cuda.synchronize()
        row = {"fwd_ms": graph_ms(fwd, reps=200), "bwd_ms": graph_ms(bwd, reps=100)}
        row["ratio"] = row["bwd_ms"] / row["fwd_ms"]
        row["fwd_kernels"] = kernel_us(fwd, reps=30)
        row["bwd_kernels"] = kernel_us(bwd, reps=20)
    return row, (o, *grads)


def bwd_key_sweep(res: dict, n: int, plans: list[tuple[int, int]]) -> None:
    """The backward (graph) and _bwd_key's µs at each (programs an SM, chunk quantum) of _bwd_key's plan."""
    q, k, v, do = _inputs(n, "dense")
    _, state = nala.nala_forward(q, k, v, *HP)
    for pp, quantum in plans:
        with mock.patch.dict(nala._PROGRAMS_PER_SM, {"bwd_key": pp}), mock.patch.object(nala, "_BWD_KEY_QUANTUM", quantum):
            def bwd():
                return nala.nala_backward(do, q, k, v, state, *HP)

            bwd()
            torch.cuda.synchronize()
            chunk, n_chunks = nala._plan(n, 4, q.device, pp, quantum)
            row = {"sweep": "bwd_key", "tokens": n, "ppsm": pp, "quantum": quantum, "chunk": chunk,
                   "programs": 4 * n_chunks, "bwd_ms": graph_ms(bwd, reps=100), "kernels": kernel_us(bwd, reps=20)}
        res["rows"].append(row)
        print(row, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="518400,1048576")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", required=True)
    ap.add_argument("--bwd-key-plans", default="", help="PPSM:QUANTUM,... of _bwd_key to sweep instead (518K)")
    a = ap.parse_args()
    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "pdl_available": nala._PDL_OK,
                 "rows": []}
    if a.bwd_key_plans:
        plans = [tuple(int(x) for x in p.split(":")) for p in a.bwd_key_plans.split(",")]
        for n in (int(x) for x in a.sizes.split(",")):
            bwd_key_sweep(res, n, plans)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        for r in res["rows"]:
            print(f"  {r['tokens']:8d} bwd_key ppsm {r['ppsm']:2d} quantum {r['quantum']:3d} chunk {r['chunk']:5d} "
                  f"programs {r['programs']:5d}: bwd {r['bwd_ms'] * 1e3:6.1f} µs, _bwd_key {r['kernels'].get('_bwd_key', 0):6.1f}")
        return
    for n in (int(x) for x in a.sizes.split(",")):
        q, k, v, do = _inputs(n, "dense")
        ref = None
        for rnd in range(a.rounds):
            for name, flags in VARIANTS.items():
                row, outs = run(q, k, v, do, *flags)
                ref = outs if ref is None else ref
                row.update(tokens=n, round=rnd, variant=name, gbs=4 * n * 4 * 16 * 2 / row["fwd_ms"] / 1e6,
                           max_rel={nm: rel_err(x, r) for nm, x, r in zip(("o", "dq", "dk", "dv"), outs, ref)})
                res["rows"].append(row)
                print(row, flush=True)
                with open(a.json, "w") as f:
                    json.dump(res, f, indent=1)
    print("\nsummary:")
    for r in res["rows"]:
        fk = r["fwd_kernels"]
        print(f"  {r['tokens']:8d} {r['variant']:15s} round {r['round']}: fwd {r['fwd_ms'] * 1e3:6.1f} µs "
              f"({r['gbs']:.0f} GB/s)  bwd {r['bwd_ms'] * 1e3:6.1f} µs  ratio {r['ratio']:.3f}  | reduce "
              f"{fk.get('_fwd_reduce_rr', float('nan')):5.1f} combine {fk.get('_combine', float('nan')):4.1f} map "
              f"{fk.get('_fwd_map', float('nan')):5.1f}  | rel to before {max(r['max_rel'].values()):.1e}")


if __name__ == "__main__":
    main()
