"""NaLa attention benchmark: fused Triton kernels vs the PyTorch reference vs softmax attention, 4K → 1M tokens.

One global attention layer, B = 1, heads × dims 4×16 (default model), 3×16 (small model) and 6×16 (the design's
reference row), fp16 by default. q, k, v are strided views of one (B, N, 4·H·D) tensor, as one 4C-wide Linear
produces them (the model before session 5); the -dense rows take them as separate contiguous (B, N, H, D) tensors,
as the model's four C-wide products make them since. Providers:

    triton-fwd          fused kernels, forward (no grad)
    triton-fwd-graph    the same forward replayed from a CUDA graph: the GPU's time without Python launching the
                        kernels (~0.2 ms a call on the host that measured it, more than the GPU's time up to ~1M
                        tokens; `nalasr upscale` replays repeated sizes from CUDA graphs too)
    triton-fwd+bwd      fused kernels, forward + backward (dq, dk, dv)
    triton-fwd+bwd-graph  the same from a CUDA graph (autograd's backward captured with the forward)
    triton-fwd-graph-dense, triton-fwd+bwd-graph-dense   the two graph rows on separate contiguous q, k, v
    triton-fwd-unrolled-dense, triton-fwd+bwd-unrolled-dense   the same, many calls unrolled into one CUDA graph
                        (triton.testing.do_bench_cudagraph): a call's steady-state time in a stream of work, without
                        the graph's own launch and do_bench's L2 flush before every call that the -graph rows include
    ref-eager           nalasr.ops.nala.nala_attention_reference, forward
    ref-eager-fwd+bwd   the reference, forward + backward
    ref-compile         the reference under torch.compile(dynamic=True), forward
    sdpa-flash          softmax attention, F.scaled_dot_product_attention restricted to the flash backend
    softmax-mat         softmax attention materialised (q·kᵀ → softmax → ·v), skipped where it would exceed ~100 GiB

Columns: median ms (CUDA events via triton.testing.do_bench with warm-up; a few single calls for slow cases),
achieved GB/s counting the minimum bytes (forward: q, k, v read once + o written once; forward+backward: that plus
q, k, v, dO read and dq, dk, dv written), that as % of a device-to-device copy bandwidth measured in the same run,
and the peak extra memory of one call (torch.cuda.max_memory_allocated above what was allocated before it,
outputs and gradients included). Also a training step (forward + backward + Adam) of create_model('default', 4)
at LR 64×64, batch 32, bf16 autocast, with attention backend 'triton' vs 'reference'.

    python benchmarks/attention.py --out benchmarks/results          # on the GPU, ~3-4 min
    python benchmarks/attention.py --dry-run --out /tmp/nala-bench   # CPU smoke test, tiny sizes, interpreter

Every case is wrapped in try/except (an error or OOM becomes a cell); a time budget skips what would run late.
Writes attention_<dtype>.json and attention_<dtype>.md into --out and prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

GIB = 2**30
TOKENS = [4096, 16384, 49152, 131072, 262144, 518400, 1048576]
HEADS = [(4, 16), (3, 16), (6, 16)]
PROVIDERS = ["triton-fwd", "triton-fwd-graph", "triton-fwd+bwd", "triton-fwd+bwd-graph", "triton-fwd-graph-dense",
             "triton-fwd+bwd-graph-dense", "triton-fwd-unrolled-dense", "triton-fwd+bwd-unrolled-dense", "ref-eager",
             "ref-eager-fwd+bwd", "ref-compile", "sdpa-flash", "softmax-mat"]
_W = max(map(len, PROVIDERS))  # the provider column of the printed lines
SOFTMAX_MAT_LIMIT = 100 * GIB
SLOW_CALL_S = 2.5  # a provider whose single call is predicted longer than this is skipped at that size


# ------------------------------------------------------------------------------------------------ timing


class Clock:
    """CUDA timing (events / do_bench) on a GPU; perf_counter on CPU (dry runs)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def once(self, fn) -> float:
        """Milliseconds of one call."""
        if self.cuda:
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3

    def median_ms(self, fn, grad_to_none=None) -> tuple[float, int]:
        """(median ms, calls timed). Warm-up call first; slow calls are timed a few times, fast ones by do_bench."""
        fn()  # warm-up: compilation, autotuning, allocator
        self.sync()
        first = self.once(fn)
        if not self.cuda or first > 100:
            reps = 1 if first > 1000 or not self.cuda else 3
            times = [first] + [self.once(fn) for _ in range(reps - 1)]
            return statistics.median(times), len(times)
        import triton.testing

        ms = triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median")
        return float(ms), max(1, int(100 / max(ms, 1e-3)))

    def graph_median_ms(self, fn) -> tuple[float, int]:
        """(median ms, calls timed) of fn replayed from one CUDA graph; median_ms where there is no CUDA."""
        if not self.cuda:
            return self.median_ms(fn)
        import triton.testing
        from cuda_graph import capture  # benchmarks/, the script's directory

        fn()  # compilation and autotuning happen outside the capture
        ms = triton.testing.do_bench(capture(fn).replay, warmup=25, rep=100, return_mode="median")
        return float(ms), max(1, int(100 / max(ms, 1e-3)))

    def unrolled_median_ms(self, fn) -> tuple[float, int]:
        """(median ms, calls timed) a call of fn over calls unrolled into one CUDA graph (Triton's
        do_bench_cudagraph: ~100 ms of calls a replay, the median of its 10 replays); median_ms without CUDA."""
        if not self.cuda:
            return self.median_ms(fn)
        import triton.testing

        fn()  # compilation and autotuning happen outside the capture
        ms = triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
        return float(ms), 10 * max(1, int(100 / max(ms, 1e-3)))

    def steps_ms(self, fn, steps: int) -> float:
        """Milliseconds a call over ``steps`` calls back to back (a loop's steady state: the host queues the next
        call while the GPU runs this one), after one warm-up call."""
        fn()
        self.sync()
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        self.sync()
        return (time.perf_counter() - t) * 1e3 / steps

    def peak_extra(self, fn) -> float | None:
        """Bytes allocated at the peak of one call above what was allocated before it."""
        if not self.cuda:
            return None
        import torch

        self.sync()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        self.sync()
        return float(torch.cuda.max_memory_allocated() - base)


