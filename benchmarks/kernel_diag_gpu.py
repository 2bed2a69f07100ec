"""Where the GPU time of NaLa attention and of the network goes: kernel time vs launch overhead, and the knobs.

    PYTHONPATH=.:kernels python benchmarks/kernel_diag_gpu.py --json OUT.json [--old PATH/nala_old.py | PATH/nalasr_kernels]

For the attention (B = 1, 4 heads × 16, fp16, q/k/v strided views of one (1, N, 256) tensor, as in
benchmarks/attention.py) at several token counts, and for each kernel module (this tree's and, with --old, an
earlier nala.py loaded under another name) and each programs-per-SM setting:
  - ``bench``: triton.testing.do_bench median (what benchmarks/attention.py reports; includes launch cost
    whenever the CPU is slower than the GPU),
  - ``graph``: the same call replayed from a CUDA graph (GPU time only, no Python),
  - ``cpu``: µs of Python/launch work per call (100 calls enqueued without a sync).
Then the per-kernel CUDA times from torch.profiler, registers/spills of the tuned kernels, the whole network
(bench / graph / cpu per forward) with PyTorch's and the fused LayerNorm, and a training step (B 64, LR 48², bf16
autocast) for attention reference/triton × LayerNorm torch/fused, with the fused-LN gradients checked against
PyTorch's on the same step. Prints a table per part; everything also goes to --json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels"), str(ROOT / "tests")]

from cuda_graph import capture  # noqa: E402  (benchmarks/, the script's directory)
from kernel_testing import rel_err  # noqa: E402,F401  (tests/; heads_group_gpu, pdl_gpu, prefetch_gpu take it from here)
from nalasr.model import create_model  # noqa: E402

H, D = 4, 16
HP = (3.0, 0.5, 1.0, 1e-6, 0, 0, 100.0)  # λ, τ, α, ε, no RoPE: nala_forward / nala_backward's hyper-parameters


def graph_ms(fn, reps: int = 50) -> float:
    """Median-free mean ms per call of fn replayed from one CUDA graph (fn must be warmed up already)."""
    g = capture(fn)
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e3


def cpu_us(fn, calls: int = 100) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def load_module(path: str | None, name: str):
    """This tree's nalasr_kernels.nala (path None), an earlier nala.py, or the nala module of an earlier copy of the
    whole nalasr_kernels package (path a directory: its relative imports, nala_rr, resolve inside the copy)."""
    if path is None:
        import nalasr_kernels.nala as mod
        return mod
    if Path(path).is_dir():
        spec = importlib.util.spec_from_file_location(name, Path(path) / "__init__.py",
                                                      submodule_search_locations=[str(path)])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules[name] = pkg
        spec.loader.exec_module(pkg)
        return importlib.import_module(f"{name}.nala")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _inputs(n: int, layout: str) -> tuple[torch.Tensor, ...]:
    """q, k, v, dO (1, n, H, D) fp16: "qkvg" = strided views of one (1, n, 4·H·D) projection (the model before
    session 5), "dense" = separate contiguous tensors (the model since: four C-wide GEMMs), "cmajor" = channel-major:
    (1, H, D, n) in memory, tokens the unit-stride axis, as an NCHW feature map or a transposed projection gives."""
    if layout == "qkvg":
        x = torch.randn(1, n, 4 * H * D, device="cuda", dtype=torch.float16)
        q, k, v = (x[..., i * H * D:(i + 1) * H * D].view(1, n, H, D) for i in range(3))
    elif layout == "cmajor":
        return tuple(torch.randn(1, H, D, n, device="cuda", dtype=torch.float16).permute(0, 3, 1, 2)
                     for _ in range(4))
    elif layout == "hmajor":  # head-major storage (1, H, n, D): each head's tokens contiguous
        return tuple(torch.randn(1, H, n, D, device="cuda", dtype=torch.float16).transpose(1, 2) for _ in range(4))
    else:
        q, k, v = (torch.randn(1, n, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    return q, k, v, torch.randn(1, n, H, D, device="cuda", dtype=torch.float16)


def set_ppsm(mod, p: int | None) -> None:
    """Programs per SM of _bwd_query (a per-pass dict since session 13, whose _fwd_reduce runs one-warp programs)
    or of both reduce passes (one int, older modules); None leaves the module's own."""
    if p is None:
        return
    if isinstance(mod._PROGRAMS_PER_SM, dict):
        mod._PROGRAMS_PER_SM["bwd_query"] = p
    else:
        mod._PROGRAMS_PER_SM = p


