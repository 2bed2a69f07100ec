"""Where an eager forward's host time goes: the default ×4 model in fp16 on CUDA at one LR size, cProfile over
eager forwards (after warm-up), the top functions by own time and by cumulative time; and the GPU time of the same
forward replayed from a CUDA graph, for scale.

    PYTHONPATH=.:kernels python benchmarks/host_profile_gpu.py --size 192x256 --calls 20 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time

import torch

from nalasr.model import create_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="192x256")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json")
    a = ap.parse_args()
    h, w = (int(x) for x in a.size.split("x"))
    model = create_model("default", 4).to("cuda", torch.float16).eval()
    x = torch.rand(1, 3, h, w, device="cuda", dtype=torch.float16)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            model(x)
        t_host = (time.perf_counter() - t0) / a.calls * 1e3  # launches queued, GPU maybe behind
        torch.cuda.synchronize()
        t_eager = (time.perf_counter() - t0) / a.calls * 1e3
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.calls):
            model(x)
        prof.disable()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            model(x)
            with torch.cuda.graph(g, stream=s):
                model(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            g.replay()
        torch.cuda.synchronize()
        t_graph = (time.perf_counter() - t0) / a.calls * 1e3
    out = {}
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(a.top)
        out[key] = buf.getvalue()
    with torch.inference_mode(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        model(x)
        torch.cuda.synchronize()
    # every GPU-side event of one forward: kernels, and the copies and memsets PyTorch issues
    activities = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"{a.size}: eager {t_eager:.1f} ms a forward (host returns after {t_host:.1f}), graph replay {t_graph:.1f} ms, "
          f"{len(activities)} GPU activities a forward")
    print(out["tottime"][:6000])
    print(out["cumulative"][:6000])
    if a.json:
        json.dump({"size": a.size, "eager_ms": t_eager, "host_ms": t_host, "graph_ms": t_graph,
                   "gpu_activities": len(activities), **out}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
