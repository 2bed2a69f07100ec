"""Would torch.compile make the whole-image forward faster than CUDA-graph replay? (issue 6: 540×960 ≤ 19 ms)

    PYTHONPATH=.:kernels python benchmarks/compile_gpu.py [--sizes 192x256,540x960] [--json OUT.json]

Default variant, ×4, fp16, random weights. For each size: eager and graph-replayed latency (nalasr.graphs),
then ``torch.compile`` (Inductor, default mode, static shapes) — its compile time, latency, and the largest
difference from eager — and compiled + CUDA graphs ("reduce-overhead"). Inductor fuses the LayerNorms,
residual adds and activations that sit between the convolutions and GEMMs; the attention stays the fused
Triton custom op.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from nalasr.graphs import GraphedForward  # noqa: E402
from nalasr.model import create_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="192x256,540x960")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    for size in a.sizes.split(","):
        h, w = (int(v) for v in size.split("x"))
        model = create_model("default", 4).cuda().half().eval()
        x = torch.rand(1, 3, h, w, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
        row: dict = {"lr": size}
        with torch.inference_mode():
            ref = model(x)
            row["eager_ms"] = do_bench(lambda: model(x), return_mode="median")
            g = GraphedForward(model)
            g(x), g(x)
            row["graph_ms"] = do_bench(lambda: g(x), return_mode="median")
            for mode in ("default", "reduce-overhead"):
                try:
                    torch._dynamo.reset()
                    compiled = torch.compile(model, mode=mode, dynamic=False)
                    t0 = time.perf_counter()
                    y = compiled(x)
                    torch.cuda.synchronize()
                    row[f"compile_{mode}_s"] = time.perf_counter() - t0
                    compiled(x)
                    row[f"compiled_{mode}_ms"] = do_bench(lambda: compiled(x), return_mode="median")
                    row[f"compiled_{mode}_max_abs_diff"] = float((y.float() - ref.float()).abs().max())
                except Exception as e:  # a failure to compile is a result here
                    row[f"compiled_{mode}_error"] = repr(e)[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
