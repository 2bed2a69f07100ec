#!/usr/bin/env python
"""Issue 6's GPU benchmark in one command, from the repository root:

    python benchmarks/run_bench_gpu.py benchmarks/results/h200

Runs the ``h200`` preset of :mod:`nalasr.bench` (the same sweep as ``nalasr bench --preset h200``):
x4, default variant, LR 192x256 / 270x480 / 540x960 / 1080x1920, NaLa (fused kernels when present) beside
the same network with softmax attention (SDPA and materialised) and the NaLa reference, in fp16; NaLa in
bf16 and fp32, at x2 and x3, and the small variant; then the largest LR that fits. Random weights.

Writes into the folder: bench.json, bench.md, bench.png (when matplotlib is present), and records.jsonl
line by line while it runs (so a killed run still leaves its results; removed at the end). Every case
records OOM, a skip or its error instead of stopping the run; the sweep stops starting cases after
4.5 minutes. Prints the short comparison table and the targets last. Works from a plain checkout: the
repository and its kernels/ folder are put first on sys.path.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from nalasr.bench import sweep as bench  # noqa: E402
from nalasr.bench import report as bench_report  # noqa: E402
from nalasr.errors import NalasrError  # noqa: E402


class _Lines(bench.Progress):
    """Plain progress lines (a log, not a terminal) and one JSON line per finished case."""

    def __init__(self, partial: Path) -> None:
        self.partial = partial
        self.n = 0
        self.total = 0
        self.t0 = time.perf_counter()

    def start(self, total: int) -> None:
        self.total = total
        self.partial.write_text("")
        print(f"{total} cases", flush=True)

    def case(self, label: str) -> None:
        print(f"[{time.perf_counter() - self.t0:6.1f} s] {label} ...", flush=True)

    def done(self, r: bench.BenchRecord) -> None:
        self.n += 1
        with self.partial.open("a") as f:
            f.write(json.dumps(r.to_dict()) + "\n")
        what = f"{r.median_ms:.2f} ms, {r.peak_gib:.3f} GiB" if r.status == "ok" else bench_report.status_text(r)
        print(f"    {self.n}/{self.total} {r.attention} {r.precision} x{r.scale} {r.variant} {r.size}: {what}", flush=True)


def _short_table(records: list[bench.BenchRecord]) -> str:
    """x4 default fp16 (or bf16 if no fp16): one row per size, ms / GiB per attention."""
    cols = ("nala-auto", "softmax-sdpa", "softmax-materialised", "nala-reference")
    main = [r for r in records if r.variant == "default" and r.scale == 4 and r.precision == "fp16" and not r.find_max]
    sizes = sorted({(r.lr_h, r.lr_w) for r in main}, key=lambda hw: hw[0] * hw[1])

    def cell(r: bench.BenchRecord | None) -> str:
        if r is None:
            return "-"
        return f"{r.median_ms:.1f} ms / {r.peak_gib:.3f} GiB" if r.status == "ok" else r.status.upper()

    lines = [f"{'LR (x4, fp16)':>15} {'tokens':>10} " + " ".join(f"{c:>28}" for c in cols)]
    for h, w in sizes:
        by = {r.attention: r for r in main if (r.lr_h, r.lr_w) == (h, w)}
        lines.append(f"{f'{h}x{w}':>15} {h * w:>10,} " + " ".join(f"{cell(by.get(c)):>28}" for c in cols))
    for r in records:
        if r.find_max:
            lines.append(f"largest LR {r.attention} {r.precision} x{r.scale}: {r.size} ({r.tokens:,} tokens, output "
                         f"{r.out_h}x{r.out_w}): {cell(r)}; {r.message}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    preset = bench.PRESETS["h200"]
    partial = out / "records.jsonl"
    t0 = time.perf_counter()
    load = bench_report.load_average()
    try:
        records = bench.run_sweeps(preset.sweeps, preset.options, _Lines(partial))
    except NalasrError as e:  # no GPU visible, bad install: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = shlex.join(["python", "benchmarks/run_bench_gpu.py", *argv])
    env = bench_report.write_reports(records, json_path=out / "bench.json", markdown_path=out / "bench.md", command=command,
                              load_at_start=load)
    try:
        bench_report.write_plot(records, out / "bench.png")
    except Exception as e:  # noqa: BLE001 — the numbers are written; a plot problem must not hide them
        print(f"no plot: {e}", file=sys.stderr)
    partial.unlink(missing_ok=True)
    print()
    print(bench_report.machine_line(env))
    print(f"{len(records)} records in {time.perf_counter() - t0:.0f} s; {bench.RANDOM_WEIGHTS_NOTE}")
    print(f"wrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'bench.png'}")
    print()
    print(_short_table(records))
    print()
    for c in bench_report.check_targets(records):
        met = "n/a" if c.passed is None else ("yes" if c.passed else "NO")
        print(f"[{met:>3}] {c.target}: {c.measured}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
