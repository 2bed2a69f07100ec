"""Issue 5: the register reduce (nalasr_kernels/nala_rr.py) against _fwd_reduce, per layout, plan and register cap.

    PYTHONPATH=.:kernels python benchmarks/rr_reduce_gpu.py --json OUT.json [--tokens 518400] \
        [--ppsm 8,16,24] [--maxnreg 0,128] [--layouts dense,qkvg,hmajor]

For each layout (benchmarks/kernel_diag_gpu._inputs): the autotuned forward with NALASR_REDUCE_RR=0 and =1 (kernel
times from torch.profiler), then the register reduce alone at each programs-per-SM × register cap (0: none), its
partial state combined and checked against _fwd_reduce's (relative error; the partials are NaN-filled, so an
unwritten entry shows). Calls 6 and 8 of session 18 ran this script's prototype form, with its own copy of the
kernel (commit 5fc4f03).
"""

from __future__ import annotations

import argparse
import json
import os
from unittest import mock

import torch
import triton

from kernel_diag_gpu import HP, _inputs, kernel_us  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala, nala_rr


def rr_state(k, v, ppsm: int, maxnreg: int | None) -> torch.Tensor:
    """(B, H, 544) float32 state from the register reduce at ``ppsm`` programs an SM and the landed combine."""
    b, n, h, _ = k.shape
    state_n = nala._state_size(16, 16)
    chunk, n_chunks = nala._plan(n, b * h, k.device, ppsm)
    part = torch.full((b * h * n_chunks * state_n,), float("nan"), dtype=torch.float32, device=k.device)
    state = torch.empty((b, h, state_n), dtype=torch.float32, device=k.device)
    nala_rr.launch(k, v, part, n, chunk, n_chunks, HP[2], HP[0], 3, True, False, maxnreg)
    nala._combine_launch(part, state, b * h, n_chunks, 1.0 / n, state_n)
    return state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--json", required=True)
    ap.add_argument("--ppsm", default="8,16,24")
    ap.add_argument("--maxnreg", default="0,128", help="register caps to try (0: none)")
    ap.add_argument("--layouts", default="dense,qkvg,hmajor")
    a = ap.parse_args()
    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "tokens": a.tokens, "rows": []}
    for lay in a.layouts.split(","):
        q, k, v, _ = _inputs(a.tokens, lay)
        ref = None
        for flag in ("0", "1"):
            with mock.patch.dict(os.environ, {"NALASR_REDUCE_RR": flag}):
                _, st = nala.nala_forward(q, k, v, *HP)
                ref = st if flag == "0" else ref
                us = kernel_us(lambda: nala.nala_forward(q, k, v, *HP))
            row = {"layout": lay, "kernel": f"forward RR={flag}", "state_rel": float((st - ref).norm() / ref.norm()),
                   **us}
            res["rows"].append(row)
            print(row, flush=True)
        for pp, cap in ((int(x), int(c) or None) for x in a.ppsm.split(",") for c in a.maxnreg.split(",")):
            st = rr_state(k, v, pp, cap)
            torch.cuda.synchronize()
            us = kernel_us(lambda: rr_state(k, v, pp, cap))
            row = {"layout": lay, "kernel": "rr", "ppsm": pp, "maxnreg": cap, "nan": bool(st.isnan().any()),
                   "state_rel": float((st - ref).norm() / ref.norm()), **us}
            res["rows"].append(row)
            print(row, flush=True)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print("\nsummary (µs):")
    for r in res["rows"]:
        red = r.get("_fwd_reduce_rr", r.get("_fwd_reduce", float("nan")))
        nan = float("nan")
        print(f"  {r['layout']:7s} {r['kernel']:14s} ppsm {r.get('ppsm', '-')!s:3s} cap {r.get('maxnreg')!s:4s} "
              f"reduce {red:6.1f} combine {r.get('_combine', nan):4.1f} map {r.get('_fwd_map', nan):5.1f}"
              f"  state rel {r['state_rel']:.1e}")


if __name__ == "__main__":
    main()