def attention_rows(mods: dict, sizes: list[int], ppsm: list[int], layout: str = "qkvg") -> list[dict]:
    rows = []
    for n in sizes:
        q, k, v, do = _inputs(n, layout)
        fwd_bytes = 4 * n * H * D * 2
        bwd_bytes = 7 * n * H * D * 2
        for name, mod in mods.items():
            for p in (ppsm if name == "new" else [8]):
                set_ppsm(mod, p)
                fwd = lambda: mod.nala_forward(q, k, v, *HP)  # noqa: E731
                _, state = fwd()
                bwd = lambda: mod.nala_backward(do, q, k, v, state, *HP)  # noqa: E731
                bwd()
                torch.cuda.synchronize()
                r = {"tokens": n, "module": name, "ppsm": p, "layout": layout}
                for tag, fn, nbytes in (("fwd", fwd, fwd_bytes), ("bwd", bwd, bwd_bytes)):
                    r[f"{tag}_bench_ms"] = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    r[f"{tag}_graph_ms"] = graph_ms(fn)
                    r[f"{tag}_cpu_us"] = cpu_us(fn)
                    r[f"{tag}_graph_gbs"] = nbytes / r[f"{tag}_graph_ms"] / 1e6
                rows.append(r)
                print(f"{n:8d} {name:3s} {layout} ppsm {p:2d} | fwd bench {r['fwd_bench_ms']:.3f} graph {r['fwd_graph_ms']:.3f} ms "
                      f"({r['fwd_graph_gbs']:.0f} GB/s) cpu {r['fwd_cpu_us']:.0f} µs | bwd bench {r['bwd_bench_ms']:.3f} "
                      f"graph {r['bwd_graph_ms']:.3f} ms cpu {r['bwd_cpu_us']:.0f} µs", flush=True)
        set_ppsm(mods["new"], 8)
    return rows


def cuda_times(fn, reps: int) -> list[tuple[str, float, int]]:
    """(kernel, total CUDA µs, launches) of every kernel over reps calls of fn, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if us:
            out.append((e.key, us, e.count))
    return out


def kernel_us(fn, reps: int = 20) -> dict[str, float]:
    """µs per call of fn spent in each of the attention's kernels (the names starting with "_")."""
    out: dict[str, float] = {}
    for key, us, _ in cuda_times(fn, reps):
        if key.startswith("_"):
            out[key] = out.get(key, 0.0) + us / reps
    return out


def kernel_profile(mod, n: int, layout: str = "qkvg") -> list[dict]:
    q, k, v, do = _inputs(n, layout)

    def step():
        _, st = mod.nala_forward(q, k, v, *HP)
        mod.nala_backward(do, q, k, v, st, *HP)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    out = [{"kernel": key[:60], "us_per_call": us / max(count, 1), "count": count}
           for key, us, count in cuda_times(step, 10)]
    out.sort(key=lambda r: -r["us_per_call"])
    for r in out:
        print(f"  {r['kernel']:60s} {r['us_per_call']:9.1f} µs × {r['count']}")
    return out


def registers(mod) -> list[dict]:
    out = []
    for name in ("_fwd_reduce_tuned", "_fwd_map_tuned", "_bwd_query_tuned", "_bwd_key_tuned"):
        tuned = getattr(mod, name)
        for key, cfg in getattr(tuned, "cache", {}).items():
            out.append({"kernel": name, "key": str(key)[:60], "config": str(cfg)})
        try:
            for cache in tuned.fn.device_caches.values():
                for compiled in cache[0].values():
                    out.append({"kernel": name, "n_regs": compiled.n_regs, "n_spills": compiled.n_spills,
                                "warps": compiled.metadata.num_warps, "shared": compiled.metadata.shared})
        except Exception as e:  # layout of Triton's caches differs between versions
            out.append({"kernel": name, "error": repr(e)[:120]})
    for r in out:
        print("  ", r)
    return out


