"""Issue 5's 60% target: does the forward's memory pattern, not its math, hold the per-head passes back?

    PYTHONPATH=.:kernels python benchmarks/heads_group_gpu.py --json OUT.json [--tokens 518400]

Each program of ``_fwd_reduce`` / ``_fwd_map`` reads one head's 32 bytes of every token (q, k, v token-major, the
4 heads side by side): 4 programs on 4 SMs read the 4 sectors of one 128-byte line at different times. Here:
  hg       prototype passes with HPP heads a program (the per-head code unrolled over HPP heads, the HPP tiles of
           a token block loaded back to back), token-major inputs as the model gives them
  hmajor   the landed passes on head-major storage, (B, H, N, D) in memory (each head's tokens contiguous),
           o written head-major too: what the same code does when its tiles are contiguous
  l2fetch  the landed forward after cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 128)
Every prototype is checked against the landed kernels on the same inputs (state and output relative errors).
Kernel times from torch.profiler (kernel_diag_gpu.kernel_us), µs; a table last.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os

import torch
import triton
import triton.language as tl

from kernel_diag_gpu import H, D, HP, _inputs, graph_ms, kernel_us, rel_err as _rel  # noqa: E402  (benchmarks/)
from nalasr_kernels import nala
from nalasr_kernels.nala_fwd import _den, _load_state, _store_state
from nalasr_kernels.nala_math import (_angle, _chunk, _f16_state, _key_mag, _load_tile, _log2, _query_mag_fwd,
                                      _sincos_angle, _slab, _token_rows)


@triton.jit
def _map_tile(x, s_c, s_s, z_c, z_s, up, alpha, lga, lam, tau, eps, APPROX: tl.constexpr, CLAMP: tl.constexpr):
    """_fwd_map's body for one (BLOCK_N, BD) 16-bit tile (FASTMAG, F16, no RoPE) → o in float32; lga = log2|α|,
    formed once a program as _fwd_map does."""
    x = x.to(tl.float32)
    ss = tl.sum(x * x, axis=1)
    r = tl.rsqrt(ss + 1e-12)
    xa = x * (alpha * r)[:, None]
    m = _query_mag_fwd(xa, ss * r, lam, tau, lga, APPROX)
    u, uc = _angle(xa, APPROX, CLAMP)
    c, s = _sincos_angle(uc, APPROX, SIN5=True)
    mc = m * c
    ms = m * s
    den = _den(mc, ms, z_c, z_s, eps)
    num = tl.dot(mc.to(tl.float16), s_c)
    num = tl.dot(ms.to(tl.float16), s_s, num)
    return num * (up / den)[:, None]


@triton.jit
def _head_state(STATE, bh, BD: tl.constexpr, BDV: tl.constexpr):
    s_c, s_s, z_c, z_s = _load_state(STATE, bh, BD, BDV)
    s_c, s_s, up = _f16_state(s_c, s_s)
    return s_c, s_s, z_c, z_s, up


@triton.jit
def _fwd_map_hg(Q, STATE, O, N, H, CHUNK, sq_b, sq_n, sq_h, sq_d, so_b, so_n, so_h, so_d, alpha, lam, tau, eps,
                D: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, APPROX: tl.constexpr, CLAMP: tl.constexpr,
                HPP: tl.constexpr, BLOCK_N: tl.constexpr):
    """_fwd_map over HPP (1, 2, 4) heads h0 .. h0 + HPP − 1 of one token chunk: their tiles of a token block are
    loaded back to back, so one SM asks for the HPP adjacent 32-byte sectors of each token at once."""
    pid_g, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    h0 = pid_g * HPP
    offs_d = tl.arange(0, BD)
    dmask = offs_d < D
    start, end = _chunk(pid_c, CHUNK, N)
    qb0 = _slab(Q, pid_b, h0, sq_b, sq_h)
    ob0 = _slab(O, pid_b, h0, so_b, so_h)
    sc0, ss0, zc0, zs0, up0 = _head_state(STATE, pid_b * H + h0, BD, BDV)
    x0n = _load_tile(qb0, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
    if HPP > 1:
        qb1 = _slab(Q, pid_b, h0 + 1, sq_b, sq_h)
        ob1 = _slab(O, pid_b, h0 + 1, so_b, so_h)
        sc1, ss1, zc1, zs1, up1 = _head_state(STATE, pid_b * H + h0 + 1, BD, BDV)
        x1n = _load_tile(qb1, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
    if HPP > 2:
        qb2 = _slab(Q, pid_b, h0 + 2, sq_b, sq_h)
        ob2 = _slab(O, pid_b, h0 + 2, so_b, so_h)
        sc2, ss2, zc2, zs2, up2 = _head_state(STATE, pid_b * H + h0 + 2, BD, BDV)
        x2n = _load_tile(qb2, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
        qb3 = _slab(Q, pid_b, h0 + 3, sq_b, sq_h)
        ob3 = _slab(O, pid_b, h0 + 3, so_b, so_h)
        sc3, ss3, zc3, zs3, up3 = _head_state(STATE, pid_b * H + h0 + 3, BD, BDV)
        x3n = _load_tile(qb3, start, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
    lga = _log2(tl.abs(alpha))
    for n0 in tl.range(start, end, BLOCK_N):
        offs_n, nmask, rows = _token_rows(n0, end, BLOCK_N, False)
        omask = nmask[:, None] & dmask[None, :]
        optr = rows[:, None] * so_n + offs_d[None, :] * so_d
        x0 = x0n
        x0n = _load_tile(qb0, n0 + BLOCK_N, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
        if HPP > 1:
            x1 = x1n
            x1n = _load_tile(qb1, n0 + BLOCK_N, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
        if HPP > 2:
            x2 = x2n
            x2n = _load_tile(qb2, n0 + BLOCK_N, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
            x3 = x3n
            x3n = _load_tile(qb3, n0 + BLOCK_N, end, sq_n, offs_d, sq_d, dmask, BLOCK_N, False)
        o = _map_tile(x0, sc0, ss0, zc0, zs0, up0, alpha, lga, lam, tau, eps, APPROX, CLAMP)
        tl.store(ob0 + optr, o.to(O.dtype.element_ty), mask=omask)
        if HPP > 1:
            o = _map_tile(x1, sc1, ss1, zc1, zs1, up1, alpha, lga, lam, tau, eps, APPROX, CLAMP)
            tl.store(ob1 + optr, o.to(O.dtype.element_ty), mask=omask)
        if HPP > 2:
            o = _map_tile(x2, sc2, ss2, zc2, zs2, up2, alpha, lga, lam, tau, eps, APPROX, CLAMP)
            tl.store(ob2 + optr, o.to(O.dtype.element_ty), mask=omask)
            o = _map_tile(x3, sc3, ss3, zc3, zs3, up3, alpha, lga, lam, tau, eps, APPROX, CLAMP)
            tl.store(ob3 + optr, o.to(O.dtype.element_ty), mask=omask)


@triton.jit
def _reduce_tile(x, vv, acc_c, acc_s, zd_c, zd_s, ones, alpha, lam, LAM_INT: tl.constexpr, APPROX: tl.constexpr,
                 CLAMP: tl.constexpr, PREC: tl.constexpr):
    """_fwd_reduce's body for one tile (ZDOT, no RoPE): the partial S, z accumulators updated."""
    x = x.to(tl.float32)
    vv = vv.to(tl.float32)
    x2 = x * x
    r = tl.rsqrt(tl.sum(x2, axis=1) + 1e-12)
    u, uc = _angle(x * (alpha * r)[:, None], APPROX, CLAMP)
    m = _key_mag(x, x2, lam, LAM_INT)
    c, s = _sincos_angle(uc, APPROX)
    fc = tl.trans(m * c)
    fs = tl.trans(m * s)
    zd_c = tl.dot(fc, ones, zd_c, input_precision=PREC)
    zd_s = tl.dot(fs, ones, zd_s, input_precision=PREC)
    acc_c = tl.dot(fc, vv, acc_c, input_precision=PREC)
    acc_s = tl.dot(fs, vv, acc_s, input_precision=PREC)
    return acc_c, acc_s, zd_c, zd_s