def copy_bandwidth(clock: Clock) -> float:
    """Device-to-device copy GB/s (bytes read + written), 2 GiB buffer."""
    import torch

    n = (2 * GIB) // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1.0)
    ms, _ = clock.median_ms(lambda: dst.copy_(src))
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 / (ms * 1e-3) / 1e9


# ----------------------------------------------------------------------------------------------- providers


def make_inputs(b: int, n: int, h: int, d: int, dtype, device, requires_grad: bool):
    """A (B, N, 4·H·D) tensor and q, k, v views of it (the model's layout), plus dO."""
    import torch

    x = torch.randn(b, n, 4 * h * d, device=device, dtype=dtype)
    if requires_grad:
        x.requires_grad_()
    g = torch.randn(b, n, h, d, device=device, dtype=dtype)
    return x, g


def views(x, b, n, h, d):
    return tuple(t.reshape(b, n, h, d) for t in x.chunk(4, dim=-1)[:3])


def provider_fn(name: str, x, g, b, n, h, d, ref_compiled):
    """A zero-argument callable running one call of the provider on the prepared inputs."""
    import torch
    import torch.nn.functional as F

    from nalasr.ops.nala import nala_attention_reference

    if name.startswith("triton"):
        from nalasr_kernels import nala_attention_triton as attn
    else:
        attn = nala_attention_reference
    if name == "ref-compile":
        attn = ref_compiled

    if name.endswith("-dense"):  # separate contiguous leaves, made once outside the timed call
        qkv = [t.detach().contiguous().requires_grad_(with_grad(name)) for t in views(x, b, n, h, d)]

        def fn():
            if not with_grad(name):
                with torch.no_grad():
                    return attn(*qkv)
            for t in qkv:
                t.grad = None
            attn(*qkv).backward(g)
        return fn
    if with_grad(name):
        def fn():
            x.grad = None  # a fresh gradient each call, not an accumulation
            o = attn(*views(x, b, n, h, d))
            o.backward(g)
        return fn
    if name in ("triton-fwd", "triton-fwd-graph", "ref-eager", "ref-compile"):
        def fn():
            with torch.no_grad():
                return attn(*views(x, b, n, h, d))
        return fn
    if name == "sdpa-flash":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def fn():
            q, k, v = (t.transpose(1, 2) for t in views(x, b, n, h, d))  # (B, H, N, D), strided
            with torch.no_grad(), sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v)
        return fn
    if name == "softmax-mat":
        def fn():
            q, k, v = (t.transpose(1, 2) for t in views(x, b, n, h, d))
            with torch.no_grad():
                return torch.softmax((q @ k.transpose(-1, -2)) * d**-0.5, dim=-1) @ v
        return fn
    raise ValueError(name)