def network_rows() -> list[dict]:
    rows = []
    model = create_model("default", 4).cuda().half().eval()
    for hw in ((192, 256), (540, 960)):
        x = torch.rand(1, 3, *hw, device="cuda", dtype=torch.half)
        for flag in ("0", "1"):
            os.environ["NALASR_FUSED_LAYERNORM"] = flag
            with torch.inference_mode():
                fn = lambda: model(x)  # noqa: E731
                fn()
                r = {"lr": f"{hw[0]}x{hw[1]}", "fused_ln": flag == "1",
                     "bench_ms": do_bench(fn, warmup=100, rep=500, return_mode="median"), "cpu_ms": cpu_us(fn, 20) / 1e3}
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                fn()
                r["peak_gib"] = (torch.cuda.max_memory_allocated() - base) / 2**30
            try:
                with torch.inference_mode():
                    r["graph_ms"] = graph_ms(fn, 20)
            except Exception as e:
                r["graph_ms"] = None
                r["graph_error"] = repr(e)[:160]
            rows.append(r)
            print(f"network LR {r['lr']} fused LN {flag}: bench {r['bench_ms']:.1f} ms, graph {r['graph_ms']} ms, "
                  f"cpu {r['cpu_ms']:.1f} ms/forward, peak {r['peak_gib']:.3f} GiB", flush=True)
    os.environ["NALASR_FUSED_LAYERNORM"] = "0"
    return rows


def train_rows(batch: int = 64, lr_px: int = 48) -> list[dict]:
    rows = []
    x = torch.rand(batch, 3, lr_px, lr_px, device="cuda")
    y = torch.rand(batch, 3, 4 * lr_px, 4 * lr_px, device="cuda")
    grads = {}
    for backend in ("triton", "reference"):
        for flag in ("0", "1"):
            os.environ["NALASR_FUSED_LAYERNORM"] = flag
            torch.manual_seed(0)
            model = create_model("default", 4).cuda()
            model.set_attention_backend(backend)
            opt = torch.optim.AdamW(model.parameters(), lr=2e-4)

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.l1_loss(model(x), y)
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                F.l1_loss(model(x), y).backward()
            grads[(backend, flag)] = torch.cat([p.grad.float().flatten() for p in model.parameters()])
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                step()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) / 20 * 1e3
            ref = grads[("triton", "0")] if (backend, flag) != ("triton", "0") else None
            err = float((grads[(backend, flag)] - ref).norm() / ref.norm()) if ref is not None else 0.0
            rows.append({"backend": backend, "fused_ln": flag == "1", "ms": ms, "it_s": 1e3 / ms,
                         "grad_rel_vs_triton_torchln": err})
            print(f"train B{batch} LR{lr_px} x4 bf16: attention {backend:9s} fused LN {flag}: {ms:.1f} ms/step "
                  f"({1e3 / ms:.1f} it/s), grad rel diff vs triton+torch LN {err:.2e}", flush=True)
            model = opt = None  # noqa: F841
            torch.cuda.empty_cache()
    os.environ["NALASR_FUSED_LAYERNORM"] = "0"
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--old", default=None,
                    help="an earlier kernels nala.py, or a copy of the nalasr_kernels package, to compare against")
    ap.add_argument("--sizes", default="16384,131072,518400")
    ap.add_argument("--ppsm", default="4,8,16,32")
    ap.add_argument("--parts", default="attention,profile,registers,network,train")
    ap.add_argument("--profile-n", type=int, default=518400, help="the token count the profile part runs at")
    ap.add_argument("--layout", default="qkvg", choices=["qkvg", "dense", "cmajor", "hmajor"],
                    help="q, k, v as the model passes them (qkvg, dense), channel-major or head-major")
    a = ap.parse_args()
    parts = a.parts.split(",")
    mods = {"new": load_module(None, "new")}
    if a.old:
        mods["old"] = load_module(a.old, "nalasr_kernels_nala_old")
    res: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton
    res["triton"] = triton.__version__
    steps = [("attention", lambda: attention_rows(mods, [int(s) for s in a.sizes.split(",")],
                                                  [int(p) for p in a.ppsm.split(",")], a.layout)),
             ("profile", lambda: kernel_profile(mods["new"], a.profile_n, a.layout)),
             ("registers", lambda: registers(mods["new"])),
             ("train", train_rows),  # before the network: device_session3.sh picks training settings from it
             ("network", network_rows)]
    for name, fn in steps:
        if name not in parts:
            continue
        print(f"== {name}", flush=True)
        try:  # one broken part must not cost the others (each device call is precious)
            res[name] = fn()
        except Exception as e:
            import traceback
            traceback.print_exc(limit=3)
            res[name] = {"error": repr(e)[:300]}
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
