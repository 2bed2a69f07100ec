"""Issue 5: the forward passes' stream floors by access pattern — is the token-major layout slow because each program reads
32 bytes of every 128-byte row (one sector a line and request), and does one warp reading all heads fix it?

    PYTHONPATH=.:kernels python benchmarks/rows_floor_gpu.py --json OUT.json [--tokens 518400] [--ppsm 16,32]

k, v: dense (1, N, 4, 16) fp16 (the model's layout). Every variant loads all of k and v once, multiplies them
elementwise in float32 and stores one partial sum a program (no feature map, no product); one warp a program:
  head    the register reduce's loads (nala_rr): grid (heads, chunks), lane (g, t) loads the 32-bit pair of dims
          2g, 2g + 1 of tokens t + 4i — each load instruction touches 4 rows, one sector of each
  heads4  the same four times over, head after head, in one program: grid (chunks), all sectors of a row from one
          warp in four consecutive instructions
  rows    grid (chunks): a (32 tokens, 64 dims) tile a load, whole rows (Triton vectorises it: 16 B a lane)
and the same patterns for the map's traffic: q loaded, o = 2q stored (head, heads4, rows, and pairs: two heads a
program, 64-byte halves of the rows a store).
µs from torch.profiler (benchmarks/kernel_diag_gpu.kernel_us), GB/s over k and v's bytes.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl

from kernel_diag_gpu import kernel_us  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala
from nalasr_kernels.nala_rr import _unpack

H, D = 4, 16


@triton.jit
def _head_tile(kp, vp, n0, end, koff, voff, tok, s_n):
    """One head's 32-token tile in the register reduce's lane order, k·v elementwise in float32, (256,)."""
    left = end - n0
    kk = tl.load(kp + n0 * (s_n // 2) + koff, mask=tok < left, other=0)
    vv = tl.load(vp + n0 * (s_n // 2) + voff, mask=tok < left, other=0)
    x0, x1 = _unpack(kk, tl.float16)
    v0, v1 = _unpack(vv, tl.float16)
    return x0 * v0 + x1 * v1


@triton.jit
def _rows_head(K, V, PART, N, CHUNK, s_n):
    pid_h, pid_c = tl.program_id(0), tl.program_id(1)
    e = tl.arange(0, 256)
    lane = e % 32
    tok = lane % 4 + 4 * (e // 32)
    kp = (K + pid_h * 16).to(tl.pointer_type(tl.int32))
    vp = (V + pid_h * 16).to(tl.pointer_type(tl.int32))
    koff = tok * (s_n // 2) + lane // 4
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    acc = tl.zeros((256,), dtype=tl.float32)
    for n0 in tl.range(start, end, 32):
        acc += _head_tile(kp, vp, n0, end, koff, koff, tok, s_n)
    tl.store(PART + (pid_c * tl.num_programs(0) + pid_h) * 256 + e, acc)


@triton.jit
def _rows_heads4(K, V, PART, N, CHUNK, s_n):
    pid_c = tl.program_id(0)
    e = tl.arange(0, 256)
    lane = e % 32
    tok = lane % 4 + 4 * (e // 32)
    kp = K.to(tl.pointer_type(tl.int32))
    vp = V.to(tl.pointer_type(tl.int32))
    koff = tok * (s_n // 2) + lane // 4
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    acc = tl.zeros((256,), dtype=tl.float32)
    for n0 in tl.range(start, end, 32):
        for h in tl.static_range(4):
            acc += _head_tile(kp, vp, n0, end, koff + 8 * h, koff + 8 * h, tok, s_n)
    tl.store(PART + pid_c * 256 + e, acc)


@triton.jit
def _rows_full(K, V, PART, N, CHUNK, s_n):
    pid_c = tl.program_id(0)
    offs_n = tl.arange(0, 32)
    offs_d = tl.arange(0, 64)
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    acc = tl.zeros((32, 64), dtype=tl.float32)
    for n0 in tl.range(start, end, 32):
        rows = n0 + offs_n
        off = rows[:, None] * s_n + offs_d[None, :]
        x = tl.load(K + off, mask=(rows < end)[:, None], other=0.0).to(tl.float32)
        vv = tl.load(V + off, mask=(rows < end)[:, None], other=0.0).to(tl.float32)
        acc += x * vv
    tl.store(PART + pid_c * 64 + offs_d, tl.sum(acc, axis=0))


@triton.jit
def _map_head(Q, O, N, CHUNK, s_n, HEADS: tl.constexpr):
    """The map's traffic in the register reduce's lane order: HEADS heads from head program_id(0) on of each
    32-token tile loaded and stored back (×2 in float16), head after head."""
    pid_c = tl.program_id(1)
    e = tl.arange(0, 256)
    lane = e % 32
    tok = lane % 4 + 4 * (e // 32)
    qp = (Q + tl.program_id(0) * 16).to(tl.pointer_type(tl.int32))
    op = (O + tl.program_id(0) * 16).to(tl.pointer_type(tl.int32))
    off = tok * (s_n // 2) + lane // 4
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    for n0 in tl.range(start, end, 32):
        for h in tl.static_range(HEADS):
            m = tok < end - n0
            x = tl.load(qp + n0 * (s_n // 2) + off + 8 * h, mask=m, other=0)
            tl.store(op + n0 * (s_n // 2) + off + 8 * h, x + 0x04000400, mask=m)  # exponent + 1: ×2


@triton.jit
def _map_rows(Q, O, N, CHUNK, s_n, WIDTH: tl.constexpr):
    """(32 tokens, WIDTH dims) tiles: 64 (whole rows) or 32 (two heads, program_id(1) picks which two)."""
    pid_c = tl.program_id(0)
    offs_n = tl.arange(0, 32)
    offs_d = tl.arange(0, WIDTH) + tl.program_id(1) * WIDTH
    start = pid_c * CHUNK
    end = tl.minimum(start + CHUNK, N)
    for n0 in tl.range(start, end, 32):
        rows = n0 + offs_n
        off = rows[:, None] * s_n + offs_d[None, :]
        x = tl.load(Q + off, mask=(rows < end)[:, None], other=0.0)
        tl.store(O + off, x * 2.0, mask=(rows < end)[:, None])


def _tiles_plan(n: int, bh: int, device: torch.device, ppsm: int) -> tuple[int, int]:
    """nala._plan's chunk rounded up to whole 32-token tiles, and the chunk count that gives."""
    chunk = -(-nala._plan(n, bh, device, ppsm)[0] // 32) * 32
    return chunk, -(-n // chunk)


def map_rows(n: int, ppsm: list[int]) -> list[dict]:
    """The map's stream by pattern: "head" (grid (heads, chunks)), "heads4" (grid (1, chunks)), "pairs" (two heads a
    program, 64 bytes of each row a store), "rows"."""
    q = torch.randn(1, n, H, D, device="cuda", dtype=torch.float16)
    out = []
    for p in ppsm:
        for variant in ("head", "heads4", "pairs", "rows"):
            bh = H if variant == "head" else 2 if variant == "pairs" else 1
            chunk, n_chunks = _tiles_plan(n, bh, q.device, p)
            o = torch.full_like(q, float("nan"))
            if variant in ("rows", "pairs"):
                fn = lambda bh=bh: _map_rows[(n_chunks, bh)](q, o, n, chunk, q.stride(1), WIDTH=64 // bh,  # noqa: E731
                                                           num_warps=1)
                name = "_map_rows"
            else:
                fn = lambda bh=bh: _map_head[(bh, n_chunks)](q, o, n, chunk, q.stride(1),  # noqa: E731
                                                           HEADS=1 if bh == H else H, num_warps=1)
                name = "_map_head"
            fn()
            us = kernel_us(fn)[name]
            out.append({"pass": "map", "variant": variant, "ppsm": p, "programs": n_chunks * bh, "chunk": chunk,
                        "us": us, "gbs": 2 * n * H * D * 2 / (us * 1e-6) / 1e9,
                        "sum_rel": float((o.double() - 2 * q.double()).norm() / (2 * q.double()).norm())})
            print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--ppsm", default="16,32")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    n = a.tokens
    k, v = (torch.randn(1, n, H, D, device="cuda", dtype=torch.float16) for _ in range(2))
    ref = (k.float() * v.float()).sum()
    rows = []
    for ppsm in (int(p) for p in a.ppsm.split(",")):
        for variant in ("head", "heads4", "rows"):
            bh = H if variant == "head" else 1
            chunk, n_chunks = _tiles_plan(n, bh, k.device, ppsm)
            part = torch.full((n_chunks * bh * 256,), float("nan"), device="cuda")
            if variant == "head":
                fn = lambda: _rows_head[(H, n_chunks)](k, v, part, n, chunk, k.stride(1), num_warps=1)  # noqa: E731
                name = "_rows_head"
            elif variant == "heads4":
                fn = lambda: _rows_heads4[(n_chunks,)](k, v, part, n, chunk, k.stride(1), num_warps=1)  # noqa: E731
                name = "_rows_heads4"
            else:
                part = torch.full((n_chunks * 64,), float("nan"), device="cuda")
                fn = lambda: _rows_full[(n_chunks,)](k, v, part, n, chunk, k.stride(1), num_warps=1)  # noqa: E731
                name = "_rows_full"
            fn()
            rel = float((part.double().sum() - ref.double()).abs() / ref.abs().double())
            us = kernel_us(fn)[name]
            rows.append({"pass": "reduce", "variant": variant, "ppsm": ppsm, "programs": n_chunks * bh, "chunk": chunk, "us": us,
                         "gbs": 2 * n * H * D * 2 / (us * 1e-6) / 1e9, "sum_rel": rel})
            print(json.dumps(rows[-1]), flush=True)
    rows += map_rows(n, [int(p) for p in a.ppsm.split(",")])
    with open(a.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "tokens": n, "rows": rows},
                  f, indent=1)
    print("summary:")
    for r in rows:
        print(f"  {r['pass']:6s} {r['variant']:7s} ppsm {r['ppsm']:3d} programs {r['programs']:5d}  {r['us']:6.1f} µs "
              f"{r['gbs']:6.0f} GB/s  sum rel {r['sum_rel']:.1e}")


if __name__ == "__main__":
    main()
