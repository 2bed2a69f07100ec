"""When each program of the register reduce starts and ends, and on which SM: what its tail is made of.

    PYTHONPATH=.:kernels python benchmarks/reduce_tail_gpu.py --json OUT.json [--sizes 518400,1036800] [--ppsm 16]

The forward's reduce (nalasr_kernels.nala_rr) at the plan nala_forward takes, inputs as benchmarks/kernel_diag_gpu.py
(B = 1, 4 heads × 16, fp16, strided views of one projection), launched back to back ``--reps`` times with each
program writing its %globaltimer at start and end and its SM (nala_rr._stamp). Per size and programs per SM it
prints, from the last launch: percentiles of the programs' start, end and duration (µs from the first start); per
SM the spread of its programs' ends and when its last one ends; the programs' end by their rank of start within
their SM (does the first program an SM starts finish first?), by head and by quarter of the chunks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from kernel_diag_gpu import _inputs, graph_ms  # noqa: E402  (benchmarks/, the script's directory)
from nalasr_kernels import nala, nala_rr  # noqa: E402


def pct(x: torch.Tensor, qs=(0, 10, 50, 90, 100)) -> list[float]:
    """The percentiles qs of x, rounded to 0.01 ([] for an empty x)."""
    return [round(float(torch.quantile(x.double(), q / 100)), 2) for q in qs] if len(x) else []


def run(n: int, ppsm: int, reps: int) -> dict:
    _, k, v, _ = _inputs(n, "qkvg")
    b, _, h, _ = k.shape
    chunk, n_chunks = nala._plan(n, b * h, k.device, ppsm, nala_rr.TILE_TOKENS)
    part = torch.empty(b * h * n_chunks * nala._state_size(16, 16), device="cuda")
    times = torch.zeros(b * h * n_chunks, 4, dtype=torch.int64, device="cuda")
    args = (k, v, part, n, chunk, n_chunks, 1.0, 3.0, 3, True, False)
    for _ in range(reps):
        nala_rr.launch(*args, times=times)
    torch.cuda.synchronize()
    kernel_us = graph_ms(lambda: nala_rr.launch(*args)) * 1e3  # back to back, without the stamps
    t = times.cpu()
    start, end, sm = (t[:, 0] - t[:, 0].min()) / 1e3, (t[:, 1] - t[:, 0].min()) / 1e3, t[:, 2]
    dur = end - start
    sms = sorted(set(sm.tolist()))
    per_sm = {s: (sm == s).nonzero().flatten() for s in sms}
    spread = torch.tensor([float(end[i].max() - end[i].min()) for i in per_sm.values()])
    counts = torch.tensor([len(i) for i in per_sm.values()])
    # end by rank of start within the SM (rank 0 = the SM's first program)
    ranks: dict[int, list[float]] = {}
    for idx in per_sm.values():
        order = idx[torch.argsort(start[idx])]
        for r, i in enumerate(order.tolist()):
            ranks.setdefault(r, []).append(float(end[i]))
    by_rank = {r: round(sum(x) / len(x), 2) for r, x in sorted(ranks.items())}
    sm_last = torch.tensor([float(end[i].max()) for i in per_sm.values()])
    head_end = {hh: round(float(end[hh::h].mean()), 2) for hh in range(h)}
    quarter = n_chunks // 4
    chunk_end = [round(float(end.view(n_chunks, h)[i * quarter:(i + 1) * quarter].mean()), 2) for i in range(4)]
    out = {"tokens": n, "ppsm": ppsm, "chunk": chunk, "kernel_us": kernel_us, "programs": int(t.shape[0]),
           "sms": len(sms), "programs_per_sm": pct(counts.float(), (0, 50, 100)), "start_us": pct(start), "end_us": pct(end),
           "duration_us": pct(dur), "sm_end_spread_us": pct(spread), "sm_last_end_us": pct(sm_last),
           "end_by_start_rank": by_rank, "end_by_head": head_end,
           "end_by_chunk_quarter": chunk_end}
    print(f"{n} tokens, ppsm {ppsm}: {out['programs']} programs of {chunk} tokens on {len(sms)} SMs "
          f"({out['programs_per_sm']} each), {kernel_us:.1f} µs a launch back to back")
    for key in ("start_us", "end_us", "duration_us", "sm_end_spread_us", "sm_last_end_us"):
        print(f"  {key:18s} p0/10/50/90/100 {out[key]}")
    print(f"  end by start rank in SM {by_rank}")
    print(f"  end by head {head_end}, by chunk quarter {chunk_end}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--sizes", default="518400,1036800")
    ap.add_argument("--ppsm", default="16")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    rows = [run(int(n), int(p), a.reps) for n in a.sizes.split(",") for p in a.ppsm.split(",")]
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
