"""Issue 5: how much of the forward's time each part of the two feature maps costs — each part swapped for a cheap
stand-in (wrong results, same loads and stores), the kernels timed at 518K tokens.

    PYTHONPATH=.:kernels python benchmarks/sensitivity_gpu.py --json OUT.json [--variants base,sincos,...]
    PYTHONPATH= /tmp/t36/bin/python benchmarks/sensitivity_gpu.py --offline     # SASS counts, no GPU (Triton 3.6)

A variant replaces jit helpers in the kernels' module globals before anything compiles (each variant in its own
process, so no compiled kernel sees another's helpers):
  sincos  cos, sin of the angle → 1 + u, u                       (the degree 6 / 7 series)
  tanh    the angle's tanh → its argument                         (one MUFU an element)
  mag     |k|³ → k² (reduce), |dir|^p → dir (map: the log2 / exp2 pair an element)
  shfl    the register reduce's three norm shuffles → none        (reduce only)
  mma     the register reduce's 32 mma.sync → 16 FFMA + 16 FADD   (reduce only; v stays loaded)
  fmap    sincos + tanh + mag;  all: fmap + shfl + mma
  ohm     (not a stand-in: the same math) o allocated head-major, (B, H, N, Dv) storage returned as a (B, N, H, Dv)
          view, so each head's program writes whole 128-byte lines of o (session 19: the map's traffic alone takes
          44.9 µs with 32 bytes of each token-major row a store instruction, 35.1 with whole rows)
The rows: µs of _fwd_reduce_rr and _fwd_map inside the landed forward (torch.profiler, dense (1, N, 4, 16) fp16
inputs), and with --offline the SASS instructions of each kernel's token loop and its registers.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "kernels"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from nalasr_kernels import nala, nala_fwd, nala_rr  # noqa: E402

PARTS = {"sincos": ["sincos"], "tanh": ["tanh"], "mag": ["mag"], "shfl": ["shfl"], "mma": ["mma"],
         "fmap": ["sincos", "tanh", "mag"], "all": ["sincos", "tanh", "mag", "shfl", "mma"], "base": [],
         "ohm": ["ohm"]}
HP = (3.0, 0.5, 1.0, 1e-6, 0, 0, 100.0)  # λ, τ, α, ε, no RoPE


@triton.jit
def _cheap_sincos(uc, APPROX: tl.constexpr):
    return 1.0 + uc, uc


@triton.jit
def _cheap_angle(xa, APPROX: tl.constexpr, CLAMP: tl.constexpr):
    return xa, xa


@triton.jit
def _cheap_key_mag(x, x2, lam, LAM_INT: tl.constexpr):
    return x2


@triton.jit
def _cheap_query_mag(xa, nrm, lam, tau, lga, APPROX: tl.constexpr):
    return xa


@triton.jit
def _cheap_lane_xor(x, MASK: tl.constexpr):
    return x


@triton.jit
def _cheap_mma_s(a, bc, bs, acc):
    return acc + a * bc


@triton.jit
def _cheap_mma_z(bc, bs, acc):
    return acc + bs


def patch(variant: str) -> None:
    """Swap the variant's helpers into nala_fwd (the map's module) and nala_rr (the register reduce)."""
    parts = PARTS[variant]
    if "sincos" in parts:
        nala_fwd._sincos_angle = nala_rr._sincos_angle = _cheap_sincos
    if "tanh" in parts:
        nala_fwd._angle = nala_rr._angle = _cheap_angle
    if "mag" in parts:
        nala_rr._key_mag = _cheap_key_mag
        nala_fwd._query_mag_fwd = _cheap_query_mag
    if "shfl" in parts:
        nala_rr._lane_xor = _cheap_lane_xor
    if "mma" in parts:
        nala_rr._mma_s = _cheap_mma_s
        nala_rr._mma_z = _cheap_mma_z
    if "ohm" in parts:
        empty = nala._empty

        def head_major(shape, dtype, device):
            if len(shape) == 4 and dtype.itemsize == 2:  # o (the only 16-bit 4-D buffer nala_forward allocates)
                b, n, h, dv = shape
                return empty((b, h, n, dv), dtype, device).transpose(1, 2)
            return empty(shape, dtype, device)

        nala._empty = head_major


def offline(variant: str) -> dict:
    import compile_sm90 as c

    patch(variant)
    out = {"variant": variant}
    for kernel in ("fwd_reduce_rr", "fwd_map"):
        block_n, warps, stages, maxnreg = c.KERNELS[kernel][2]
        ck = c.compile_kernel(kernel, {"F16": True, "ZACC": True, "ZDOT": True}, block_n, warps, stages, maxnreg)
        loop = [ln for ln in c.main_loop(c.sass_of(ck.asm["cubin"])) if re.search(r"\*/\s+\S.*;", ln)]
        out[kernel] = {"loop_instructions": len(loop), "resources": c.resources(ck.asm["cubin"])}
    return out


def measure(variant: str) -> dict:
    import torch
    from kernel_diag_gpu import _inputs, graph_ms, kernel_us

    patch(variant)
    q, k, v, _ = _inputs(518_400, "dense")
    o, _ = nala.nala_forward(q, k, v, *HP)
    us = kernel_us(lambda: nala.nala_forward(q, k, v, *HP))
    return {"variant": variant, "gpu": torch.cuda.get_device_name(), "kernels_us": us, "o_strides": o.stride(),
            "o_sum": float(o.double().sum()), "o_norm": float(o.double().norm()),
            "forward_ms": graph_ms(lambda: nala.nala_forward(q, k, v, *HP))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="base,sincos,tanh,mag,shfl,mma,fmap,all,ohm")
    ap.add_argument("--json")
    ap.add_argument("--offline", action="store_true", help="SASS counts on this machine (Triton 3.6), no GPU")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the worker: one variant in this process, JSON on stdout
    a = ap.parse_args()
    if a.one:
        print(json.dumps(offline(a.one) if a.offline else measure(a.one)))
        return
    rows = []
    for var in a.variants.split(","):
        cmd = [sys.executable, __file__, "--one", var] + (["--offline"] if a.offline else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0
                    else {"variant": var, "error": p.stderr.strip().splitlines()[-1:]})
        print(json.dumps(rows[-1]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    print("summary:")
    for r in rows:
        if "error" in r:
            print(f"  {r['variant']:7s} error {r['error']}")
        elif a.offline:
            print(f"  {r['variant']:7s} " + "  ".join(f"{k} {v['loop_instructions']} instr, {v['resources']}"
                                                      for k, v in r.items() if k != "variant"))
        else:
            us = r["kernels_us"]
            print(f"  {r['variant']:7s} reduce_rr {us.get('_fwd_reduce_rr', float('nan')):6.1f}  map "
                  f"{us.get('_fwd_map', float('nan')):6.1f}  combine {us.get('_combine', float('nan')):5.1f}  "
                  f"forward {r['forward_ms'] * 1e3:6.1f} µs  |o| {r['o_norm']:.6e}  o strides {r['o_strides']}")


if __name__ == "__main__":
    main()
