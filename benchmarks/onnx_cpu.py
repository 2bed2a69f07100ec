"""onnxruntime (CPU) against PyTorch (CPU) on the same exported model: one 256x256 image, x4.

    python benchmarks/onnx_cpu.py --out benchmarks/results/onnx_cpu

Exports the shipped weights (nalasr.interop.onnx, fp32, dynamic H and W), then times each runtime's forward
alone (input prepared, output as an array): two warm-up runs, then the median of --repeat runs, at the same
thread count. Writes OUT.json and OUT.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch


def median_ms(fn, repeat: int) -> tuple[float, list[float]]:
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--size", type=int, default=256, help="LR side")
    ap.add_argument("--variants", default="default,small")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/onnx_cpu"))
    a = ap.parse_args()

    import onnxruntime as ort

    import nalasr
    from nalasr.interop.onnx import INPUT, export_onnx

    torch.set_num_threads(a.threads)
    x = torch.rand(1, 3, a.size, a.size, generator=torch.Generator().manual_seed(0))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in a.variants.split(","):
            model = nalasr.load_model(a.scale, variant=variant, device="cpu")
            model.set_attention_backend("reference")
            rep = export_onnx(model, Path(tmp) / f"{variant}.onnx")
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = a.threads
            sess = ort.InferenceSession(str(rep.path), sess_options=opts, providers=["CPUExecutionProvider"])
            xn = x.numpy()
            with torch.inference_mode():
                pt_ms, pt_all = median_ms(lambda: model(x), a.repeat)
            ort_ms, ort_all = median_ms(lambda: sess.run(None, {INPUT: xn}), a.repeat)
            with torch.inference_mode():
                diff = float(abs(sess.run(None, {INPUT: xn})[0] - model(x).numpy()).max())
            rows.append({"variant": variant, "pytorch_ms": round(pt_ms, 1), "onnxruntime_ms": round(ort_ms, 1),
                         "pytorch_runs_ms": [round(t, 1) for t in pt_all], "onnxruntime_runs_ms": [round(t, 1) for t in ort_all],
                         "max_abs_diff": diff, "export_s": rep.export_s, "onnx_bytes": rep.size_bytes})
    env = {"cpu": platform.processor() or platform.machine(), "threads": a.threads, "torch": torch.__version__,
           "onnxruntime": ort.__version__, "lr": [a.size, a.size], "scale": a.scale, "repeat": a.repeat}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps({"env": env, "rows": rows}, indent=1) + "\n")
    md = [f"# onnxruntime against PyTorch on the CPU: {a.size}x{a.size} x{a.scale}, fp32, {a.threads} threads", "",
          f"`python benchmarks/onnx_cpu.py` (torch {torch.__version__}, onnxruntime {ort.__version__}; "
          f"median of {a.repeat} runs after 2 warm-ups, forward alone)", "",
          "| variant | PyTorch ms | onnxruntime ms | onnxruntime / PyTorch | max abs diff |", "|---|---|---|---|---|"]
    md += [f"| {r['variant']} | {r['pytorch_ms']} | {r['onnxruntime_ms']} | {r['onnxruntime_ms'] / r['pytorch_ms']:.2f} | "
           f"{r['max_abs_diff']:.1e} |" for r in rows]
    a.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