@triton.jit
def _reduce_store(PART, slot, acc_c, acc_s, zd_c, zd_s, BD: tl.constexpr, BDV: tl.constexpr):
    cols = tl.arange(0, 16)
    z_c = tl.sum(tl.where(cols[None, :] == 0, zd_c, 0.0), axis=1)
    z_s = tl.sum(tl.where(cols[None, :] == 0, zd_s, 0.0), axis=1)
    _store_state(PART, slot, acc_c, acc_s, z_c, z_s, BD, BDV, BDV)


@triton.jit
def _fwd_reduce_hg(K, V, PART, N, H, CHUNK, n_chunks, sk_b, sk_n, sk_h, sk_d, sv_b, sv_n, sv_h, sv_d, alpha, lam,
                   D: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, LAM_INT: tl.constexpr,
                   APPROX: tl.constexpr, CLAMP: tl.constexpr, PREC: tl.constexpr, HPP: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    """_fwd_reduce (ZDOT, VEC4, no RoPE) over HPP (1, 2, 4) heads of one token chunk, tiles loaded back to back."""
    pid_g, pid_c, pid_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    h0 = pid_g * HPP
    offs_d = tl.arange(0, BD)
    dmask = offs_d < D
    col = (offs_d // 4) * 4 + offs_d % 4  # runs of 4 columns a thread (nala._reduce_vec4)
    ones = tl.full((BLOCK_N, 16), 1.0, tl.float32)
    start, end = _chunk(pid_c, CHUNK, N)
    kb0 = _slab(K, pid_b, h0, sk_b, sk_h)
    vb0 = _slab(V, pid_b, h0, sv_b, sv_h)
    ac0 = tl.zeros((BD, BDV), dtype=tl.float32)
    as0 = tl.zeros((BD, BDV), dtype=tl.float32)
    zc0 = tl.zeros((BD, 16), dtype=tl.float32)
    zs0 = tl.zeros((BD, 16), dtype=tl.float32)
    k0n = _load_tile(kb0, start, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
    v0n = _load_tile(vb0, start, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
    if HPP > 1:
        kb1 = _slab(K, pid_b, h0 + 1, sk_b, sk_h)
        vb1 = _slab(V, pid_b, h0 + 1, sv_b, sv_h)
        ac1 = tl.zeros((BD, BDV), dtype=tl.float32)
        as1 = tl.zeros((BD, BDV), dtype=tl.float32)
        zc1 = tl.zeros((BD, 16), dtype=tl.float32)
        zs1 = tl.zeros((BD, 16), dtype=tl.float32)
        k1n = _load_tile(kb1, start, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
        v1n = _load_tile(vb1, start, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
    if HPP > 2:
        kb2 = _slab(K, pid_b, h0 + 2, sk_b, sk_h)
        vb2 = _slab(V, pid_b, h0 + 2, sv_b, sv_h)
        ac2 = tl.zeros((BD, BDV), dtype=tl.float32)
        as2 = tl.zeros((BD, BDV), dtype=tl.float32)
        zc2 = tl.zeros((BD, 16), dtype=tl.float32)
        zs2 = tl.zeros((BD, 16), dtype=tl.float32)
        k2n = _load_tile(kb2, start, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
        v2n = _load_tile(vb2, start, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
        kb3 = _slab(K, pid_b, h0 + 3, sk_b, sk_h)
        vb3 = _slab(V, pid_b, h0 + 3, sv_b, sv_h)
        ac3 = tl.zeros((BD, BDV), dtype=tl.float32)
        as3 = tl.zeros((BD, BDV), dtype=tl.float32)
        zc3 = tl.zeros((BD, 16), dtype=tl.float32)
        zs3 = tl.zeros((BD, 16), dtype=tl.float32)
        k3n = _load_tile(kb3, start, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
        v3n = _load_tile(vb3, start, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
    for n0 in tl.range(start, end, BLOCK_N):
        k0 = k0n
        v0 = v0n
        k0n = _load_tile(kb0, n0 + BLOCK_N, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
        v0n = _load_tile(vb0, n0 + BLOCK_N, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
        if HPP > 1:
            k1 = k1n
            v1 = v1n
            k1n = _load_tile(kb1, n0 + BLOCK_N, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
            v1n = _load_tile(vb1, n0 + BLOCK_N, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
        if HPP > 2:
            k2 = k2n
            v2 = v2n
            k2n = _load_tile(kb2, n0 + BLOCK_N, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
            v2n = _load_tile(vb2, n0 + BLOCK_N, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
            k3 = k3n
            v3 = v3n
            k3n = _load_tile(kb3, n0 + BLOCK_N, end, sk_n, col, sk_d, dmask, BLOCK_N, False)
            v3n = _load_tile(vb3, n0 + BLOCK_N, end, sv_n, col, sv_d, dmask, BLOCK_N, False)
        ac0, as0, zc0, zs0 = _reduce_tile(k0, v0, ac0, as0, zc0, zs0, ones, alpha, lam, LAM_INT, APPROX, CLAMP, PREC)
        if HPP > 1:
            ac1, as1, zc1, zs1 = _reduce_tile(k1, v1, ac1, as1, zc1, zs1, ones, alpha, lam, LAM_INT, APPROX, CLAMP,
                                              PREC)
        if HPP > 2:
            ac2, as2, zc2, zs2 = _reduce_tile(k2, v2, ac2, as2, zc2, zs2, ones, alpha, lam, LAM_INT, APPROX, CLAMP,
                                              PREC)
            ac3, as3, zc3, zs3 = _reduce_tile(k3, v3, ac3, as3, zc3, zs3, ones, alpha, lam, LAM_INT, APPROX, CLAMP,
                                              PREC)
    _reduce_store(PART, (pid_b * H + h0) * n_chunks + pid_c, ac0, as0, zc0, zs0, BD, BDV)
    if HPP > 1:
        _reduce_store(PART, (pid_b * H + h0 + 1) * n_chunks + pid_c, ac1, as1, zc1, zs1, BD, BDV)
    if HPP > 2:
        _reduce_store(PART, (pid_b * H + h0 + 2) * n_chunks + pid_c, ac2, as2, zc2, zs2, BD, BDV)
        _reduce_store(PART, (pid_b * H + h0 + 3) * n_chunks + pid_c, ac3, as3, zc3, zs3, BD, BDV)


def hg_forward(q, k, v, hpp_r: int, cfg_r: tuple, hpp_m: int, cfg_m: tuple, o=None):
    """The forward with the prototype passes: cfg = (BLOCK_N, warps, stages, programs per SM)."""
    n = q.shape[1]
    dev = q.device
    state_n = nala._state_size(16, 16)
    state = torch.empty((1, H, state_n), dtype=torch.float32, device=dev)
    if o is None:
        o = torch.empty_like(q)
    bn, w, st, pp = cfg_r
    chunk, n_chunks = nala._plan(n, H // hpp_r, dev, pp)
    part = torch.empty((H * n_chunks * state_n,), dtype=torch.float32, device=dev)
    _fwd_reduce_hg[(H // hpp_r, n_chunks, 1)](
        k, v, part, n, H, chunk, n_chunks, *k.stride(), *v.stride(), 1.0, 3.0, D=D, BD=16, BDV=16, LAM_INT=3,
        APPROX=True, CLAMP=False, PREC="tf32", HPP=hpp_r, BLOCK_N=bn, num_warps=w, num_stages=st)
    nala._combine_launch(part, state, H, n_chunks, 1.0 / n, state_n)
    bn, w, st, pp = cfg_m
    chunk, n_chunks = nala._plan(n, H // hpp_m, dev, pp)
    _fwd_map_hg[(H // hpp_m, n_chunks, 1)](
        q, state, o, n, H, chunk, *q.stride(), *o.stride(), 1.0, 3.0, 0.5, 1e-6, D=D, BD=16, BDV=16, APPROX=True,
        CLAMP=False, HPP=hpp_m, BLOCK_N=bn, num_warps=w, num_stages=st)
    return o, state


def hmajor_forward(q, k, v, o):
    """The landed kernels, o written into a caller's (head-major) buffer: nala_forward's launches, o's strides."""
    n = q.shape[1]
    dev = q.device
    state_n = nala._state_size(16, 16)
    state = torch.empty((1, H, state_n), dtype=torch.float32, device=dev)
    bucket = nala._pow2(n * H)
    chunk, n_chunks = nala._plan(n, H, dev, nala._PROGRAMS_PER_SM["fwd_reduce"])
    part = torch.empty((H * n_chunks * state_n,), dtype=torch.float32, device=dev)
    nala._fwd_reduce_tuned[(H, n_chunks, 1)](
        k, v, state, part, n, 1, H, chunk, n_chunks, bucket, *k.stride(), *v.stride(), 1.0, 3.0,
        D=D, DV=D, BD=16, BDV=16, BDZ=16, LAM_INT=3, ROPE=False, PREC="tf32", APPROX=True, OFFS64=False, VEC4=True,
        ZACC=True, CLAMP=False, ZDOT=True)
    nala._combine_launch(part, state, H, n_chunks, 1.0 / n, state_n)
    chunk, n_chunks = nala._plan(n, H, dev, nala._PROGRAMS_PER_SM["fwd_map"])
    nala._fwd_map_tuned[(H, n_chunks, 1)](
        q, state, state, o, n, 1, H, chunk, n_chunks, bucket, *q.stride(), *o.stride(), 1.0, 3.0, 0.5, 1e-6,
        D=D, DV=D, BD=16, BDV=16, ROPE=False, PREC="tf32", APPROX=True, OFFS64=False, FASTMAG=True, F16=True,
        CLAMP=False)
    return o, state


def set_l2_fetch(nbytes: int) -> int:
    """cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity = 0x05, nbytes) through the CUDA runtime torch loads;
    returns the cudaError (0 = success)."""
    import torch.cuda  # noqa: F401
    libs = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cuda_runtime", "lib",
                                  "libcudart.so*")) + ["libcudart.so.12", "libcudart.so"]
    for path in libs:
        try:
            rt = ctypes.CDLL(path)
            break
        except OSError:
            continue
    else:
        return -1
    return int(rt.cudaDeviceSetLimit(ctypes.c_int(5), ctypes.c_size_t(nbytes)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=518_400)
    ap.add_argument("--json", required=True)
    ap.add_argument("--map", default="1:64x2x2@48,2:64x2x2@24,2:64x4x2@24,4:64x2x2@12,4:64x4x2@12,4:32x2x2@12,"
                                     "2:32x1x2@24,4:32x4x2@12")
    ap.add_argument("--reduce", default="1:32x1x2@16,2:32x1x2@8,2:16x1x2@8,2:32x2x2@8,4:16x1x2@4,4:32x1x2@4,"
                                        "4:16x1x2@8")
    a = ap.parse_args()
    n = a.tokens
    res: dict = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "tokens": n, "rows": []}

    def save():
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)

    def row(**kw):
        res["rows"].append(kw)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items()), flush=True)
        save()

    q, k, v, _ = _inputs(n, "dense")
    o_ref, st_ref = nala.nala_forward(q, k, v, *HP)
    for lay in ("dense", "qkvg"):
        qq, kk, vv, _ = _inputs(n, lay)
        fn = lambda: nala.nala_forward(qq, kk, vv, *HP)  # noqa: E731
        fn()
        row(part="landed", layout=lay, graph_us=graph_ms(fn) * 1e3,
            **{name: round(us, 1) for name, us in kernel_us(fn).items()})
    # head-major storage, o head-major
    qh, kh, vh = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    oh = torch.empty_like(qh)
    fn = lambda: hmajor_forward(qh, kh, vh, oh)  # noqa: E731
    o2, st2 = fn()
    torch.cuda.synchronize()
    row(part="hmajor", layout="hmajor", state_rel=_rel(st2, st_ref), o_rel=_rel(o2, o_ref), graph_us=graph_ms(fn) * 1e3,
        **{kk_: round(us, 1) for kk_, us in kernel_us(fn).items()})
    # prototypes: each map config with the landed reduce config, each reduce config with the landed map config
    def parse(t):
        hpp, cfg = t
        bn, w, st_pp = cfg.split("x", 2)
        st, pp = st_pp.split("@")
        return int(hpp), (int(bn), int(w), int(st), int(pp))
    base_r = (1, (32, 1, 2, 16))
    base_m = (1, (64, 2, 2, 48))
    for which, text in (("map", a.map), ("reduce", a.reduce)):
        for spec in text.split(","):
            hpp, cfg = parse(spec.split(":"))
            hr, cr = (hpp, cfg) if which == "reduce" else base_r
            hm, cm = (hpp, cfg) if which == "map" else base_m
            o = torch.empty_like(q)
            fn = lambda: hg_forward(q, k, v, hr, cr, hm, cm, o)  # noqa: E731
            try:
                o3, st3 = fn()
                torch.cuda.synchronize()
                us = kernel_us(fn)
                row(part="hg", which=which, hpp=hpp, cfg=spec.split(":")[1], state_rel=_rel(st3, st_ref),
                    o_rel=_rel(o3, o_ref), graph_us=graph_ms(fn) * 1e3, **{kk_: round(t, 1) for kk_, t in us.items()})
            except Exception as e:  # one config that fails to compile must not cost the rest
                row(part="hg", which=which, hpp=hpp, cfg=spec.split(":")[1], error=repr(e)[:200])
    # the L2 fetch granularity hint, last (it stays set for the process)
    err = set_l2_fetch(128)
    for lay in ("dense",):
        fn = lambda: nala.nala_forward(q, k, v, *HP)  # noqa: E731
        fn()
        row(part="l2fetch128", layout=lay, cuda_err=err, graph_us=graph_ms(fn) * 1e3,
            **{kk_: round(us, 1) for kk_, us in kernel_us(fn).items()})
    print("\nsummary (µs):")
    for r in res["rows"]:
        keys = {k_: r[k_] for k_ in ("part", "layout", "which", "hpp", "cfg") if k_ in r}
        ks = {k_: r[k_] for k_ in r if k_.startswith("_")}
        print(" ", keys, f"graph {r.get('graph_us', float('nan')):.1f}", ks, r.get("o_rel", ""), r.get("error", ""))


if __name__ == "__main__":
    main()