def with_grad(name: str) -> bool:
    return "fwd+bwd" in name


def min_bytes(name: str, b, n, h, d, elt) -> int:
    one = b * n * h * d * elt
    return (4 + 7) * one if with_grad(name) else 4 * one


# -------------------------------------------------------------------------------------------------- runner


def run_attention(args, clock: Clock, device: str, dtype, copy_gbs: float | None, deadline: float) -> list[dict]:
    import torch

    rows: list[dict] = []
    ref_compiled = None
    last_ms: dict[tuple, tuple[int, float]] = {}  # (provider, heads) → (tokens, ms) of the last success
    for h, d in args.heads:
        for n in args.tokens:
            for name in args.providers:
                row = {"provider": name, "tokens": n, "heads": h, "head_dim": d, "ms": None, "gbs": None,
                       "pct_copy": None, "peak_extra_bytes": None, "note": ""}
                rows.append(row)
                elt = torch.tensor([], dtype=dtype).element_size()
                if time.perf_counter() > deadline:
                    row["note"] = "skipped: time budget"
                    continue
                if name == "softmax-mat":
                    est = 4.5 * h * n * n * elt  # scores, probabilities and softmax temporaries
                    if est > SOFTMAX_MAT_LIMIT:
                        row["note"] = f"n/a: needs ~{est / GIB:.0f} GiB"
                        continue
                if name in ("sdpa-flash", "softmax-mat") and device != "cuda":
                    row["note"] = "n/a: needs CUDA"
                    continue
                prev = last_ms.get((name, h))
                if prev is not None:
                    quad = name in ("sdpa-flash", "softmax-mat")
                    predicted = prev[1] * (n / prev[0]) ** (2 if quad else 1) / 1e3
                    if predicted > SLOW_CALL_S:
                        row["note"] = f"skipped: ~{predicted:.0f} s a call"
                        continue
                try:
                    if name == "ref-compile" and ref_compiled is None:
                        from nalasr.ops.nala import nala_attention_reference

                        ref_compiled = torch.compile(nala_attention_reference, dynamic=True)
                    needs_grad = with_grad(name)
                    x, g = make_inputs(1, n, h, d, dtype, device, needs_grad)
                    fn = provider_fn(name, x, g, 1, n, h, d, ref_compiled)
                    timer = (clock.unrolled_median_ms if "-unrolled" in name else
                             clock.graph_median_ms if "-graph" in name else clock.median_ms)
                    ms, calls = timer(fn)
                    if needs_grad:
                        x.grad = None
                    peak = clock.peak_extra(fn)
                    row.update(ms=ms, calls=calls, peak_extra_bytes=peak)
                    gbs = min_bytes(name, 1, n, h, d, elt) / (ms * 1e-3) / 1e9
                    row["gbs"] = gbs
                    row["pct_copy"] = 100 * gbs / copy_gbs if copy_gbs else None
                    last_ms[(name, h)] = (n, ms)
                except torch.cuda.OutOfMemoryError:
                    row["note"] = "OOM"
                except Exception as e:  # one failing case must not end the run
                    row["note"] = f"error: {type(e).__name__}: {str(e)[:160]}"
                    traceback.print_exc(limit=2)
                finally:
                    x = g = fn = None  # noqa: F841
                    if device == "cuda":
                        torch.cuda.empty_cache()
                print(_row_line(row), flush=True)
    return rows


