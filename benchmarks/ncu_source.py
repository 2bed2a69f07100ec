"""Where each kernel's warps wait, instruction by instruction: Nsight Compute's stall sampling (SourceCounters) from
the CSV of its source page.

    ncu --profile-from-start off -k regex:"_fwd|_bwd" --section SourceCounters --section WarpStateStats \
        -o REP python benchmarks/ncu_attention.py
    ncu -i REP.ncu-rep --page source --csv --print-source sass > SRC.csv
    python3 benchmarks/ncu_source.py SRC.csv [--top 25]

For every kernel: its instructions, the sampled warp states (shares of all samples, "selected" = issuing) and the
instructions with the most samples, each with its three main reasons. Session 21 found this way that ptxas had put
two of the register reduce's next-tile loads on the scoreboard of a shuffle: one FADD 28 instructions later held
21% of the kernel's samples, waiting on the loads (long scoreboard); benchmarks/compile_sm90.py now reports how far
after issue each loop load is first waited on, offline.
"""

from __future__ import annotations

import argparse
import collections
import csv
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"


def kernels(path: Path) -> dict[str, list[dict[str, str]]]:
    """Kernel name → its instructions in address order, each a row of the source page (column → value)."""
    out: dict[str, list[dict[str, str]]] = {}
    name = header = None
    for row in csv.reader(path.open()):
        if not row:
            continue
        if row[0] == "Kernel Name":
            name, header = row[1], None
            out[name] = []
        elif row[0] == "Address":
            header = row
        elif name and header:
            out[name].append(dict(zip(header, row)))
    return out


def _int(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0


def report(name: str, rows: list[dict[str, str]], top: int) -> str:
    reasons = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k] if rows else []
    total = sum(_int(r[SAMPLES]) for r in rows) or 1
    by_reason = collections.Counter({k[6:]: sum(_int(r[k]) for r in rows) for k in reasons})
    lines = [f"== {name}: {len(rows)} instructions, {total} samples",
             "   " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_reason.most_common(9))]
    ranked = sorted(range(len(rows)), key=lambda i: -_int(rows[i][SAMPLES]))[:top]
    for i in ranked:
        r = rows[i]
        main = sorted(((_int(r[k]), k[6:]) for k in reasons if _int(r[k])), reverse=True)[:3]
        lines.append(f"  {i:4d} {100 * _int(r[SAMPLES]) / total:5.1f}% {r['Source'].strip()[:58]:58s} "
                     + " ".join(f"{k}:{v}" for v, k in main))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--top", type=int, default=25, help="instructions listed per kernel")
    args = ap.parse_args()
    for name, rows in kernels(args.csv).items():
        print(report(name, rows, args.top))


if __name__ == "__main__":
    main()
