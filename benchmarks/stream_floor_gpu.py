"""What the two forward passes cost without their tensor-core products, and without any math: the floors under
``_fwd_reduce`` and ``_fwd_map`` for the same grids, tiles, prefetching loads and stores (issue 5's 60% target).

    PYTHONPATH=.:kernels python benchmarks/stream_floor_gpu.py [--tokens 518400] [--json OUT.json] \
        [--layout qkvg|dense|cmajor] [--tma 64x4x3,...]

Per pass, these variants over q (map) or k and v (reduce), 4 heads × 16, fp16, by default strided views of one
projection (--layout: benchmarks/kernel_diag_gpu.py's inputs; "cmajor" has tokens as the unit-stride axis and o
follows it), the pass's launch config at 518K (BLOCK_N, warps, stages as the autotuner
picks them there, programs per SM from nala._PROGRAMS_PER_SM):
    stream   loads every tile as the pass does and writes o (map) or a per-program partial sum (reduce): traffic only
    rows     (map) the stream with one program for all heads of its tokens: 128-byte rows instead of 32
    math     the same plus the pass's feature map (norm, tanh angle, sin/cos series, magnitude) on every element,
             its result stored in place of the product's (no tl.dot, no layout conversion for it)
    tma      (token-major layouts) stream with every tile moved by the TMA unit, per --tma config; "tma math" with
             the feature map
    pass     the real kernel, from nala_forward (its own autotuned config)
Kernel times from torch.profiler (kernel_diag_gpu.kernel_us), µs, and GB/s over the pass's minimum bytes.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernel_diag_gpu import H, D, _inputs, kernel_us  # noqa: E402  (benchmarks/ is the script's directory)
from nalasr_kernels import nala
from nalasr_kernels.nala_math import (_angle, _chunk, _key_mag, _load_tile, _query_mag_fwd, _sincos_angle, _slab,
                                      _token_rows)

HP = (3.0, 0.5, 1.0, 1e-6, 0, 0, 100.0)  # λ, τ, α, ε, no RoPE
CONFIGS = {"map": (64, 4, 2), "reduce": (32, 1, 2)}  # BLOCK_N, warps, stages: the picks at 518K (session 14)
# (the defaults of --map-configs / --reduce-configs, with the passes' programs per SM)


@triton.jit
def _map_math(x, alpha, lam, tau):
    """The map's feature map on a (BLOCK_N, D) float32 tile, (m·cos + m·sin)/(Σ m·(cos + sin) + ε) in place of o."""
    ss = tl.sum(x * x, axis=1)
    r = tl.rsqrt(ss + 1e-12)
    m = _query_mag_fwd(x, r, ss * r, lam, tau, True)
    u, uc = _angle(x * (alpha * r)[:, None], True, False)  # α = 1: no clamp (nala._clamp)
    c, s = _sincos_angle(uc, True)
    den = tl.sum(m * (c + s), axis=1) + 1e-6
    return (m * c + m * s) * (1.0 / den)[:, None]


@triton.jit
def _reduce_math(x, vv, alpha):
    """The reduce's key feature map on a (BLOCK_N, D) float32 tile of k, times v elementwise: φk_cos·v + φk_sin·v."""
    x2 = x * x
    r = tl.rsqrt(tl.sum(x2, axis=1) + 1e-12)
    u, uc = _angle(x * (alpha * r)[:, None], True, False)
    m = _key_mag(x, x2, 3.0, 3)
    c, s = _sincos_angle(uc, True)
    return m * c * vv + m * s * vv