def run_training(args, clock: Clock, device: str, deadline: float) -> list[dict]:
    """One optimisation step of the default model, backend 'triton' vs 'reference' (eager)."""
    import torch
    import torch.nn.functional as F

    from nalasr.model import create_model

    rows = []
    b, lr = (args.train_batch, args.train_lr)
    for backend in ("triton", "reference"):
        row = {"backend": backend, "batch": b, "lr_size": lr, "ms": None, "peak_extra_bytes": None, "note": ""}
        rows.append(row)
        if time.perf_counter() > deadline:
            row["note"] = "skipped: time budget"
            continue
        if backend == "triton" and device != "cuda":
            row["note"] = "n/a: needs CUDA"
            continue
        try:
            torch.manual_seed(0)
            model = create_model("default", 4).to(device)
            model.set_attention_backend(backend)
            opt = torch.optim.Adam(model.parameters(), lr=2e-4)
            x = torch.rand(b, 3, lr, lr, device=device)
            y = torch.rand(b, 3, 4 * lr, 4 * lr, device=device)
            amp = torch.autocast(device_type=device, dtype=torch.bfloat16)

            def step():
                opt.zero_grad(set_to_none=True)
                with amp:
                    loss = F.l1_loss(model(x), y)
                loss.backward()
                opt.step()

            # Two steps before timing: the first initialises Adam's state and tunes the kernels; in session 20 the
            # second of the default model's still took over 100 ms (call 7: median of three single steps 110.1 ms,
            # against 80.3 by do_bench in call 5 with the same attention kernels bar _bwd_key's plan).
            step()
            ms, calls = clock.median_ms(step)
            row.update(ms=ms, calls=calls, peak_extra_bytes=clock.peak_extra(step))
            if args.train_steps:
                row["steps_ms"] = clock.steps_ms(step, args.train_steps)
                row["steps"] = args.train_steps
        except torch.cuda.OutOfMemoryError:
            row["note"] = "OOM"
        except Exception as e:
            row["note"] = f"error: {type(e).__name__}: {str(e)[:160]}"
            traceback.print_exc(limit=2)
        finally:
            model = opt = None  # noqa: F841
            if device == "cuda":
                torch.cuda.empty_cache()
        print(f"train step {backend:9s} B={b} LR {lr}×{lr}: " + (f"{row['ms']:.2f} ms" if row["ms"] else row["note"])
              + (f", {row['steps_ms']:.2f} ms a step over {row['steps']} back to back" if "steps_ms" in row else ""),
              flush=True)
    return rows


# ------------------------------------------------------------------------------------------------- output


def _fmt_bytes(v) -> str:
    if v is None:
        return "–"
    return f"{v / GIB:.2f} GiB" if v >= GIB else f"{v / 2**20:.1f} MiB"


def _row_line(r: dict) -> str:
    if r["ms"] is None:
        return f"{r['provider']:{_W}s} {r['heads']}×{r['head_dim']:<3d} N={r['tokens']:>8d}  {r['note']}"
    pct = f"{r['pct_copy']:5.1f}%" if r["pct_copy"] is not None else "   – "
    return (f"{r['provider']:{_W}s} {r['heads']}×{r['head_dim']:<3d} N={r['tokens']:>8d}  {r['ms']:10.3f} ms "
            f"{r['gbs']:8.1f} GB/s {pct}  peak {_fmt_bytes(r['peak_extra_bytes'])}")


