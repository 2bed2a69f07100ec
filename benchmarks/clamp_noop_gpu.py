"""test_kernels' clamp_noop check, with its numbers: θ's clamp forced on against the default (off for |α| ≤ 4) must
give the same bits; printed per dtype and repetition, with HALF2's map and PDL on and off, and the default against
itself (is a run reproducible at all?).

    PYTHONPATH=.:kernels:tests python benchmarks/clamp_noop_gpu.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_kernels import clamp_forced, switch_errors  # noqa: E402


def same(flag: str):
    return clamp_forced("0")  # the default at both settings


def main() -> None:
    for dtype in ("float16", "float32"):  # the default twice: is the run itself reproducible?
        errs = switch_errors("none", dtype, "cuda", patch=same)
        print(f"clamp-none default {dtype}: o {errs[0]:.3e} grad {errs[1]:.3e}", flush=True)
    for env in ({}, {"NALASR_MAP_HALF2": "0"}, {"NALASR_PDL": "0"}, {"NALASR_MAP_HALF2": "0", "NALASR_PDL": "0"}):
        with mock.patch.dict(os.environ, env):
            for rep in range(2):
                for dtype in ("float16", "float32"):
                    errs = switch_errors("clamp", dtype, "cuda", patch=clamp_forced)
                    print(f"clamp {env or 'default'} {dtype} rep {rep}: o {errs[0]:.3e} grad {errs[1]:.3e}", flush=True)


if __name__ == "__main__":
    main()