@triton.jit
def _stream_map(Q, O, N, CHUNK, sq_b, sq_n, sq_h, sq_d, so_b, so_n, so_h, so_d, alpha, lam, tau,
                D: tl.constexpr, BLOCK_N: tl.constexpr, MATH: tl.constexpr):
    """_fwd_map's loads and stores; MATH: its feature map too, (m·cos + m·sin)/(Σ m·(cos + sin) + ε) stored as o."""
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_d = tl.arange(0, D)
    dmask = offs_d < D
    q_base = _slab(Q, pid_b, pid_h, sq_b, sq_h)
    o_base = _slab(O, pid_b, pid_h, so_b, so_h)
    start, end = _chunk(pid_c, CHUNK, N)
    x_next = _load_tile(q_base, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
    for n0 in tl.range(start, end, BLOCK_N):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, False)
        x = x_next.to(tl.float32)
        x_next = _load_tile(q_base, n0 + BLOCK_N, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
        if MATH:
            x = _map_math(x, alpha, lam, tau)
        tl.store(o_base + rows[:, None] * so_n + offs_d[None, :] * so_d, x.to(O.dtype.element_ty),
                 mask=nmask[:, None] & dmask[None, :])


@triton.jit
def _stream_rows(Q, O, N, CHUNK, sq_n, so_n, HD: tl.constexpr, BLOCK_N: tl.constexpr):
    """All heads of a token at once: (BLOCK_N, H·D) tiles, one contiguous 128-byte row a token (q's heads are
    adjacent in the projection) instead of H programs reading 32 bytes of it each. Loads and stores only."""
    offs = tl.arange(0, HD)
    start, end = _chunk(tl.program_id(0), CHUNK, N)
    x_next = _load_tile(Q, start, end, sq_n, offs, 1, offs < HD, BLOCK_N, False)
    for n0 in tl.range(start, end, BLOCK_N):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, False)
        x = x_next
        x_next = _load_tile(Q, n0 + BLOCK_N, end, sq_n, offs, 1, offs < HD, BLOCK_N, False)
        tl.store(O + rows[:, None] * so_n + offs[None, :], x, mask=nmask[:, None])


@triton.jit
def _stream_reduce(K, V, PART, N, CHUNK, n_chunks, sk_b, sk_n, sk_h, sk_d, sv_b, sv_n, sv_h, sv_d, alpha,
                   D: tl.constexpr, BLOCK_N: tl.constexpr, MATH: tl.constexpr):
    """_fwd_reduce's loads; an elementwise (BLOCK_N, D) accumulator of k·v (MATH: φk_cos·v + φk_sin·v), summed over
    the tokens and stored once per program."""
    pid_h, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_d = tl.arange(0, D)
    dmask = offs_d < D
    k_base = _slab(K, pid_b, pid_h, sk_b, sk_h)
    v_base = _slab(V, pid_b, pid_h, sv_b, sv_h)
    acc = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    start, end = _chunk(pid_c, CHUNK, N)
    x_next = _load_tile(k_base, start, end, sk_n, offs_d, sk_d, dmask, BLOCK_N, False)
    v_next = _load_tile(v_base, start, end, sv_n, offs_d, sv_d, dmask, BLOCK_N, False)
    for n0 in tl.range(start, end, BLOCK_N):
        x = x_next.to(tl.float32)
        vv = v_next.to(tl.float32)
        x_next = _load_tile(k_base, n0 + BLOCK_N, end, sk_n, offs_d, sk_d, dmask, BLOCK_N, False)
        v_next = _load_tile(v_base, n0 + BLOCK_N, end, sv_n, offs_d, sv_d, dmask, BLOCK_N, False)
        if MATH:
            x = _reduce_math(x, vv, alpha)
        else:
            x = x * vv
        acc += x
    tl.store(PART + ((pid_b * tl.num_programs(0) + pid_h) * n_chunks + pid_c) * D + offs_d, tl.sum(acc, axis=0))


@triton.jit
def _stream_map_tma(QD, OD, N, CHUNK, alpha, lam, tau, D: tl.constexpr, BLOCK_N: tl.constexpr, MATH: tl.constexpr,
                    STAGES: tl.constexpr):
    """_stream_map with the tiles moved by the TMA unit: QD, OD describe q and o as (N, H·D) with (BLOCK_N, D) boxes;
    Triton's pipeliner keeps STAGES − 1 loads in flight (it does so for tensor-descriptor loads, not for tl.load
    feeding elementwise math). The chunks are multiples of BLOCK_N, so a box never writes into a neighbour's."""
    pid_h, pid_c = tl.program_id(0), tl.program_id(1)
    start, end = _chunk(pid_c, CHUNK, N)
    for n0 in tl.range(start, end, BLOCK_N, num_stages=STAGES):
        x = QD.load([n0, pid_h * D]).to(tl.float32)
        if MATH:
            x = _map_math(x, alpha, lam, tau)
        OD.store([n0, pid_h * D], x.to(tl.float16))


