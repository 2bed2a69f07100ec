"""Launch configs of one attention pass at one size: which tile, warps, stages and programs per SM suit it.

    PYTHONPATH=.:kernels python benchmarks/config_sweep_gpu.py --json OUT.json --pass fwd_reduce \
        --configs 128x4x2,32x1x2 --ppsm 8,32 [--env NALASR_REDUCE_ZACC=0,1] [--tokens 518400]

A config is BLOCK_NxWARPSxSTAGES[xMAXNREG]. For every config × programs per SM × value of the --env switch, the
pass's autotuner is replaced by that one config (the other passes keep theirs and their programs per SM), the
forward (and for bwd_* passes the backward) runs from a CUDA graph, and torch.profiler gives each kernel's time.
Inputs as benchmarks/kernel_diag_gpu.py (B = 1, 4 heads × 16, fp16, strided views of one projection, or with
--layout dense separate contiguous tensors); fwd_map_pair (no autotuner) takes the config as nala._PAIR_TILE. Prints one
line per combination and a table sorted by the pass's kernel time (with its combine); everything goes to --json.

    ... --pass combine --configs 32x256x4,8x1024x4 --chunks 254,1013 [--bh 4]

times ``_combine`` alone (config BLOCKxCBxWARPS: state columns per program, chunks per load, warps) summing
random partials of --bh (batch, head) states of 16 × 16 (544 floats) over each number of chunks.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path
from typing import Any

import torch
import triton

from kernel_diag_gpu import HP, _inputs, graph_ms, kernel_us  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala

PASSES = ("fwd_reduce", "fwd_map", "fwd_map_pair", "bwd_query", "bwd_key", "combine")


def parse_config(text: str) -> triton.Config:
    parts = [int(x) for x in text.split("x")]
    extra = {"maxnreg": parts[3]} if len(parts) > 3 else {}
    return triton.Config({"BLOCK_N": parts[0]}, num_warps=parts[1], num_stages=parts[2], **extra)


def compiled(kernel) -> dict[int, Any]:
    """id → compiled binary of every variant of a @triton.jit kernel compiled so far in this process."""
    try:
        return {id(c): c for cache in kernel.device_caches.values() for c in cache[0].values()}
    except Exception:  # layout of Triton's caches differs between versions
        return {}


def combine_rows(configs: list[str], chunks: list[int], bh: int) -> list[dict]:
    state = nala._state_size(16, 16)
    rows = []
    for n_chunks, text in itertools.product(chunks, configs):
        block, cb, warps = (int(x) for x in text.split("x"))
        part = torch.randn(bh * n_chunks * state, device="cuda")
        out = torch.empty(bh, state, device="cuda")
        fn = lambda: nala._combine[(bh, triton.cdiv(state, block))](  # noqa: E731
            part, out, n_chunks, 1.0, STATE=state, BLOCK=block, CB=min(cb, nala._pow2(n_chunks)), num_warps=warps)
        fn()
        ok = torch.allclose(out, part.view(bh, n_chunks, state).sum(1), rtol=1e-4, atol=1e-3)
        r = {"pass": "combine", "config": text, "chunks": n_chunks, "bh": bh, "us": graph_ms(fn, 200) * 1e3, "ok": ok}
        rows.append(r)
        print(f"combine {text:12s} chunks {n_chunks:5d} bh {bh} | {r['us']:6.1f} µs {'ok' if ok else 'WRONG SUM'}",
              flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pass", dest="pas", choices=PASSES, required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--ppsm", default="8")
    ap.add_argument("--env", default="", help="NAME=v1,v2: an environment switch to try at each value")
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--layout", default="qkvg", choices=["qkvg", "dense"],
                    help="q, k, v as kernel_diag_gpu.py's inputs (fwd_map_pair runs on dense q only unless forced)")
    ap.add_argument("--quantum", default="", help="chunk quanta of the pass to try (nala._<PASS>_QUANTUM)")
    ap.add_argument("--min-chunk", default="",
                    help="smallest chunks of the pass to try (nala._<PASS>_MIN_CHUNK: the maps, fwd_reduce)")
    ap.add_argument("--chunks", default="254,1013", help="combine: chunks per (batch, head)")
    ap.add_argument("--bh", type=int, default=4, help="combine: (batch, head) pairs")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    if a.pas == "combine":
        rows = combine_rows(a.configs.split(","), [int(c) for c in a.chunks.split(",")], a.bh)
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"rows": rows, "device": torch.cuda.get_device_name()}, indent=1))
        for r in sorted(rows, key=lambda r: (r["chunks"], r["us"])):
            print(f"  chunks {r['chunks']:5d} {r['config']:12s} {r['us']:6.1f} µs")
        return
    if a.pas == "fwd_map":  # the one-head map's configs: the pair map must not take its place (dense q, ≥ 400K)
        os.environ.setdefault("NALASR_MAP_PAIR", "0")
    q, k, v, do = _inputs(a.tokens, a.layout)
    fwd = lambda: nala.nala_forward(q, k, v, *HP)  # noqa: E731
    _, state = fwd()
    bwd = lambda: nala.nala_backward(do, q, k, v, state, *HP)  # noqa: E731
    run = bwd if a.pas.startswith("bwd") else fwd
    own = {"fwd_reduce": ("_fwd_reduce", "_combine"), "fwd_map": ("_fwd_map",), "fwd_map_pair": ("_fwd_map_pair",),
           "bwd_query": ("_bwd_query", "_combine"), "bwd_key": ("_bwd_key",)}[a.pas]
    var, values = (a.env.split("=", 1)[0], a.env.split("=", 1)[1].split(",")) if a.env else (None, [None])
    # the map over head pairs has no autotuner: its one config is nala._PAIR_TILE (tokens, warps, stages, cap)
    pair = a.pas == "fwd_map_pair"
    plain, tuned_name = getattr(nala, f"_{a.pas}"), "_PAIR_TILE" if pair else f"_{a.pas}_tuned"
    # the map's plan has its own programs per SM with HALF2 (nala._map_half2): a sweep of the pass sets both
    ppsm_keys = ("fwd_map", "fwd_map_half2") if a.pas == "fwd_map" else (a.pas,)
    default_tuned, default_ppsm = getattr(nala, tuned_name), {k: nala._PROGRAMS_PER_SM[k] for k in ppsm_keys}
    rows, regs = [], {}
    quantum_name = f"_{a.pas.upper()}_QUANTUM"
    default_quantum = getattr(nala, quantum_name, None)
    quanta = [int(x) for x in a.quantum.split(",")] if a.quantum else [default_quantum]
    minimum_name = f"_{a.pas.upper()}_MIN_CHUNK"
    default_minimum = getattr(nala, minimum_name, None)
    minima = [int(x) for x in a.min_chunk.split(",")] if a.min_chunk else [default_minimum]
    for text, ppsm, value, quantum, minimum in itertools.product(a.configs.split(","), a.ppsm.split(","), values,
                                                                 quanta, minima):
        if quantum is not None:
            setattr(nala, quantum_name, quantum)
        if minimum is not None:
            setattr(nala, minimum_name, minimum)
        if pair:
            c = parse_config(text)
            setattr(nala, tuned_name, (c.kwargs["BLOCK_N"], c.num_warps, c.num_stages, c.maxnreg))
        else:
            setattr(nala, tuned_name, nala._tuned(plain, [parse_config(text)], 1 << 20, default_tuned.keys))
        nala._PROGRAMS_PER_SM.update({k: int(ppsm) for k in ppsm_keys})
        if var:
            os.environ[var] = value
        r = {"pass": a.pas, "config": text, "ppsm": int(ppsm), "env": f"{var}={value}" if var else "",
             "tokens": a.tokens, "quantum": quantum, "min_chunk": minimum}
        try:
            before = compiled(plain)
            run()
            torch.cuda.synchronize()
            new = [c for i, c in compiled(plain).items() if i not in before]  # this config's compile, if not cached
            if new:
                regs[text, value] = (new[-1].n_regs, new[-1].n_spills)
            r["graph_ms"] = graph_ms(run)
            r["kernels_us"] = kernel_us(run)
            r["pass_us"] = sum(us for name, us in r["kernels_us"].items() if name.startswith(own))
            # None when the variant was compiled before the sweep (by the default run that sets up the state)
            r["n_regs"], r["n_spills"] = regs.get((text, value), (None, None))
            print(f"{a.pas} {text:12s} ppsm {ppsm:>3s} q {quantum} min {minimum} {r['env']:18s} | pass {r['pass_us']:7.1f} µs | "
                  f"{'fwd' if run is fwd else 'bwd'} graph {r['graph_ms'] * 1e3:7.1f} µs | regs {r['n_regs']} "
                  f"spills {r['n_spills']} | " + " ".join(f"{n} {us:.1f}" for n, us in sorted(r["kernels_us"].items())),
                  flush=True)
        except Exception as e:  # a config that does not compile or fit must not end the sweep
            r["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            print(f"{a.pas} {text} ppsm {ppsm} {r['env']}: {r['error']}", flush=True)
        rows.append(r)
    setattr(nala, tuned_name, default_tuned)
    nala._PROGRAMS_PER_SM.update(default_ppsm)
    if default_quantum is not None:
        setattr(nala, quantum_name, default_quantum)
    if default_minimum is not None:
        setattr(nala, minimum_name, default_minimum)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"rows": rows, "device": torch.cuda.get_device_name(),
                                  "triton": triton.__version__}, indent=1))
    print(f"\n{a.pas} at {a.tokens} tokens, best first:")
    for r in sorted((r for r in rows if "pass_us" in r), key=lambda r: r["pass_us"]):
        print(f"  {r['config']:12s} ppsm {r['ppsm']:3d} q {r['quantum']} min {r['min_chunk']} {r['env']:18s} "
              f"{r['pass_us']:7.1f} µs  "
              f"(graph {r['graph_ms'] * 1e3:.1f} µs, regs {r['n_regs']})")


if __name__ == "__main__":
    main()
