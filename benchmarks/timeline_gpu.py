"""When each attention kernel starts and ends inside a forward and a backward: where the time between the passes goes.

    PYTHONPATH=.:kernels python benchmarks/timeline_gpu.py --json OUT.json [--sizes 518400,1036800] [--reps 10]
        [--layout qkvg|dense]

Inputs as benchmarks/kernel_diag_gpu.py (B = 1, 4 heads × 16, fp16, strided views of one projection, or with
--layout dense separate contiguous tensors). A sleep kernel
holds the GPU while the host queues ``reps`` calls, so they run back to back as from a CUDA graph (the host's launch
work, ~0.2 ms a forward, is slower than the GPU's at 518K); torch.profiler gives every kernel's start and end. Per
size and direction it prints, as medians over the calls, each kernel's start and end (µs from the call's first
kernel start) and the gap from the end of the call to the start of the next one. Under programmatic dependent launch
a kernel starts when its programs may (in the tail of the one before) and its duration includes the wait.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from kernel_diag_gpu import HP, _inputs  # noqa: E402  (benchmarks/, the script's directory)
from nalasr_kernels import nala  # noqa: E402


def kernel_events(fn, reps: int) -> list[tuple[str, float, float]]:
    """(name, start µs, end µs) of every GPU kernel of ``reps`` back-to-back calls of fn, in start order."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(50_000_000)  # ~25 ms at 1.98 GHz: the host queues every call behind it
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(f"{tmp}/trace.json")
        trace = json.loads(Path(tmp, "trace.json").read_text())
    out = [(e["name"], float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in trace["traceEvents"]
           if e.get("cat") == "kernel" and "sleep" not in e["name"]]
    return sorted(out, key=lambda x: x[1])


def split_calls(events: list[tuple[str, float, float]], first: str) -> list[list[tuple[str, float, float]]]:
    """The events cut into calls, each beginning at a kernel whose name starts with ``first``."""
    calls: list[list[tuple[str, float, float]]] = []
    for ev in events:
        if ev[0].startswith(first) or not calls:
            calls.append([])
        calls[-1].append(ev)
    return calls


def summary(calls: list[list[tuple[str, float, float]]]) -> dict:
    """Medians over the calls (the first dropped: it follows the sleep): per kernel position, name, start and end
    from the call's first start; the call's span; the gap to the next call's first start."""
    calls = calls[1:]
    width = min(len(c) for c in calls)
    rows = []
    for i in range(width):
        rows.append({"kernel": calls[0][i][0][:40],
                     "start_us": statistics.median(c[i][1] - c[0][1] for c in calls),
                     "end_us": statistics.median(c[i][2] - c[0][1] for c in calls)})
    span = statistics.median(max(e for _, _, e in c) - c[0][1] for c in calls)
    gaps = [b[0][1] - max(e for _, _, e in a) for a, b in zip(calls, calls[1:])]
    return {"kernels": rows, "span_us": span, "gap_us": statistics.median(gaps) if gaps else None,
            "period_us": statistics.median(b[0][1] - a[0][1] for a, b in zip(calls, calls[1:]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--sizes", default="518400,1036800")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--layout", default="qkvg", choices=["qkvg", "dense"],
                    help="q, k, v as kernel_diag_gpu.py's inputs (dense: the model's, where the pair map runs)")
    a = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "sizes": {}}
    for n in (int(s) for s in a.sizes.split(",")):
        q, k, v, do = _inputs(n, a.layout)
        fwd = lambda: nala.nala_forward(q, k, v, *HP)  # noqa: E731
        _, state = fwd()
        bwd = lambda: nala.nala_backward(do, q, k, v, state, *HP)  # noqa: E731
        bwd()
        res["sizes"][n] = {}
        for tag, fn, first in (("fwd", fwd, "_fwd_reduce"), ("bwd", bwd, "_bwd_query")):
            fn()
            s = summary(split_calls(kernel_events(fn, a.reps + 1), first))
            res["sizes"][n][tag] = s
            print(f"{n:8d} {tag}: span {s['span_us']:.1f} µs, period {s['period_us']:.1f}, gap {s['gap_us']:.1f}")
            for r in s["kernels"]:
                print(f"    {r['kernel']:40s} {r['start_us']:7.1f} → {r['end_us']:7.1f} µs "
                      f"({r['end_us'] - r['start_us']:.1f})")
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