@triton.jit
def _stream_reduce_tma(KD, VD, PART, N, CHUNK, n_chunks, alpha, D: tl.constexpr, BLOCK_N: tl.constexpr,
                       MATH: tl.constexpr, STAGES: tl.constexpr):
    """_stream_reduce with k and v tiles moved by the TMA unit (see _stream_map_tma); rows past the chunk masked."""
    pid_h, pid_c = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    start, end = _chunk(pid_c, CHUNK, N)
    for n0 in tl.range(start, end, BLOCK_N, num_stages=STAGES):
        nmask = n0 + tl.arange(0, BLOCK_N) < end
        x = KD.load([n0, pid_h * D]).to(tl.float32)
        vv = VD.load([n0, pid_h * D]).to(tl.float32)
        if MATH:
            x = _reduce_math(x, vv, alpha)
        else:
            x = x * vv
        acc += tl.where(nmask[:, None], x, 0.0)
    tl.store(PART + (pid_h * n_chunks + pid_c) * D + tl.arange(0, D), tl.sum(acc, axis=0))


def run(n: int, layout: str, tma: list[tuple[int, int, int]], configs: dict[str, list[tuple[int, ...]]]) -> list[dict]:
    """configs: per pass ("map", "reduce"), (BLOCK_N, warps, stages, programs per SM) of the stream and math
    variants; tma: (BLOCK_N, warps, stages) of the TMA variants."""
    q, k, v, _ = _inputs(n, layout)
    dev = q.device
    if q.stride(1) == 1:  # channel-major q ("cmajor"): o too, so the map streams whole rows of tokens
        o = torch.empty(1, H, D, n, device=dev, dtype=q.dtype).permute(0, 3, 1, 2)
    elif q.stride(2) == n * D:  # head-major q ("hmajor"): o too
        o = torch.empty(1, H, n, D, device=dev, dtype=q.dtype).transpose(1, 2)
    else:
        o = torch.empty(1, n, H, D, device=dev, dtype=q.dtype)
    lam, tau, alpha = HP[0], HP[1], HP[2]
    rows = []

    def add(pas: str, variant: str, fn, name: str, **extra) -> None:
        fn()
        rows.append({"pass": pas, "variant": variant, "us": kernel_us(fn)[name], **extra})

    nala.nala_forward(q, k, v, *HP)  # autotuning outside the profile
    real = kernel_us(lambda: nala.nala_forward(q, k, v, *HP))
    for bn, warps, stages, ppsm in configs["map"]:
        chunk, n_chunks = nala._plan(n, H, dev, ppsm)
        for math in (False, True):
            add("map", "math" if math else "stream", lambda math=math: _stream_map[(H, n_chunks, 1)](
                q, o, n, chunk, *q.stride(), *o.stride(), alpha, lam, tau, D=D, BLOCK_N=bn, MATH=math,
                num_warps=warps, num_stages=stages), "_stream_map", config=f"{bn}x{warps}x{stages}@{ppsm}")
    rows.append({"pass": "map", "variant": "pass", "us": real.get("_fwd_map")})
    token_major = q.stride(2) == D and q.stride(3) == 1 and o.is_contiguous()
    if token_major:  # the rows and TMA variants: the map's pick and plan
        bn, warps, stages = CONFIGS["map"]
        chunk, n_chunks = nala._plan(n, H, dev, nala._PROGRAMS_PER_SM["fwd_map"])
        rchunk, rn_chunks = nala._plan(n, 1, dev, nala._PROGRAMS_PER_SM["fwd_map"])
        add("map", "rows", lambda: _stream_rows[(rn_chunks,)](
            q, o, n, rchunk, q.stride(1), o.stride(1), HD=H * D, BLOCK_N=bn, num_warps=warps, num_stages=stages),
            "_stream_rows")
        for tbn, twarps, tstages in tma:
            qd, od = (TensorDescriptor(t, [n, H * D], [t.stride(1), 1], [tbn, D]) for t in (q, o))
            for math in (False, True):
                add("map", "tma math" if math else "tma", lambda math=math: _stream_map_tma[(H, n_chunks)](
                    qd, od, n, chunk, alpha, lam, tau, D=D, BLOCK_N=tbn, MATH=math, STAGES=tstages,
                    num_warps=twarps), "_stream_map_tma", config=f"{tbn}x{twarps}x{tstages}")
    for bn, warps, stages, ppsm in configs["reduce"]:
        chunk, n_chunks = nala._plan(n, H, dev, ppsm)
        part = torch.empty(H * n_chunks * D, device=dev, dtype=torch.float32)
        for math in (False, True):
            add("reduce", "math" if math else "stream", lambda math=math: _stream_reduce[(H, n_chunks, 1)](
                k, v, part, n, chunk, n_chunks, *k.stride(), *v.stride(), alpha, D=D, BLOCK_N=bn, MATH=math,
                num_warps=warps, num_stages=stages), "_stream_reduce", config=f"{bn}x{warps}x{stages}@{ppsm}")
    rows.append({"pass": "reduce", "variant": "pass", "us": real.get("_fwd_reduce")})
    if token_major:
        for tbn, twarps, tstages in tma:
            kd, vd = (TensorDescriptor(t, [n, H * D], [t.stride(1), 1], [tbn, D]) for t in (k, v))
            tchunk, tn_chunks = nala._plan(n, H, dev, nala._PROGRAMS_PER_SM["fwd_map"])  # fewer, longer programs
            tpart = torch.empty(H * tn_chunks * D, device=dev, dtype=torch.float32)
            for math in (False, True):
                add("reduce", "tma math" if math else "tma", lambda math=math: _stream_reduce_tma[(H, tn_chunks)](
                    kd, vd, tpart, n, tchunk, tn_chunks, alpha, D=D, BLOCK_N=tbn, MATH=math, STAGES=tstages,
                    num_warps=twarps), "_stream_reduce_tma", config=f"{tbn}x{twarps}x{tstages}")
    for r in rows:
        r["tokens"], r["layout"] = n, layout
        r["gbs"] = 2 * n * H * D * 2 / (r["us"] * 1e-6) / 1e9 if r["us"] else None  # 2 fp16 tensors a pass
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--json", default=None)
    ap.add_argument("--layout", default="qkvg", choices=["qkvg", "dense", "cmajor", "hmajor"],
                    help="kernel_diag_gpu._inputs")
    ap.add_argument("--tma", default="64x4x3,128x4x3,256x4x3,128x4x4,256x8x3",
                    help="BLOCK_NxWARPSxSTAGES of the tma variants (token-major layouts only); '' for none")
    for pas, name in (("map", "fwd_map"), ("reduce", "fwd_reduce")):
        pick = "x".join(str(x) for x in CONFIGS[pas]) + f"@{nala._PROGRAMS_PER_SM[name]}"
        ap.add_argument(f"--{pas}-configs", default=pick,
                        help=f"BLOCK_NxWARPSxSTAGES@PROGRAMS_PER_SM of the {pas}'s stream and math variants")
    a = ap.parse_args()
    tma = [tuple(int(x) for x in c.split("x")) for c in a.tma.split(",") if c]
    configs = {pas: [tuple(int(x) for x in c.replace("@", "x").split("x")) for c in text.split(",")]
               for pas, text in (("map", a.map_configs), ("reduce", a.reduce_configs))}
    rows = run(a.tokens, a.layout, tma, configs)
    print(f"\nforward passes without their products / math, {a.tokens} tokens, {H}x{D} fp16, {a.layout}:")
    for r in rows:
        gbs = f"{r['gbs']:7.0f} GB/s" if r["gbs"] else "     – GB/s"
        name = f"{r['variant']} {r.get('config', '')}"
        print(f"  {r['pass']:6s} {name:20s} {r['us']:7.1f} µs {gbs}" if r["us"] else f"  {r['pass']} {r}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
