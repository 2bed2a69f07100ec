"""The register reduce under other register caps and programs an SM: the forward at 518K and 1M (dense q, k, v), its
CUDA-graph mean and the reduce's kernel time, for each variant in turns (A/B/A) in one process; each variant's
output against the first one's (relative RMS).

    PYTHONPATH=.:kernels python benchmarks/rr_cap_gpu.py --variants 128x16,112x16,112x18,128x16 [--json OUT.json]

A variant is CAPxPROGRAMS_PER_SM of nala_rr, with the products' operands of nala_rr.FEAT_A, or of the layout before
it with a trailing "o" (128x16o; session 31). (Session 28 call 8 also ran the register reduce by k-steps, since
removed: benchmarks/results/h200/session29/call1/kstep.diff.) At cap 112 nala_rr fits its loop in
112 registers without spills (offline sm_90, Triton 3.6), but 18 an SM ran as if they did not fit: each scheduler's
16K registers hold 4 such warps, not 5 (benchmarks/results/h200/session28/call7).
"""

from __future__ import annotations

import argparse
import functools
import json

import torch

from kernel_diag_gpu import HP, _inputs, graph_ms, kernel_us  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala, nala_rr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="128x16,112x16,112x18,128x16")
    ap.add_argument("--sizes", default="518400,1036800")
    ap.add_argument("--json")
    a = ap.parse_args()
    launch, ppsm0 = nala_rr.launch, dict(nala._PROGRAMS_PER_SM)
    rows = []
    for n in (int(s) for s in a.sizes.split(",")):
        q, k, v, _ = _inputs(n, "dense")
        base = None
        for text in a.variants.split(","):
            cap, ppsm = (int(x) for x in text.rstrip("o").split("x"))
            nala_rr.launch = functools.partial(launch, maxnreg=cap, feat_a=not text.endswith("o"))
            nala._PROGRAMS_PER_SM["fwd_reduce"] = ppsm
            fwd = lambda: nala.nala_forward(q, k, v, *HP)  # noqa: E731
            o = fwd()[0].float()
            torch.cuda.synchronize()
            base = o if base is None else base
            err = ((o - base).pow(2).mean() / base.pow(2).mean()).sqrt().item()
            us = kernel_us(fwd)
            r = {"tokens": n, "variant": text, "cap": cap, "ppsm": ppsm, "graph_us": graph_ms(fwd, 200) * 1e3,
                 "reduce_us": us.get("_fwd_reduce_rr"), "rel_rms_vs_first": err,
                 "chunks": nala._plan(n, 4, q.device, ppsm, nala_rr.TILE_TOKENS, nala._FWD_REDUCE_MIN_CHUNK)}
            rows.append(r)
            print(f"{n:8d} {text:8s} chunks {r['chunks']} | forward graph {r['graph_us']:6.1f} µs, "
                  f"reduce {r['reduce_us']:5.1f} µs, o vs first {err:.1e}", flush=True)
    nala_rr.launch = launch
    nala._PROGRAMS_PER_SM.update(ppsm0)
    if a.json:
        json.dump({"rows": rows, "device": torch.cuda.get_device_name()}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