def markdown(meta: dict, rows: list[dict], train: list[dict]) -> str:
    lines = [f"# NaLa attention benchmark — {meta['device']}", "",
             f"{meta['date']} · torch {meta['torch']} · triton {meta['triton']} · {meta['dtype']} · B = 1 · "
             f"q, k, v strided views of one (B, N, 4·H·D) tensor (-dense rows: separate contiguous tensors) · "
             "copy bandwidth "
             + (f"{meta['copy_gbs']:.0f} GB/s (read + write)" if meta["copy_gbs"] else "–")
             + (" · DRY RUN (CPU, interpreter): timings meaningless" if meta["dry_run"] else ""), "",
             "ms: median; GB/s: minimum bytes (fwd: q, k, v + o; fwd+bwd: also dO, dq, dk, dv) / time; "
             "% copy: of the measured copy bandwidth; peak: extra memory of one call, outputs included.", ""]
    for h, d in meta["heads"]:
        lines += [f"## {h} heads × {d}", "", "| provider | " + " | ".join(f"{n:,}" for n in meta["tokens"]) + " |",
                  "|---|" + "---|" * len(meta["tokens"])]
        for name in meta["providers"]:
            cells = []
            for n in meta["tokens"]:
                r = next((r for r in rows if r["provider"] == name and r["heads"] == h and r["head_dim"] == d
                          and r["tokens"] == n), None)
                if r is None or r["ms"] is None:
                    cells.append(r["note"] if r else "–")
                else:
                    pct = f" ({r['pct_copy']:.0f}%)" if r["pct_copy"] is not None else ""
                    cells.append(f"{r['ms']:.3f} ms · {r['gbs']:.0f} GB/s{pct} · {_fmt_bytes(r['peak_extra_bytes'])}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    # Derived: backward time = (fwd+bwd) − fwd, and the speed-up over the eager reference, from the CUDA-graph rows
    # where both ran (the eager ones include Python launching the kernels; one of each would not subtract).
    # Both layouts: the strided views (with the eager rows where no graph ran) and the -dense rows.
    lines += ["## Derived (fused kernels; CUDA-graph rows where both ran)", "",
              "views: the fwd+bwd time includes autograd assembling the projection's gradient (chunk's backward "
              "concatenates dq, dk, dv and a zero block for the fourth quarter into one (B, N, 4·H·D) tensor), which "
              "the -dense rows do not pay.", "",
              "| heads | tokens | q, k, v | fwd ms | bwd ms (fwd+bwd − fwd) | bwd / fwd | × faster than ref-eager fwd |",
              "|---|---|---|---|---|---|---|"]
    for h, d in meta["heads"]:
        for n in meta["tokens"]:
            get = {r["provider"]: r["ms"] for r in rows if r["heads"] == h and r["head_dim"] == d and r["tokens"] == n}
            ref = get.get("ref-eager")
            for layout, suffix in (("views", "-graph"), ("dense", "-graph-dense"), ("dense, unrolled", "-unrolled-dense")):
                f, fb = get.get(f"triton-fwd{suffix}"), get.get(f"triton-fwd+bwd{suffix}")
                if not (f and fb) and suffix == "-graph":
                    f, fb = get.get("triton-fwd"), get.get("triton-fwd+bwd")
                if f and fb:
                    bwd = fb - f
                    lines.append(f"| {h}×{d} | {n:,} | {layout} | {f:.3f} | {bwd:.3f} | {bwd / f:.2f} | "
                                 + (f"{ref / f:.1f}" if ref else "–") + " |")
    lines += ["", "## Training step (create_model('default', 4), Adam, bf16 autocast, eager)", "",
              "ms / step: the median of single steps (do_bench where a step takes under 100 ms); back to back: the "
              "mean over that many steps in a row (the host queues the next step while the GPU runs this one).",
              "", "| backend | batch | LR | ms / step | back to back | peak extra |", "|---|---|---|---|---|---|"]
    for r in train:
        ms = f"{r['ms']:.2f}" if r["ms"] else r["note"]
        steps = f"{r['steps_ms']:.2f} ms ({r['steps']} steps)" if "steps_ms" in r else "–"
        lines.append(f"| {r['backend']} | {r['batch']} | {r['lr_size']}×{r['lr_size']} | {ms} | {steps} | "
                     f"{_fmt_bytes(r['peak_extra_bytes'])} |")
    return "\n".join(lines) + "\n"


def summary_table(rows: list[dict], train: list[dict]) -> str:
    out = [f"{'provider':{_W}s} {'heads':5s} {'tokens':>9s} {'ms':>10s} {'GB/s':>8s} {'%copy':>6s} {'peak':>10s}"]
    for r in rows:
        if r["ms"] is None:
            out.append(f"{r['provider']:{_W}s} {r['heads']}×{r['head_dim']:<3d} {r['tokens']:>9d}  {r['note']}")
        else:
            pct = f"{r['pct_copy']:5.1f}%" if r["pct_copy"] is not None else "    –"
            out.append(f"{r['provider']:{_W}s} {r['heads']}×{r['head_dim']:<3d} {r['tokens']:>9d} {r['ms']:10.3f} "
                       f"{r['gbs']:8.1f} {pct} {_fmt_bytes(r['peak_extra_bytes']):>10s}")
    for r in train:
        out.append(f"train step {r['backend']:9s} B={r['batch']} LR {r['lr_size']}: "
                   + (f"{r['ms']:.2f} ms/step" if r["ms"] else r["note"]))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for attention_<dtype>.json / .md")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--tokens", type=int, nargs="*", default=None)
    ap.add_argument("--heads", nargs="*", default=None, help="HxD items, e.g. 4x16 6x16")
    ap.add_argument("--providers", nargs="*", default=None, choices=PROVIDERS)
    ap.add_argument("--budget-s", type=float, default=225.0, help="stop starting new cases after this many seconds")
    ap.add_argument("--train-batch", type=int, default=32)
    ap.add_argument("--train-lr", type=int, default=64)
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--train-steps", type=int, default=10,
                    help="also time this many training steps back to back (0: only the single-step median)")
    ap.add_argument("--train-only", action="store_true", help="the training step alone, no attention table")
    ap.add_argument("--dry-run", action="store_true",
                    help="tiny sizes; without CUDA the kernels run in the Triton interpreter on CPU")
    ap.add_argument("--render", type=Path, default=None,
                    help="a recorded attention_<dtype>.json: write its markdown into --out again, measure nothing")
    args = ap.parse_args()
    if args.render:
        rec = json.loads(args.render.read_text())
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / args.render.with_suffix(".md").name).write_text(markdown(rec["meta"], rec["attention"], rec["train_step"]))
        return 0

    cuda_present = _cuda_present()
    if args.dry_run:
        if not cuda_present:
            os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
        args.tokens = args.tokens or [64, 130]
        args.heads = args.heads or ["2x16"]
        args.train_batch, args.train_lr = 2, 16
        if Path(args.out).resolve() == (ROOT / "benchmarks" / "results").resolve():
            ap.error("a dry run does not write into benchmarks/results (real GPU runs only)")
    elif not cuda_present:
        ap.error("no CUDA device: use --dry-run for a CPU smoke test")
    args.tokens = args.tokens or TOKENS
    args.heads = [tuple(int(v) for v in s.lower().split("x")) for s in args.heads] if args.heads else HEADS
    args.providers = args.providers or PROVIDERS

    import torch
    import triton

    device = "cuda" if cuda_present else "cpu"
    dtype = getattr(torch, args.dtype)
    clock = Clock(device == "cuda")
    start = time.perf_counter()
    deadline = start + args.budget_s
    copy_gbs = copy_bandwidth(clock) if device == "cuda" else None
    meta = {
        "device": torch.cuda.get_device_name() if device == "cuda" else f"CPU ({platform.processor() or 'cpu'})",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "torch": torch.__version__,
        "triton": triton.__version__, "dtype": args.dtype, "copy_gbs": copy_gbs, "dry_run": args.dry_run,
        "tokens": args.tokens, "heads": args.heads, "providers": args.providers, "batch": 1,
        "layout": "q, k, v = views of one (B, N, 4*H*D) tensor; -dense providers: separate contiguous tensors",
        "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
    }
    if copy_gbs:
        print(f"copy bandwidth {copy_gbs:.0f} GB/s (read + write)", flush=True)
    rows = [] if args.train_only else run_attention(args, clock, device, dtype, copy_gbs, deadline)
    train = [] if args.no_train else run_training(args, clock, device, deadline + 60)
    meta["seconds"] = round(time.perf_counter() - start, 1)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"attention_{args.dtype}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "attention": rows, "train_step": train}, indent=1))
    (out / f"{stem}.md").write_text(markdown(meta, rows, train))
    print(f"\nwrote {out / (stem + '.json')} and {out / (stem + '.md')} in {meta['seconds']} s\n")
    print(summary_table(rows, train))
    return 0


def _cuda_present() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
