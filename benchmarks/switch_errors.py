"""Relative errors between a kernel switch's two settings (output and gradient), on the device at hand: the
numbers behind the tolerances of test_kernels.run_extras' switch checks.

    PYTHONPATH=kernels:tests python benchmarks/switch_errors.py NALASR_REDUCE_SPLIT [--device cuda]
"""

from __future__ import annotations

import argparse

from test_kernels import switch_errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("switch")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    for dtype in ("float16", "bfloat16", "float32"):
        errs = switch_errors(a.switch, dtype, a.device)
        print(f"{a.switch} 0 vs 1, {dtype}: o {errs[0]:.2e}, " + ", ".join(f"grad {e:.2e}" for e in errs[1:]))


if __name__ == "__main__":
    main()
