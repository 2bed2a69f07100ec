"""Would torch.compile make the whole-image forward faster than CUDA-graph replay? (issue 6: 540×960 ≤ 19 ms)

    PYTHONPATH=.:kernels python benchmarks/compile_gpu.py [--sizes 192x256,540x960] [--json OUT.json]

Default variant, ×4, fp16, random weights. For each size: eager and graph-replayed latency (nalasr.graphs),
then ``torch.compile`` (Inductor, default mode, static shapes) — its compile time, latency, and the largest
difference from eager — and compiled + CUDA graphs ("reduce-overhead"). Inductor fuses the LayerNorms,
residual adds and activations that sit between the convolutions and GEMMs; the attention stays the fused
Triton custom op.
"""

from __future__ import annotations

import json
import time

import torch
from forward_ab import eager_and_replay_ms, lr_image, lr_sizes, parse_args, write_rows  # puts the repo on sys.path
from triton.testing import do_bench

from nalasr.model import create_model


def main() -> int:
    a = parse_args(__doc__.splitlines()[0])
    rows = []
    for size, h, w in lr_sizes(a.sizes):
        model = create_model("default", 4).cuda().half().eval()
        x = lr_image(h, w)
        row: dict = {"lr": size}
        with torch.inference_mode():
            ref = model(x)
            row.update(eager_and_replay_ms(model, x))
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
    write_rows(rows, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
