"""The register reduce under other register caps and programs an SM: the forward at 518K and 1M (dense q, k, v), its
CUDA-graph mean and the reduce's kernel time, for each variant in turns (A/B/A) in one process; each variant's
output against the first one's (relative RMS).

    PYTHONPATH=.:kernels python benchmarks/rr_cap_gpu.py --variants 128x16,112x16,112x18,128x16 [--json OUT.json]

A variant is CAPxPROGRAMS_PER_SM of nala_rr, or ksCAPxPROGRAMS_PER_SM of the register reduce by k-steps
(nala_rr_ks, NALASR_REDUCE_RR_KSTEP=1), e.g. ks96x20 (its own pick) or ks128x16. At cap 112 nala_rr fits its loop in
112 registers without spills (offline sm_90, Triton 3.6), but 18 an SM ran as if they did not fit: each scheduler's
16K registers hold 4 such warps, not 5 (benchmarks/results/h200/session28/call7).
"""

from __future__ import annotations

import argparse
import functools
import json
import os

import torch

from kernel_diag_gpu import HP, _inputs, graph_ms, kernel_us  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala, nala_rr, nala_rr_ks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="128x16,112x16,112x18,128x16")
    ap.add_argument("--sizes", default="518400,1036800")
    ap.add_argument("--json")
    a = ap.parse_args()
    launch, launch_ks, ppsm0 = nala_rr.launch, nala_rr_ks.launch, dict(nala._PROGRAMS_PER_SM)
    rows = []
    for n in (int(s) for s in a.sizes.split(",")):
        q, k, v, _ = _inputs(n, "dense")
        base = None
        for text in a.variants.split(","):
            ks = text.startswith("ks")
            cap, ppsm = (int(x) for x in text.removeprefix("ks").split("x"))
            os.environ["NALASR_REDUCE_RR_KSTEP"] = "1" if ks else "0"
            nala_rr.launch = functools.partial(launch, maxnreg=cap)
            nala_rr_ks.launch = functools.partial(launch_ks, maxnreg=cap)
            nala._PROGRAMS_PER_SM["fwd_reduce_ks" if ks else "fwd_reduce"] = ppsm
            fwd = lambda: nala.nala_forward(q, k, v, *HP)  # noqa: E731
            o = fwd()[0].float()
            torch.cuda.synchronize()
            base = o if base is None else base
            err = ((o - base).pow(2).mean() / base.pow(2).mean()).sqrt().item()
            us = kernel_us(fwd)
            r = {"tokens": n, "variant": text, "cap": cap, "ppsm": ppsm, "graph_us": graph_ms(fwd, 200) * 1e3,
                 "reduce_us": us.get("_fwd_reduce_rr_ks" if ks else "_fwd_reduce_rr"), "rel_rms_vs_first": err,
                 "chunks": nala._plan(n, 4, q.device, ppsm, nala_rr.TILE_TOKENS, nala._FWD_REDUCE_MIN_CHUNK)}
            rows.append(r)
            print(f"{n:8d} {text:8s} chunks {r['chunks']} | forward graph {r['graph_us']:6.1f} µs, "
                  f"reduce {r['reduce_us']:5.1f} µs, o vs first {err:.1e}", flush=True)
    nala_rr.launch, nala_rr_ks.launch = launch, launch_ks
    nala._PROGRAMS_PER_SM.update(ppsm0)
    os.environ.pop("NALASR_REDUCE_RR_KSTEP", None)
    if a.json:
        json.dump({"rows": rows, "device": torch.cuda.get_device_name()}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
