"""The attention's launch-config table from the autotuner: an opt-in benchmark tool (GPU only).

At inference and in training the tl.dot passes of the fused NaLa attention (fwd_reduce, fwd_map, bwd_query, bwd_key:
the fallbacks for bfloat16, float32, other head dims, RoPE) launch with the one config of
``nalasr_kernels.nala.configs.TABLE`` their plan names; nothing is autotuned there. This script runs the autotuner
(``nalasr_kernels.nala.tuning``: the table's configs and ``configs.TUNING_SPACE``, pruned by the register limits) on
the forward and backward of representative inputs, prints per (pass, kind, BD, token-count bucket) the config the
table gives and the one the autotuner picked with their times, and the ``TABLE`` literal built from the picks (rows
the run did not touch kept from the committed table), to paste into kernels/nalasr_kernels/nala/configs.py.

Inputs: B = 1, H heads, q, k, v the model's views of one (B, N, 4·H·D) Linear output, N = rows × cols of a token
grid (RoPE over that grid where asked). A case per dtype × head dim × grid; the model's own float16 16-dim heads
without RoPE take the register passes (not tuned), hence float16 runs with RoPE by default.

    python benchmarks/kernel_configs.py                          # the default cases, several minutes on an H200
    python benchmarks/kernel_configs.py --dims 16 --grids 256x256,540x960 --out benchmarks/results/kernel_configs
    python benchmarks/kernel_configs.py --literal                # only the TABLE literal on stdout

Writes kernel_configs.json (every pick with the times of every config tried) and kernel_configs_table.py (the
literal) into --out when given. Exits 2 without a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

DTYPES = ("bfloat16", "float16-rope", "float32")
DIMS = (16, 32, 64)
GRIDS = ("128x128", "256x256", "512x512", "540x960", "1024x1024")  # 2^16 … 2^22 (token, head) rows at 4 heads


def parse_grid(text: str) -> tuple[int, int]:
    rows, cols = (int(x) for x in text.lower().split("x"))
    if rows < 1 or cols < 1:
        raise ValueError(f"bad grid {text!r}")
    return rows, cols


def cases(dtypes, dims, grids, heads: int) -> list[dict]:
    out = []
    for dt in dtypes:
        dtype, _, rope = dt.partition("-")
        if dtype not in ("float16", "bfloat16", "float32") or rope not in ("", "rope"):
            raise ValueError(f"bad dtype {dt!r} (float16, bfloat16, float32, each optionally -rope)")
        for d in dims:
            for grid in grids:
                rows, cols = parse_grid(grid)
                out.append(dict(name=f"{dt}-D{d}-{rows}x{cols}", dtype=dtype, rope=bool(rope), D=d, H=heads,
                                rows=rows, cols=cols))
    return out


def run_case(case: dict, seed: int = 0) -> None:
    """One forward and backward of the case's inputs (the autotuner benchmarks each pass's new shapes)."""
    import torch
    from nalasr_kernels import nala_attention_triton

    dtype = getattr(torch, case["dtype"])
    h, d, n = case["H"], case["D"], case["rows"] * case["cols"]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(1, n, 4 * h * d, generator=gen, device="cuda", dtype=torch.float32).to(dtype).requires_grad_()
    q, k, v = (t.view(1, n, h, d) for t in x.chunk(4, dim=-1)[:3])
    g = torch.randn(1, n, h, d, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    rope = (case["rows"], case["cols"]) if case["rope"] else None
    o = nala_attention_triton(q, k, v, None, rope)
    o.backward(g)
    torch.cuda.synchronize()


def fmt_ms(t) -> str:
    return "-" if t is None else f"{t * 1e3:8.1f} µs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated (default {','.join(DTYPES)})")
    ap.add_argument("--dims", default=",".join(map(str, DIMS)), help="head dims D = Dv (default 16,32,64)")
    ap.add_argument("--grids", default=",".join(GRIDS), help="token grids ROWSxCOLS (default %(default)s)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=10, help="do_bench warm-up ms per config")
    ap.add_argument("--rep", type=int, default=50, help="do_bench ms per config")
    ap.add_argument("--out", type=Path, help="folder for kernel_configs.json and kernel_configs_table.py")
    ap.add_argument("--literal", action="store_true", help="print only the TABLE literal")
    args = ap.parse_args(argv)

    todo = cases([s for s in args.dtypes.split(",") if s], [int(s) for s in args.dims.split(",") if s],
                 [s for s in args.grids.split(",") if s], args.heads)
    import torch

    if not torch.cuda.is_available():
        print("kernel_configs.py needs a CUDA device (the autotuner times the kernels on it)", file=sys.stderr)
        return 2
    import triton
    from nalasr_kernels.nala import configs, tuning

    say = (lambda *a, **k: print(*a, **k, file=sys.stderr)) if args.literal else print
    t0 = time.time()
    with tuning.autotuning(args.warmup, args.rep) as tuner:
        for case in todo:
            t = time.time()
            run_case(case)
            say(f"{case['name']}: {time.time() - t:.1f} s", flush=True)
    picks = sorted(tuner.picks.values(), key=lambda p: (configs.PASSES.index(p.pass_), p.kind, p.bd, p.bucket))
    say(f"\n{len(todo)} cases, {len(picks)} picks in {time.time() - t0:.0f} s on {torch.cuda.get_device_name()}, "
        f"Triton {triton.__version__}\n")
    say(f"{'pass':<10} {'kind':<5} {'BD':>3} {'bucket':>8}  {'table':<14} {'':>11}  {'autotuner':<14} {'':>11}  ratio"
        "  inputs")
    for p in picks:
        tt, tb = p.times_ms.get(p.table), p.times_ms.get(p.best)
        ratio = f"{tt / tb:5.2f}" if tt and tb else "  -"
        say(f"{p.pass_:<10} {p.kind:<5} {p.bd:>3} {p.bucket:>8}  {str(p.table):<14} {fmt_ms(tt):>11}  "
            f"{str(p.best):<14} {fmt_ms(tb):>11}  {ratio}  {p.shape}")
    table = configs.table_from_picks(picks, configs.TABLE)
    literal = configs.table_literal(table)
    if not args.literal:
        print("\nconfigs.TABLE from these picks (rows not measured kept from the committed table):\n")
    print(literal)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = dict(device=torch.cuda.get_device_name(), triton=triton.__version__, torch=torch.__version__,
                    python=platform.python_version(), warmup_ms=args.warmup, rep_ms=args.rep,
                    time=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        (args.out / "kernel_configs.json").write_text(json.dumps(
            dict(meta=meta, cases=todo, picks=[p.as_json() for p in picks]), indent=1) + "\n")
        (args.out / "kernel_configs_table.py").write_text(
            f"# benchmarks/kernel_configs.py on {meta['device']}, Triton {meta['triton']}, {meta['time']}\n"
            + literal + "\n")
        say(f"wrote {args.out / 'kernel_configs.json'}, {args.out / 'kernel_configs_table.py'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
