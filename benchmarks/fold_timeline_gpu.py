"""Where the forward's time goes between the reduce and the map's first tile, with and without the folded combine.

    git apply benchmarks/results/h200/session24/call3/fold_v2.diff   # the fold and the stamps (not kept)
    PYTHONPATH=.:kernels python benchmarks/fold_timeline_gpu.py --json OUT.json [--sizes 518400,1036800]

A record of issue 5's session 24 (calls 2-3): it runs on the kernels of the diff above, which are measured and not
kept (benchmarks/results/h200/session24/README.md).

The forward (nala_forward, inputs as benchmarks/kernel_diag_gpu.py) replayed from a CUDA graph with the register
reduce's programs stamping their start and end and the map's their %globaltimer after the wait for the pass before,
after the claim of a column slice and after its release (claimers; nala._fold_combine), when the state is ready (all
slices stored), and at their end (nala._STAMPS). Per size and NALASR_FOLD 0 / 1 it prints, in µs from the last
reduce program's end, percentiles of each stamp over the map's programs that waited (those whose wait ended within
10 µs of the reduce's end: the first wave), and the map's last end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from kernel_diag_gpu import HP, _inputs, capture  # noqa: E402  (benchmarks/, the script's directory)
from nalasr_kernels import nala, nala_rr  # noqa: E402
from reduce_tail_gpu import pct  # noqa: E402


def run(n: int, fold: str) -> dict:
    os.environ["NALASR_FOLD"] = fold
    q, k, v, _ = _inputs(n, "qkvg")
    b, _, h, _ = k.shape
    _, r_chunks = nala._plan(n, b * h, k.device, nala._PROGRAMS_PER_SM["fwd_reduce"], nala_rr.TILE_TOKENS)
    _, m_chunks = nala._plan(n, b * h, k.device, nala._PROGRAMS_PER_SM["fwd_map"], nala._FWD_MAP_QUANTUM)
    stamps = {"reduce": torch.zeros(b * h * r_chunks, 4, dtype=torch.int64, device="cuda"),
              "map": torch.zeros(b * h * m_chunks, 8, dtype=torch.int64, device="cuda")}
    nala._STAMPS = stamps
    try:
        fn = lambda: nala.nala_forward(q, k, v, *HP)  # noqa: E731
        fn()
        g = capture(fn)
        for _ in range(5):
            g.replay()
        for t in stamps.values():  # a claimer of an earlier replay may not claim in the last
            t.zero_()
        g.replay()
        torch.cuda.synchronize()
    finally:
        nala._STAMPS = None
    r, m = stamps["reduce"].cpu(), stamps["map"].cpu()
    zero = r[:, 1].max()  # the last reduce program's end
    us = lambda t: (t - zero).double() / 1e3  # noqa: E731
    waited = us(m[:, 0]) < 10.0
    claimers = waited & (m[:, 2] > 0)
    out = {"n": n, "fold": fold, "programs": len(m), "waited": int(waited.sum()), "claimers": int(claimers.sum()),
           "reduce_first_start": round(float(us(r[:, 0].min())), 2),
           "after_wait": pct(us(m[waited, 0])), "after_claim": pct(us(m[waited, 1])) if fold == "1" else [],
           "claim_latency": pct((m[waited, 1] - m[waited, 0]).double() / 1e3) if fold == "1" else [],
           "released": pct(us(m[claimers, 2])), "sum_time": pct((m[claimers, 2] - m[claimers, 1]).double() / 1e3),
           "ready": pct(us(m[waited, 3])), "first_wave_end": pct(us(m[waited, 4])),
           "map_end": round(float(us(m[:, 4].max())), 2)}
    print(f"{n:8d} fold {fold}: {out['waited']} waited, {out['claimers']} claimers; µs from the reduce's end "
          f"(0/10/50/90/100%): after wait {out['after_wait']}, claim latency {out['claim_latency']}, "
          f"released {out['released']} (sum {out['sum_time']}), ready {out['ready']}, "
          f"first wave ends {out['first_wave_end']}, map ends {out['map_end']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--sizes", default="518400,1036800")
    args = ap.parse_args()
    if not hasattr(nala, "_STAMPS"):  # main's map writes no stamps: every figure would be read from zeros
        print("error: these kernels have no stamps; apply benchmarks/results/h200/session24/call3/fold_v2.diff first",
              file=sys.stderr)
        return 2
    res = [run(int(n), fold) for n in args.sizes.split(",") for fold in ("0", "1")]
    Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
