"""benchmarks/attention.py's markdown: the committed table is what its recorded JSON renders to (neither edited by
hand nor left behind a change of the renderer), and the derived rows follow from the measured ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "results" / "attention_float16.json"


def test_committed_table_renders_from_its_json(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "attention.py"), "--out", str(tmp_path),
                    "--render", str(RECORD)], check=True, capture_output=True, text=True, timeout=120)
    assert (tmp_path / "attention_float16.md").read_text() == RECORD.with_suffix(".md").read_text()


def test_derived_ratio_is_backward_over_forward():
    rows = json.loads(RECORD.read_text())["attention"]
    ms = {(r["provider"], r["tokens"]): r["ms"] for r in rows}
    f, fb = ms[("triton-fwd-graph-dense", 518400)], ms[("triton-fwd+bwd-graph-dense", 518400)]
    line = next(s for s in RECORD.with_suffix(".md").read_text().splitlines() if re.match(r"\| 4×16 \| 518,400 \| dense \|", s))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert float(cells[3]) == round(f, 3) and abs(float(cells[5]) - (fb - f) / f) < 5e-3
