"""Relative errors between a kernel switch's two settings (output and each gradient), on the device at hand:
the numbers behind the tolerances of test_kernels.run_extras' switch checks.

    PYTHONPATH=kernels:tests python benchmarks/switch_errors.py NALASR_REDUCE_SPLIT [--device cuda]
"""

from __future__ import annotations

import argparse
import os
from unittest import mock

from kernel_testing import rel_err
from test_kernels import CASES, _make

from nalasr_kernels.nala import nala_attention_triton


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("switch")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    for dtype in ("float16", "bfloat16", "float32"):
        runs = []
        for flag in ("0", "1"):
            q, k, v, g, leaves = _make({**CASES["batch3"], "dtype": dtype, "config": None}, a.device, seed=5)
            with mock.patch.dict(os.environ, {a.switch: flag}):
                o = nala_attention_triton(q, k, v)
                o.backward(g)
            runs.append([o.detach().float()] + [t.grad.float() for t in leaves])
        errs = [rel_err(y, x) for x, y in zip(*runs)]
        # batch3's layout is "qkvg": q, k, v are views of one leaf, so one gradient
        print(f"{a.switch} 0 vs 1, {dtype}: o {errs[0]:.2e}, " + ", ".join(f"grad {e:.2e}" for e in errs[1:]))


if __name__ == "__main__":
    main()
