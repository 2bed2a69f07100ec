r"""Fused NaLa attention in Triton: forward and backward, deterministic, any strides.

The math is ``nalasr.ops.nala.nala_attention_reference`` (the single source of truth; this package does not
import it). The device math is in ``nala_math``, the kernels in ``nala_fwd`` and ``nala_bwd`` (the register passes,
which issue their mma from registers without shared memory for the model's float16 16-dim heads, in ``nala_rr``,
``nala_map_rr``, ``nala_bwd_query_rr`` and ``nala_bwd_key_rr``); this module plans, tunes and launches them and binds
them to autograd. Per (batch b, head h), N
tokens, D = head dim, Dv = value dim, everything below in float32:

    r = (Σx² + 1e-12)^(-1/2),  dir = x·r,  ‖x‖ = Σx²·r
    θ(x)  = clamp((π/4)·tanh(α·dir), ±Θ),  Θ = π/4 − 1e-4            (the reference's THETA_MAX)
    m_q   = |dir(q)|^p,  p = λ(τ + tanh‖q‖)     m_k = |k|^λ
    φ(x)  = [m·cos θ, m·sin θ],   φ̃(x) = [m·cos(θ+a), m·sin(θ+a)],   a = ω·pos (RoPE; φ̃ = φ without)
    S = (1/N) Σ_j φ̃k_j v_jᵀ   (2D × Dv)        z = (1/N) Σ_j φk_j   (2D)
    o_t = num_t / den_t,   num_t = Sᵀ φ̃q_t,   den_t = φq_tᵀ z + ε

Forward, two stages (plus a tiny combine):
  1. ``_fwd_reduce``: programs split the token axis into chunks; each computes φk on the fly from k and
     accumulates its chunk's partial S, z in registers (tl.dot for S), written to a partial buffer. For 16-bit k, v
     of 16 unit-stride dims without RoPE (the model's case) ``nala_rr._fwd_reduce_rr`` does the same with its mma
     fragments loaded and computed in registers, no shared memory (see _reduce_rr).
  2. ``_combine``: sums the partials in a fixed order (no atomics: bitwise reproducible) and scales by 1/N.
  3. ``_fwd_map``: every query tile computes φq on the fly, num = φ̃qᵀS (tl.dot), den = φqᵀz + ε, writes o once.
  On sm_90+ the three chain by programmatic dependent launch (see _pdl): each starts in the tail of the one before.
  φ never touches memory; HBM traffic is q, k, v read once and o written once (+ a few KiB of state).

Backward. With g_t = ∂L/∂o_t (chain rule, per (b, h)):
    dnum_t = g_t / den_t                                     (Dv)
    dden_t = −g_t·num_t / den_t² = −(g_t·o_t) / den_t        (scalar)
    ∂L/∂φ̃q_t = S · dnum_t                                    (2D)
    ∂L/∂φq_t  = dden_t · z                                   (2D)
    dS = Σ_t φ̃q_t dnum_tᵀ      dz = Σ_t dden_t φq_t          (reduced over queries)
    ∂L/∂v_j  = (1/N) dSᵀ φ̃k_j                                (Dv)
    ∂L/∂φ̃k_j = (1/N) dS v_j     ∂L/∂φk_j = (1/N) dz          (2D; the z-part is the same for every key)
  so the backward is one pass over queries (map: dq; reduce: dS, dz partials, from q, g and the saved S, z;
  o is neither read nor recomputed: g·num = den·(φ̃q·S·dnum) gives dden from ∂L/∂φ̃q), the same deterministic
  combine (scaled by 1/N), and one pass over keys (map: dk, dv from k, v and dS/N, dz/N). q, g, k, v read
  once, dq, dk, dv written once. For float16 q, k, v of 16 dims without RoPE the two passes are
  ``nala_bwd_query_rr._bwd_query_rr`` and ``nala_bwd_key_rr._bwd_key_rr`` (see _bwd_query_rr, _bwd_key_rr).

  Through the feature map, per element i, with (gc, gs) the gradient of φ's cos/sin halves and (g̃c, g̃s) that of
  φ̃'s (c = cos θ, s = sin θ, c̃ = cos(θ+a), s̃ = sin(θ+a)):
    ∂L/∂m = gc·c + gs·s + g̃c·c̃ + g̃s·s̃
    ∂L/∂θ = m·(gs·c − gc·s + g̃s·c̃ − g̃c·s̃)
    ∂L/∂dir_i  = ∂L/∂θ_i·(π/4)·α·(1 − tanh²(α·dir_i))·[|θ_raw| ≤ Θ]     (clamp passes the gradient inside only)
  key:   ∂m/∂k_i = λ·|k_i|^(λ−1)·sign(k_i)
  query: ∂m/∂dir_i = p·m_i/dir_i (0 where dir_i = 0),  ∂L/∂p = Σ_i ∂L/∂m_i · m_i·ln|dir_i|  (0 where dir_i = 0),
         ∂L/∂‖q‖ = ∂L/∂p · λ·(1 − tanh²‖q‖)
  normalisation (exact in the 1e-12, like autograd of the reference):
    ∂L/∂x_i = r·(∂L/∂dir_i − dir_i·Σ_l ∂L/∂dir_l·dir_l) + ∂L/∂‖x‖ · x_i·r·(2 − Σx²·r²)

Numerics: loads are cast to float32; feature maps, S, z, dS, dz and every accumulation are float32. tl.dot runs
in tf32 for fp16/bf16 inputs (the tf32 rounding, 2^-11, is below the output's own fp16/bf16 rounding) and in
tf32x3 (≈ fp32) for fp32 inputs; NALASR_DOT_PRECISION=ieee|tf32|tf32x3 overrides. Where a product would be tf32,
fp16 inputs give it float16 operands instead, scaled into range (the map's, _map_f16; the backward's gradient
products, _bwd_f16): the same 11 significant bits, rounded to nearest. The feature map's tanh and
sin/cos are accurate to ~1e-7; for fp16/bf16 inputs without RoPE (APPROX) they are tanh.approx.f32 (~2^-11
relative) and short sin/cos polynomials (cos < 1.1e-5, sin < 1e-6), errors below those inputs' own rounding
(APPROX took 8% off the forward and 7% off the backward at 518K tokens in session 9); NALASR_APPROX_MATH=0|1
overrides. For float16 queries with |α| ≤ 1 the forward map forms φq in float16 pairs instead (HALF2, _map_half2 and
nalasr_kernels.half2: the angle's cosine and sine as polynomials in α·dir, no tanh; den from float16 products).

Conditioning of the backward. ∂L/∂φq_t = S·dnum_t + dden_t·z = (1/(N·den_t)) Σ_j φk_j (v_j − o_t)·g_t is a
difference of two nearly equal terms wherever the values sit close to the output (one token: o = v exactly;
values with a large common offset), and a 2^-11 (tf32) rounding of either term is amplified by |v| / |v − o|;
the same holds for ∂L/∂φk_j ∝ dS·v_j + dz. Without RoPE the kernels therefore centre the values on
v̄ = Sᵀz / (z·z) (any v̄ is exact algebra; this one is v itself at N = 1): with S' = S − z·v̄ᵀ,
    ∂L/∂φq_t = S'·dnum_t + dden'_t·z,    dden'_t = dden_t + v̄·dnum_t = −(φq_t·S'·dnum_t − ε·v̄·dnum_t) / den_t
    dz' = Σ_t dden'_t φq_t = dz + dS·v̄,  ∂L/∂φk_j = (1/N) (dS·(v_j − v̄) + dz')
  so every product sees only the spread of the values and tf32 keeps its relative 2^-11 (CENTRE: fp16/bf16
  inputs without RoPE). With RoPE (φ̃ ≠ φ: the two parts pass through different angles) the products that feed
  dq and dk run in tf32x3 instead, as every product does for fp32 inputs; there the centring is left out, since
  its few extra fp32 roundings are what is left of the ε-sized gradient at N = 1.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from typing import Any

import torch
import triton
import triton.testing
from torch import Tensor

from . import nala_bwd_key_rr, nala_bwd_query_rr, nala_map_rr, nala_rr
from .nala_bwd import _bwd_key, _bwd_query
from .nala_fwd import _combine, _fwd_map, _fwd_map_pair, _fwd_reduce
from .nala_math import _HAS_GDC, _INTERPRET

__all__ = ["NalaAttentionFunction", "nala_attention_triton", "nala_forward", "nala_backward"]

# Must match nalasr/ops/nala.py (not imported: this package never imports nalasr). Kept here as Python
# floats; the kernels use the same numbers as literals (a Triton kernel reads module globals only as constexpr).
NORM_EPS = 1e-12
THETA_MAX = math.pi / 4 - 1e-4
_DEFAULTS = dict(lam=3.0, tau=0.5, alpha=1.0, eps=1e-6)  # nalasr.ops.nala.NalaParams()

# Test hooks. _OUT_FILL: fill every buffer the kernels must write (outputs, partials, state) with this value
# before launching (NaN in the tests, so an unwritten element cannot pass). _CONFIG: a fixed launch config
# {"BLOCK_N": .., "CHUNK": .., "num_warps": ..} instead of the autotuner (tests use tiny chunks to exercise
# several chunks and ragged tails at small N).
_OUT_FILL: float | None = None
_CONFIG: dict | None = None


# ================================================================================================== autotune
# Few configs; the key buckets the token count (next power of two of B·N·H) so a new image size reuses the tuning
# of its bucket (and, with cache_results, a fresh process reads it from Triton's disk cache). Register pressure
# grows with the tile elements per thread, BLOCK_N·BD / (32·num_warps), hence the pruning (see _prune).

_FWD_CONFIGS = [
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 256}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=3),  # more loads in flight per program
    triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=1),  # the manual prefetch alone
    triton.Config({"BLOCK_N": 256}, num_warps=8, num_stages=1),
    # with the float16 product (_map_f16), 59.0 µs at 518K against 61.5 for 64 × 4 (session 15, call 6)
    triton.Config({"BLOCK_N": 64}, num_warps=2, num_stages=2),
]
# _fwd_reduce: one warp a program. Its S product has 16 rows (the φ halves), so a 2-D tl.dot splits only the
# columns across warps and every warp of a program reads the whole φ operand from shared memory: 4 warps read it 4
# times. With one warp (and more programs, see _PROGRAMS_PER_SM) the shared-memory traffic per token is
# about half (offline sm_90: 96 instead of 224 wavefronts per 32 tokens with ZACC). On the H200 at 518K:
# 70.9 µs against 103.8 for the 4-warp pick (benchmarks/results/h200/session13/call1/sweep_r*.json). It takes 128
# registers (16 warps an SM); capped at 96 it spills and took 109.4 µs (call3/sweep_r.json). The multi-warp
# configs stay for wide heads (BD = 64: 32 tokens are 64 elements a thread on one warp).
_REDUCE_CONFIGS = [
    triton.Config({"BLOCK_N": 32}, num_warps=1, num_stages=2),
    triton.Config({"BLOCK_N": 16}, num_warps=1, num_stages=2),
    triton.Config({"BLOCK_N": 32}, num_warps=2, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
]
_BWD_CONFIGS = [  # ~30 live (BLOCK_N, BD) float32 tiles in the backward: fewer tokens per thread
    triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 128}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=1),
    triton.Config({"BLOCK_N": 32}, num_warps=2, num_stages=2),
    # _bwd_query's pick at 518K with EYE (205 registers): 207.6 against 222.6 µs for 32 tokens on 2 warps
    # (benchmarks/results/h200/session14/call2/sweep_q.json)
    triton.Config({"BLOCK_N": 16}, num_warps=1, num_stages=2),
    # _bwd_query needed ~250 registers a thread before EYE (2 blocks of 4 warps an SM): capped, it spills some to
    # L1 but 3 or 4 blocks fit (_bwd_key with EYE: 128 registers under the 168 cap)
    triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2, maxnreg=168),
    triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=2, maxnreg=128),
]
_MAX_BLOCK_N = 256  # chunks are multiples of this, so every config tiles a chunk exactly (unless a pass says else)
# _bwd_query's chunks: multiples of 64 tokens (every pick of its autotuner at 518K and 1M, 16 or 64, tiles them; a
# larger one masks part of a chunk's last tile). Its 8 programs an SM then fill 1,048 of the H200's 1,056 places at
# 518K instead of 1,016 (2,048-token chunks): the backward 288.0-288.9 against 292.5 µs
# (benchmarks/results/h200/session20/call5/pdl_all.json).
_BWD_QUERY_QUANTUM = 64
_BWD_KEY_QUANTUM = 64  # its autotuner's pick at 518K is 64 tokens too (see _PROGRAMS_PER_SM)
_FWD_MAP_QUANTUM = 64  # its pick's tile (64 tokens on 2 warps); see _PROGRAMS_PER_SM
# _fwd_map_pair's tokens a tile, warps, stages and register cap (None: ptxas's 118, 16 programs an SM). Capped at 104
# (no spills offline, 676 instead of 659 loop instructions) 19 fit, and ran 57.3 against 49.4 µs at 16 at 518K
# (benchmarks/results/h200/session27/call1).
_PAIR_TILE: tuple[int, int, int, int | None] = (32, 1, 3, None)
_FWD_MAP_PAIR_QUANTUM = _PAIR_TILE[0]  # its chunks: multiples of its tile
# The passes' smallest chunks: they decide the program count at small sizes only (config_sweep_gpu.py --min-chunk).
# The one-head map's is 128 tokens since session 27: on the H200 (dense q, 4 heads, 64 tokens on 2 warps, 28 an SM)
# the forward graph at 4K 14.3-14.5 µs against 18.9-19.1 with 256 (64: 12.2), at 49K 18.9-19.0 against 23.1-23.5
# (64: 20.0), at 131K 38.1-38.2 against 38.4-38.7 (benchmarks/results/h200/session27/call1-2, sweeps.json). The
# reduce's (its partials feed _combine) is 128 too: with the map's, at 4K 10.2 against 11.7-12.1 µs (64: 9.5), at 49K
# 18.7 against 19.4-19.8 (64: 19.5; session27/call3/sweeps.json).
_FWD_MAP_MIN_CHUNK = 128
_FWD_MAP_PAIR_MIN_CHUNK = _MAX_BLOCK_N
_FWD_MAP_RR_MIN_CHUNK = 128
_FWD_REDUCE_MIN_CHUNK = 128
_PAIR_MIN_ROWS = 800_000  # (token, head pair) rows from which _map_pair takes it: 400K tokens of 4 heads (see there)
# (token, head pair) rows from which _map_rr takes the register map by itself: 49K tokens of 4 heads (Urban100 ×4's LR),
# the smallest size it was timed at. On the H200 on the model's views (session 31 call 4, one process each): the
# forward graph at 49K 0.018 ms either way (1,436 against 1,364 GB/s), at 262K 0.059 against 0.061 (the map 25.3
# against the one-head map's 29.6 µs). Below that the one-head map's 2-warp programs stay (not timed there).
_MAP_RR_MIN_ROWS = 98_304
_TUNE_KEY = ["N_BUCKET", "D", "DV", "ROPE"]


def _per_thread(c, bd: int) -> int:
    return c.kwargs["BLOCK_N"] * bd // (32 * c.num_warps)


def _prune(limit: int):
    # Elements of one (BLOCK_N, BD) tile per thread. From ptxas on sm_90 (D = 16): the forward kernels stay
    # at 70-190 registers without spills up to 16, the backward query kernel reaches 255 registers at 8 and spills
    # beyond. Configs over the limit are dropped; if none is left, the leanest one runs.
    def prune(configs, named_args, **kwargs):
        bd = max(kwargs.get("BD", 16), kwargs.get("BDV", 16))
        kept = [c for c in configs if _per_thread(c, bd) <= limit]
        return kept or [min(configs, key=lambda c: (_per_thread(c, bd), -c.num_warps))]

    return prune


def _autotune_kwargs() -> dict:
    # Short benchmarks (the kernels run in tens of µs) and, where this Triton has it, the on-disk cache of
    # tuning results so a fresh process does not tune again.
    params = inspect.signature(triton.autotune).parameters
    kw: dict[str, Any] = {}
    if "do_bench" in params:
        kw["do_bench"] = lambda fn, quantiles: triton.testing.do_bench(fn, warmup=5, rep=20, quantiles=quantiles)
    if "cache_results" in params:
        kw["cache_results"] = True
    return kw


def _tuned(kernel, configs, limit: int, key: list[str] = _TUNE_KEY):
    return triton.autotune(configs=configs, key=key, prune_configs_by={"early_config_prune": _prune(limit)},
                           **_autotune_kwargs())(kernel)


_fwd_reduce_tuned = _tuned(_fwd_reduce, _REDUCE_CONFIGS, 16)
_fwd_map_tuned = _tuned(_fwd_map, _FWD_CONFIGS, 16)
_bwd_query_tuned = _tuned(_bwd_query, _BWD_CONFIGS, 8)
_bwd_key_tuned = _tuned(_bwd_key, _BWD_CONFIGS, 8)

# Programs per SM and pass: several waves balance the load and keep enough loads in flight to hide HBM latency;
# the cost in the passes that reduce (_fwd_reduce, _bwd_query) is the partial buffer (one 2·BD·BDV + 2·BD
# float32 state per chunk, ~1-2% of the traffic at 518K). The map passes (_fwd_map, _bwd_key) write no partials
# and take their own, finer chunks: 3 of _fwd_map's 8-warp programs fit an SM (76 registers), so at 8 per SM its
# 1,016 programs ran in 2.57 waves, the last 57% full (ncu, session 12). At 518K on the H200, _fwd_map 72.8 →
# 64.3 µs with 24 (63.3 with 48), the forward 0.183 → 0.175 ms (benchmarks/results/h200/session12/diag_map*.json).
# 48 since session 15, where every config swept with and without the float16 product ran faster at 48 than at 24:
# 59.0 / 61.0 µs (64 tokens, 2 warps, F16), 61.5 / 62.1 (64 × 4, F16), 62.8 / 63.7 and 63.9 / 66.1 (tf32;
# benchmarks/results/h200/session15/call6/sweep_m16.json). 36 on 64-token chunk quanta (_FWD_MAP_QUANTUM) since
# session 23: 12 of its 2-warp programs (79 registers) fit an SM, so 36 an SM is 4,632 programs in 2.92 waves of
# 1,584 places, where 48 on 256-token quanta (512-token chunks) left 4,052 in 2.56. At 518K on the H200 the map 53.7
# against 54.2 µs at 36 on 256-token quanta and 54.3 at 48; 55.4-55.7 at 12 or 24
# (benchmarks/results/h200/session23/call1/sweep_map.json).
# _fwd_reduce's one-warp programs (see _REDUCE_CONFIGS) take 16 per SM since session 15: at 128 registers 16 of
# them fill an SM, so 16 is one full wave, and half the chunks halve _combine's reading of the partials (the
# forward's combine took 6.2 µs at 32, every sweep of sessions 13-14). At 518K on the H200 (session 15,
# call4/sweep_r16.json): reduce + combine 71.9 + 2.8 µs at 16 against 71.3 + 6.3 at 32, the forward graph 137.5
# against 143.0 µs (16 tokens a program: 75.4 + 2.8 against 79.6 + 5.2).
# NALASR_PROGRAMS_PER_SM_<PASS> (FWD_REDUCE, FWD_MAP, FWD_MAP_HALF2, FWD_MAP_PAIR, FWD_MAP_RR, BWD_QUERY, BWD_QUERY_RR,
# BWD_KEY, BWD_KEY_RR) sets one, for the sweeps of benchmarks/config_sweep_gpu.py and kernel_diag_gpu.py.
# bwd_query_rr: 12 (its 168-register cap fits 3 warps a scheduler), bwd_key_rr: 16 (124 registers; 12 or 8 slower,
# see nala._bwd_key_rr).
# _bwd_key took 32 from session 16 (126.8 against 128.5 µs at 24; 64 tokens, 4 warps, 2 stages,
# benchmarks/results/h200/session16/call5/sweep_k_pp.json) and takes 8 with 64-token chunk rounding since session 20:
# 1,984-token chunks, 1,048 programs in two full waves of its 4 programs an SM, where 32 left 4,052 in 7.7. The
# backward at 518K 281.2 against 285.8-287.2 µs, at 1M 558.5 against 560.1-564.4
# (benchmarks/results/h200/session20/call6/bwd_key_plans.json).
# Both backward passes again with tile-strided chunks (session 30 call 2, twice): 8 / 8 stays fastest, the backward
# at 518K 0.245 / 0.247 ms against 0.249-0.257 with either at 16, 0.266-0.299 with _bwd_key at 4 or 12, 0.326-0.328
# with _bwd_query at 9 (224 registers leave two of its warps a scheduler: 9 is a second wave). The forward's 16 / 16
# likewise (call 4): the reduce at 32 or 48 took the forward to 0.111-0.117 ms, the pair map at 32 or 48 gained nothing.
# fwd_map_pair: 16 of _fwd_map_pair's one-warp programs (118 registers) fill an SM, so 16 is one wave (2,026 programs
# of 512 tokens at 518K). On the H200 at 518K, dense q: the map 49.3 µs at 16 against 51.9 / 61.1 / 53.6 / 50.3 at
# 12 / 17 / 24 / 34 (17: a second wave); 32 tokens on 1 warp with 2 or 3 stages 49.6-49.8, 16 tokens 51.4, 64 on 2
# warps (8 an SM) 51.3, chunk quanta of 8, 16 or 32 tokens the same (benchmarks/results/h200/session26/call1-2).
# fwd_map_half2: _fwd_map with HALF2 (see _map_half2) takes 66 registers, so 14 of its 2-warp programs fit an SM and 28
# is two whole waves. At 518K on the H200, twice: the map 52.0 / 52.2 µs against 53.7 / 53.3 at 36 (42: 52.7 / 52.4,
# 48: 52.6 / 52.7, 56: 53.3 / 53.2), the forward graph 108.0 / 107.6 against 109.1 / 108.5
# (benchmarks/results/h200/session25/call3).
_PROGRAMS_PER_SM = {name: int(os.environ.get(f"NALASR_PROGRAMS_PER_SM_{name.upper()}", default))
                    for name, default in (("fwd_reduce", 16), ("fwd_map", 36),
                                          ("fwd_map_half2", 28), ("fwd_map_pair", 16), ("fwd_map_rr", 16),
                                          ("bwd_query", 8), ("bwd_query_rr", 12), ("bwd_key_rr", 16),
                                          ("bwd_key", 8))}


# ================================================================================================ host side


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@functools.lru_cache(maxsize=16)
def _props(device_index: int):
    return torch.cuda.get_device_properties(device_index)


def _cuda_props(device: torch.device):
    """The properties of a CUDA device (cached; the current device where it has no index)."""
    return _props(device.index if device.index is not None else torch.cuda.current_device())


def _sms(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 2 elsewhere (the interpreter's plans)."""
    if device.type != "cuda":
        return 2
    return _cuda_props(device).multi_processor_count


def _plan(n: int, bh: int, device: torch.device, per_sm: int, quantum: int = _MAX_BLOCK_N,
          minimum: int = _MAX_BLOCK_N) -> tuple[int, int]:
    """(tokens per program, number of chunks) for a pass over n tokens of bh (batch, head) pairs, aiming at
    ``per_sm`` programs per SM: chunks of at least ``minimum`` tokens (fewer partials to combine at small n),
    rounded up to a multiple of ``quantum``. A finer quantum than the tile of the widest config fills the wave more
    closely: the register reduce (nala_rr.TILE_TOKENS) at 518K takes 992-token chunks, 2,092 programs for 2,112
    places, against 1,024 (2,028): 55.4-55.7 against 57.2-57.4 µs (benchmarks/results/h200/session20/call1-2)."""
    if _CONFIG is not None:
        chunk = int(_CONFIG["CHUNK"])
        assert chunk % int(_CONFIG["BLOCK_N"]) == 0, "CHUNK must be a multiple of BLOCK_N"
    else:
        target = max(1, -(-_sms(device) * per_sm // bh))  # chunks per (b, h)
        chunk = -(-n // target)
        chunk = max(minimum, -(-chunk // quantum) * quantum)
    return chunk, -(-n // chunk)


try:
    from triton.backends.nvidia.compiler import CUDAOptions as _CUDAOptions
    _PDL_OK = _HAS_GDC and "launch_pdl" in _CUDAOptions.__dataclass_fields__
except ImportError:  # a Triton without its CUDA backend: only the interpreter runs here
    _PDL_OK = False


def _pdl(device: torch.device) -> bool:
    """Whether the passes chain by programmatic dependent launch (PDL): each pass ends with its programs letting
    the next kernel start (_pdl_launch) and the next, launched with launch_pdl, waits for its inputs (_pdl_wait)
    after whatever it can do before (the map loads its first q tile, _bwd_key its first k and v tiles). The next
    kernel's programs then take the SMs the pass frees in its tail, and the launch gap goes. The combine and the map
    (forward), the combine and _bwd_key (backward) launch so; the first pass of each does not (its inputs come from
    kernels that know nothing of PDL). sm_90 and later, a Triton with grid dependency control (≥ 3.4); NALASR_PDL=0
    turns it off."""
    if _forced("NALASR_PDL", ("0", "1")) == "0" or _INTERPRET or not _PDL_OK or device.type != "cuda":
        return False
    return _cuda_props(device).major >= 9


_FASTMAG_ALPHA = (2.0**-20, 2.0**20)  # |α| where xa = α·dir keeps |dir|^p (see _query_mag_fwd)


def _fastmag(approx: bool, lam: float, tau: float, alpha: float) -> bool:
    """Whether the map takes m_q from _query_mag_fwd: approximate math (16-bit inputs), λτ ≥ 1.5 (p ≥ 1.5: a flushed
    subnormal leaves an m that is 0 in float32 anyway) and |α| in _FASTMAG_ALPHA (log2|α| finite and xa normal)."""
    return approx and lam * tau >= 1.5 and _FASTMAG_ALPHA[0] <= abs(alpha) <= _FASTMAG_ALPHA[1]


def _pdl_kw(pdl: bool) -> dict:
    """Launch options of a kernel that waits for the one before (only given when set: older Tritons lack it)."""
    return {"launch_pdl": True} if pdl else {}


def _launch(tuned, plain, grid, *args, **meta):
    if _CONFIG is not None or _INTERPRET:
        cfg = _CONFIG or {"BLOCK_N": 64, "num_warps": 4}
        plain[grid](*args, **meta, BLOCK_N=int(cfg["BLOCK_N"]), num_warps=int(cfg.get("num_warps", 4)))
    else:
        tuned[grid](*args, **meta)


def _empty(shape, dtype, device) -> Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    if _OUT_FILL is not None:
        t.fill_(_OUT_FILL)
    return t


@functools.lru_cache(maxsize=32)
def _rope_freq(d: int, bd: int, base: float, device: torch.device) -> Tensor:
    """ω per angle slot, (BD,) float32: slots j < D/2 and D/2 + j share ω_j = base^(−j/(D/2)); 0 beyond (odd D's
    last angle and padding). Same expression and device as rope_angles() in the reference, same rounding."""
    half = d // 2
    freq = base ** (-torch.arange(half, dtype=torch.float32, device=device) / half)
    out = torch.zeros(bd, dtype=torch.float32, device=device)
    out[:half] = freq
    out[half:2 * half] = freq
    return out


# θ's clamp at ±Θ binds only where tanh(α·dir) > _U_MAX = 1 − 1.3e-4, i.e. α·|dir| > 4.8; |dir| < 1, so it never
# does for |α| ≤ 4, with room for tanh.approx's relative error (≤ 2^-10.99: tanh(4)·(1 + 5e-4) = 0.99983). The
# kernels then leave out the clamp (two min/max an element) and the backward its gradient mask (a select).
_CLAMP_FREE = 4.0


def _clamp(alpha: float) -> bool:
    """Whether the kernels must clamp θ (the reference's cap, which skips itself for |α| ≤ 4.8 the same way)."""
    return abs(float(alpha)) > _CLAMP_FREE


def _forced(name: str, choices: tuple[str, ...]) -> str | None:
    """The environment's override ``name`` (one of ``choices``), or None when unset; ValueError for any other value."""
    forced = os.environ.get(name)
    if forced and forced not in choices:
        raise ValueError(f"{name}={forced!r}: use {', '.join(choices[:-1])} or {choices[-1]}")
    return forced or None


def _precision(*tensors: Tensor, grad: bool = False) -> str:
    """tl.dot precision: tf32x3 for float32 inputs and for the backward's uncentred products (``grad``: with
    RoPE), else tf32. NALASR_DOT_PRECISION overrides all of them."""
    forced = _forced("NALASR_DOT_PRECISION", ("ieee", "tf32", "tf32x3"))
    if forced:
        return forced
    return "tf32x3" if grad or all(t.dtype == torch.float32 for t in tensors) else "tf32"


def _all_16bit(*tensors: Tensor) -> bool:
    return all(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)


def _approx_math(*tensors: Tensor, rope: bool = False) -> bool:
    """tanh.approx and short sin/cos polynomials (APPROX) for 16-bit inputs: their errors (~2^-11, 1e-5) sit below
    the inputs' own rounding and the tf32 products they run in; float32 inputs keep the ~1e-7 paths, and so
    does RoPE whatever the environment says (its backward needs tf32x3 already).
    NALASR_APPROX_MATH=0/1 forces either (benchmarks/device_session8d.sh measures the difference)."""
    if rope:
        return False
    forced = _forced("NALASR_APPROX_MATH", ("0", "1"))
    if forced:
        return forced == "1"
    return _all_16bit(*tensors)


def _reduce_vec4() -> bool:
    """Whether _fwd_reduce loads its k and v tiles as runs of 4 columns per thread instead of 8 (default;
    NALASR_REDUCE_VEC4=0 for the 8). With 8, a thread holds the 8 float32 of one 128-bit fp16 load and stores
    them for tl.dot as two st.shared.v4 inside one 32-byte swizzle unit: every thread of a warp writes the same
    half of its unit, so a store takes 8 wavefronts instead of 4 (offline sm_90 compile,
    benchmarks/compile_sm90.py: 32 of 64 store wavefronts per warp and tile are conflicts; ncu on the H200: 0
    conflicted store wavefronts with 4, 4.1 M of 8.3 M with 8). On the H200 at 518K: 100.9 against 113.9 µs
    (benchmarks/results/h200/session11/diag_vec4{1,0}.json)."""
    return _forced("NALASR_REDUCE_VEC4", ("0", "1")) != "0"


def _reduce_split() -> bool:
    """Whether _bwd_query's reduce products (dS, dz) split a tile's tokens into groups of 16, one batch of a 3-D
    tl.dot each (default; NALASR_REDUCE_SPLIT=0 for one 2-D product): see _reduce_dot. Offline sm_90 compile
    (64 tokens, 4 warps): 24 instead of 112 shared loads and 887 instead of 1012 instructions per warp and tile.
    On the H200 at 518K: 290.5 against 355.7 µs at that config (session 11's 32-token, 2-warp pick: 309 µs;
    benchmarks/results/h200/session12/diag_split{1,0}.json)."""
    return _forced("NALASR_REDUCE_SPLIT", ("0", "1")) != "0"


def _reduce_zdot() -> bool:
    """With ZACC and tf32 products (no RoPE): whether _fwd_reduce takes z from a second product of the same φk
    operand with a (BLOCK_N, 16) tile of ones (default; NALASR_REDUCE_ZDOT=0 sums the tf32-truncated φk
    elementwise): the tensor cores truncate the operand themselves, so the truncation and the sums leave the loop.
    Offline sm_90 (benchmarks/compile_sm90.py --zdot 0|1): 506 → 452 instructions a warp-tile, 128 → 96 registers;
    the (BD, 16) ones product is 8 more mma.sync a tile, unlike the ones column beside v (NALASR_REDUCE_ZACC=0),
    which widens the value operand staged through shared memory."""
    return _forced("NALASR_REDUCE_ZDOT", ("0", "1")) != "0"


def _reduce_rr(k: Tensor, v: Tensor, rope: bool, prec: str, offs64: bool, chunk: int) -> bool:
    """Whether the forward reduce runs :mod:`nalasr_kernels.nala_rr` (its products issued from registers, no shared
    memory) instead of _fwd_reduce: where its loads fit (nala_rr.usable: 16-bit k, v with unit-stride head dims,
    D = Dv = 16) and _fwd_reduce would take tf32 products with z from the same operands (ZDOT: no RoPE); int32
    offsets. NALASR_REDUCE_RR=0 keeps _fwd_reduce. On the H200 at 518K: 59.7 against 67.1 µs in the forward
    (benchmarks/results/h200/session18/call10/rr.json)."""
    if rope or prec != "tf32" or offs64 or not (_reduce_zacc() and _reduce_zdot()):
        return False
    return _forced("NALASR_REDUCE_RR", ("0", "1")) != "0" and nala_rr.usable(k, v, chunk)


# On the H200 at 518K dense (session 29 call 2, two rounds, each setting its own process): the pair map 48.0-48.5
# against 48.8-49.1 µs strided, the register reduce 50.8-51.3 against 51.2-51.4; the forward graph 0.103-0.104 ms
# with both against 0.105 (benchmarks/results/h200/session29/call2). The backward passes (session 30 call 1, the four
# settings twice): _bwd_key 98.9-100.0 µs strided against 154.1-159.4 contiguous (115.5 in session 29 call 2, before
# it took n_chunks), _bwd_query 149.3-150.4 against 153.4-155.4; the backward graph at 518K
# 0.246 / 0.248 ms with both against 0.301 / 0.303, at 1M 0.499 / 0.501 against 0.515 / 0.515. The one-head map
# (49K-262K) is a tie: 29.4 / 29.5 against 29.6 / 29.6 µs at 262K, its forward graph within 1% either way
# (benchmarks/results/h200/session30/call1); it stays contiguous.
_STRIDED = {"fwd_reduce": True, "fwd_map": False, "fwd_map_pair": True, "fwd_map_rr": True, "bwd_query": True,
            "bwd_query_rr": True, "bwd_key": True, "bwd_key_rr": True}


def _strided(name: str) -> bool:
    """Whether a pass (``name``: a key of _STRIDED; fwd_reduce is nala_rr's) runs tile-strided chunks: program pid_c takes
    the tiles pid_c, pid_c + n_chunks, pid_c + 2·n_chunks, … instead of one contiguous run of CHUNK tokens. The
    programs of a wave then read a narrow window of the token axis at any moment (a few MiB, as a copy kernel does)
    where contiguous chunks keep ~1,000 streams open across the whole 66 MiB of each tensor (DRAM pages, TLB). The
    partials sum other tokens in another order (still fixed: bitwise reproducible). NALASR_STRIDED_<PASS> = 0|1
    overrides _STRIDED (FWD_REDUCE, FWD_MAP, FWD_MAP_PAIR, FWD_MAP_RR, BWD_QUERY, BWD_KEY, BWD_KEY_RR)."""
    forced = _forced(f"NALASR_STRIDED_{name.upper()}", ("0", "1"))
    return _STRIDED[name] if forced is None else forced == "1"


def _reduce_zacc() -> bool:
    """Whether _fwd_reduce sums z in an elementwise accumulator (default) instead of taking it from a column of
    ones beside the values in the S product (NALASR_REDUCE_ZACC=0). The column doubles the product's width when Dv
    fills its tile (16 → 32 columns: twice the value operand staged through shared memory); on the H200 at 518K
    with one-warp programs 70.9 against 81.9 µs (benchmarks/results/h200/session13/call1/sweep_r1.json). For tf32
    products only (with RoPE z never comes out of the S product): a tf32x3 product splits each float32 operand in
    two halves, and only the column sums z from exactly what S multiplied."""
    return _forced("NALASR_REDUCE_ZACC", ("0", "1")) != "0"


def _eye(name: str, *tensors: Tensor) -> bool:
    """Whether a backward pass (``name``: bwd_query, bwd_key) takes its 16-bit tiles to float32 as t·I on the
    tensor cores (see _upcast; default, NALASR_EYE_BWD_QUERY / NALASR_EYE_BWD_KEY=0 for a plain conversion).
    Offline sm_90 (Triton 3.6, benchmarks/compile_sm90.py): _bwd_query 861 → 731 instructions, 18 → 5 barriers a
    warp and tile, 255 → 223 registers; _bwd_key 522 → 495, 14 → 4. On the H200 at 518K: _bwd_query 280.6 →
    207.6 µs (its best config, 16 tokens on one warp, 292.0 without), _bwd_key 163.3 → 131.6 (the k tile alone:
    140.6; benchmarks/results/h200/session14/call2/sweep_{q,k}.json). Not in the forward kernels: _fwd_map took
    73.0 against 63.5 µs (wgmma's A operand then converts by shuffles, 270 → 334 instructions), _fwd_reduce
    72.5 (k) / 79.7 (k and v) against 70.2 (sweep_{m,r}.json); _fwd_map with its float16 product, where φ̃q then
    is the A operand in registers without any conversion (offline 5 → 3 barriers, 69 → 51 registers): 63.8
    against 58.8 µs (64 tokens, 2 warps), 64.9 against 61.8 (4 warps; session16/call4/sweep_m_eye.json, branch
    eye-map). Float32 tiles never: the product would be tf32."""
    forced = _forced(f"NALASR_EYE_{name.upper()}", ("0", "1"))
    return forced != "0" and _all_16bit(*tensors)


def _bwd_dzacc() -> bool:
    """Whether _bwd_query sums dz = Σ dden·φq in elementwise (BLOCK_N, BD) accumulators, reduced over the tokens once
    after the loop (default; NALASR_BWD_DZACC=0 for the tensor cores), as _fwd_reduce sums z, instead of through
    two products a tile with dden in column 0 of a (BLOCK_N, 16) operand. The terms are float32, not tf32. On the
    H200 at 518K: 206.2 → 192.3 µs alone, 181.4 → 169.9 with _bwd_mpow (benchmarks/results/h200/session16/call2/
    sweep_q_dz{,m}.json), though offline it takes 223 against 205 registers and stages φq through shared memory for
    the dS product (Triton's choice once φq feeds one product instead of two)."""
    return _forced("NALASR_BWD_DZACC", ("0", "1")) != "0"


def _bwd_mpow(approx: bool, lam: float, tau: float) -> bool:
    """Whether _bwd_query forms m/dir (for ∂m/∂dir = p·m/dir) as sign(dir)·|dir|^(p−1) with one exp2, and m as that
    times |dir| (default for 16-bit inputs, APPROX, where p > 1 everywhere: λτ > 1, as p ≥ λτ; NALASR_BWD_MPOW=0 for
    m = |dir|^p and a division an element): one MUFU operation, a select and a dependent division an element fewer.
    On the H200 at 518K: 206.2 → 181.4 µs (benchmarks/results/h200/session16/call2/sweep_q_dz{,m}.json). Since session
    22 without selects (see _query_mag; the sign by a bit operation; offline sm_90 658 → 626 instructions a warp-tile):
    164.7-165.2 → 161.0-161.5 µs (benchmarks/results/h200/session22/call2, measured with the selects' replacement of
    then, which took dir = 0 as 2^-126 instead of 0; the same instructions). Float32 inputs keep the division: m's
    rounding changes by a few ulps, and their N = 1 gradient case sits near its tolerance (see _sincos_angle)."""
    return approx and lam * tau > 1.0 and _forced("NALASR_BWD_MPOW", ("0", "1")) != "0"


def _bwd_f16(centre: bool, *tensors: Tensor) -> bool:
    """Whether the backward's products of the gradient take float16 operands instead of tf32 (default for float16
    inputs where they would be tf32, i.e. centred, no RoPE; NALASR_BWD_F16=0 keeps tf32), as _fwd_map's does
    (_map_f16): S, dS scaled into range by a power of two (_f16_state), and operands that fit float16 by construction:
    _bwd_query's S·dnum as g (the 16-bit upstream gradient, exact) times S, 1/den after the product; _bwd_key's
    φ̃k/‖k‖^λ (in [−1, 1]; λ an integer 1-4) and (v − v̄)/2 against dS. float16 keeps 11 significant bits rounded to
    nearest where tf32 keeps 11 truncated: in the interpreter (the GPU's tf32 truncation) fp16-large-values' dq, dk
    error 7.5e-4, 1.2e-3 → 4.0e-4, 6.3e-4 against the float64 reference. Above all, a float16 operand in the product's
    accumulator layout is the next product's operand as it stands: tf32 operands converted by shuffles and selects
    (_bwd_key: 24 SHFL.IDX and 48 FSEL a warp-tile; offline sm_90 445 → 411 instructions, _bwd_query 626 → 613). On
    the H200 at 518K, off / on twice: _bwd_query 161.4 → 153.7-153.9 µs, _bwd_key 129.6-130.1 → 116.4-117.5, the
    backward 0.286-0.287 → 0.272 ms, at 1M 0.562-0.563 → 0.535-0.538 (benchmarks/results/h200/session22/call4).
    bfloat16 keeps tf32: its g and v need not fit float16."""
    return (centre and all(t.dtype == torch.float16 for t in tensors)
            and _forced("NALASR_BWD_F16", ("0", "1")) != "0")


def _map_f16(prec: str, rope: bool) -> bool:
    """Whether _fwd_map's product takes float16 operands instead of tf32 (default where it would be tf32 and without
    RoPE; NALASR_MAP_F16=0 keeps tf32). φ̃q = |dir|^p·cos/sin lies in [−1, 1]; S is scaled by a power
    of two (_f16_state). float16 keeps 11 significant bits rounded to nearest where tf32 keeps 11 truncated
    (_tf32), and the product is half the tensor-core steps and half the operand bytes through shared memory. On
    the H200 at 518K: 64.0 → 59.2 µs without scaling S (benchmarks/results/h200/session15/call4/sweep_m16.json).
    The backward keeps tf32: it recomputes φq itself and never sees this product's rounding."""
    return prec == "tf32" and not rope and _forced("NALASR_MAP_F16", ("0", "1")) != "0"


def _map_half2(q: Tensor, f16: bool, fastmag: bool, alpha: float) -> bool:
    """Whether _fwd_map forms φq in float16 pairs (HALF2, nalasr_kernels.half2; default where it applies,
    NALASR_MAP_HALF2=0 keeps float32): float16 queries, the float16 product (F16), m_q from xa (FASTMAG) and
    |α| ≤ 1, where |xa| ≤ 1 is the domain of half2's angle polynomials (F, G replace tanh and the sine and cosine).
    Offline sm_90 at 518K: 439 → 347 loop instructions a warp-tile, 54 → 40 MUFU operations and 79 → 66 registers
    (den from two more float16 products, see half2._den_h2, and 1/den by rcp.approx; the GPU ran 343, before the
    four FMNMX that keep a subnormal den, possible only for ε < 2^-61, out of rcp's flush to zero). On the H200 the
    map's kernel took 53.4 against 54.0 µs (NALASR_MAP_HALF2=0) at its old 36 programs an SM, 51.1-52.2 at its own
    28 (see _PROGRAMS_PER_SM), and with both against the previous head (three A/B rounds in one process): at 518K
    the forward 0.111 ms against 0.111-0.112, at 1M 0.211-0.212 against 0.212-0.214
    (benchmarks/results/h200/session25/call4).
    So the map does not wait on its instructions: a fifth fewer bought 1-2%. Output error at 518K against float64:
    3.90e-4 against 3.81e-4 with float32 features (fp16 case of gpu_kernels_check.py; the two apart by 3.9e-4).
    The backward recomputes φq in float32 (_bwd_query) and does not change."""
    return (q.dtype == torch.float16 and f16 and fastmag and abs(alpha) <= 1.0
            and _forced("NALASR_MAP_HALF2", ("0", "1")) != "0")


def _map_pair(q: Tensor, half: bool, h: int, d: int, dv: int, bd: int) -> bool:
    """Whether the map takes two heads a program (_fwd_map_pair): HALF2, an even head count, D = DV = BD, q's token
    rows holding exactly its H·D elements (the model's own q: its four C-wide products make q, k, v separate contiguous
    tensors) and at least _PAIR_MIN_ROWS (token, head pair) rows. NALASR_MAP_PAIR=0 turns it off, =1 takes it for any
    size and q layout where the kernel applies.
    On the H200 at 518K with dense q, k, v (benchmarks/results/h200/session26): the map 49.3-50.2 µs (calls 1-3)
    against 51.3 for the one-head map (call 1); the forward against the previous head, 5 A/B rounds in one process
    over two calls, 2,507-2,537 GB/s against 2,501-2,517 (59.1-59.8% of the 4,243 GB/s copy), and at 1M 2,713-2,736
    against 2,629-2,649. Below that size its one-warp programs, whose chunks the plan keeps at 256 tokens or more,
    are too few to fill the SMs and each runs 8 or more tiles in series: the table's forward graph took 0.037 /
    0.040 / 0.050 / 0.065 ms at 4K / 49K / 131K / 262K tokens with it, against 0.022 / 0.025 / 0.043 / 0.067 on the
    strided views with the one-head map (call 4)."""
    forced = _forced("NALASR_MAP_PAIR", ("0", "1"))
    if forced == "0" or not (half and h % 2 == 0 and d == dv == bd):
        return False
    if forced == "1":
        return True
    dense = q.stride(3) == 1 and q.stride(2) == d and q.stride(1) == h * d
    return dense and q.shape[0] * q.shape[1] * (h // 2) >= _PAIR_MIN_ROWS


def _map_rr(q: Tensor, o: Tensor, half: bool) -> bool:
    """Whether the map issues its products from registers (nalasr_kernels.nala_map_rr): HALF2's features (float16 q),
    16 head dims, an even head count, q's strides multiples of 4 (nala_map_rr.usable), from _MAP_RR_MIN_ROWS (token,
    head pair) rows; NALASR_MAP_RR=1 takes it for any size, =0 keeps the pair map / the one-head map. On the H200 (each setting its own process, benchmarks/results/h200/session31/call3):
    at 518K dense the map 45.7-45.8 against the pair map's 48.4-48.6 µs, the forward 0.100 against 0.102 ms; on the
    model's views (where the pair map does not apply) 47.8 against the one-head map's 52.0 (call 2), the forward
    0.103 against 0.104; at 1M 0.183 either way. Call 2 ran the version with two 4-byte stores a
    token (75 µs at 518K); this one at 49K and 262K: see _MAP_RR_MIN_ROWS."""
    forced = _forced("NALASR_MAP_RR", ("0", "1"))
    if forced == "0" or not (half and nala_map_rr.usable(q, o)) or _offs64(q.shape[1], q, o):  # int32 word offsets
        return False
    return forced == "1" or q.shape[0] * q.shape[1] * (q.shape[2] // 2) >= _MAP_RR_MIN_ROWS


def _bwd_key_rr(k: Tensor, v: Tensor, dk: Tensor, dv: Tensor, f16: bool, clamp: bool, rope: bool) -> bool:
    """Whether the backward's key pass issues its products from registers (nalasr_kernels.nala_bwd_key_rr; default,
    NALASR_BWD_KEY_RR=0 keeps _bwd_key): _bwd_key's float16 products (F16: centred, an integer λ), float16 k, v of 16
    dims (nala_bwd_key_rr.usable), no RoPE, no clamp, int32 offsets. On the H200 at 518K dense, each setting its own
    process twice: the pass 89.6-97.5 against 99.4-99.6 µs, the backward 0.245 either way, at 1M 0.474-0.475 against
    0.480-0.482 ms; at 12 or 8 programs an SM 95.5 / 130.1 µs (benchmarks/results/h200/session32/call1). With the
    register query pass (call 2): the backward 0.226-0.227 against 0.229 ms at 518K, 0.440-0.442 against 0.448 at 1M."""
    if _forced("NALASR_BWD_KEY_RR", ("0", "1")) == "0":
        return False
    return (f16 and not clamp and not rope and nala_bwd_key_rr.usable(k, v, dk, dv)
            and not _offs64(k.shape[1], k, v, dk, dv))


# nala_bwd_query_rr's register cap (NALASR_BWD_QUERY_RR_MAXNREG, 0 for none): uncapped it holds 213 registers (8
# one-warp programs an SM), at 168 (offline sm_90: 16 B of stack, 629 against 617 loop instructions) 3 warps fit a
# scheduler's 16K registers, 12 an SM. On the H200 at 518K: 132.1 µs capped at 12 an SM against 153.9-154.6 uncapped
# at 8 (and _bwd_query's 150.1-152.0), at 152 for 13 an SM 202.8 (a second wave: a scheduler still holds 3), at 128
# for 16 178.8 (192 B of stack) (benchmarks/results/h200/session32/call1).
_BWD_QUERY_RR_MAXNREG = int(os.environ.get("NALASR_BWD_QUERY_RR_MAXNREG", "168")) or None


def _bwd_query_rr(q: Tensor, do: Tensor, dq: Tensor, f16: bool, mpow: bool, clamp: bool, rope: bool) -> bool:
    """Whether the backward's query pass issues its products from registers (nalasr_kernels.nala_bwd_query_rr;
    default, NALASR_BWD_QUERY_RR=0 keeps _bwd_query): _bwd_query's float16 products (F16: centred) with MPOW (16-bit
    inputs, λτ > 1), float16 q and ∂L/∂o of 16 dims (nala_bwd_query_rr.usable), no RoPE, no clamp, int32 offsets. On
    the H200 at 518K dense (session 32 call 1): the pass 132.1 µs against _bwd_query's 150.1-152.0 (at 168 registers,
    12 an SM: see _BWD_QUERY_RR_MAXNREG), the backward 0.226 against 0.245-0.246 ms, at 1M 0.448 against 0.480-0.482;
    call 2, both register passes: 0.226-0.227 / 0.440-0.442 against 0.248 / 0.482 with neither."""
    if _forced("NALASR_BWD_QUERY_RR", ("0", "1")) == "0":
        return False
    return (f16 and mpow and not clamp and not rope and nala_bwd_query_rr.usable(q, do, dq)
            and not _offs64(q.shape[1], q, do, dq))


def _centred(rope: bool, prec_g: str) -> bool:
    """Whether the backward centres the values (see "Conditioning of the backward"): tf32 products without RoPE.
    Centring float32 inputs too (tf32x3) took the N = 1 float32 case from 1.56 to 1.44 times its dq/dk tolerance
    on the H200 but not under it, and changes every float32 gradient's rounding: not done
    (benchmarks/centre_errors.py, benchmarks/results/h200/session13/call4/s13d.log)."""
    return not rope and prec_g == "tf32"


def _lam_int(lam: float) -> int:
    return int(lam) if lam in (1.0, 2.0, 3.0, 4.0) else 0


def _dims(q: Tensor, v: Tensor) -> tuple[int, int, int, int, int, int, int]:
    b, n, h, d = q.shape
    dv = v.shape[-1]
    bd, bdv = max(16, _pow2(d)), max(16, _pow2(dv))  # tl.dot needs ≥ 16 along every axis
    return b, n, h, d, dv, bd, bdv


def _offs64(n: int, *tensors: Tensor) -> bool:
    """True when a token/dim offset inside one (b, h) slab of any tensor could exceed int32."""
    if _CONFIG is not None and _CONFIG.get("OFFS64"):  # tests: exercise the 64-bit path at small sizes
        return True
    return any((n - 1) * abs(t.stride(1)) + (t.shape[-1] - 1) * abs(t.stride(3)) >= 2**31 - 1 for t in tensors)


def _state_size(bd: int, bdv: int) -> int:
    return 2 * bd * bdv + 2 * bd


def _device_guard(t: Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else _NullCtx()


class _NullCtx:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _combine_launch(part: Tensor, out: Tensor, bh: int, n_chunks: int, scale: float, state: int,
                    pdl: bool = False) -> None:
    # Narrow column blocks, many chunks a load: at 518K tokens with 4-warp reduce programs (4 heads, 254 chunks,
    # 544 floats a state) 68 programs each loading their whole (254, 32) slice at once took 7.1 µs on the H200
    # (128-column blocks, 32 chunks a load: 11.1). One-warp reduce programs leave 4 times the chunks (1,013 at
    # 518K): 68 such programs took 23 µs (session 13), so the blocks narrow (to 8 columns, one 32-byte sector of
    # a chunk's row) until there are 2 programs an SM, each loading up to 8,192 partial sums at once.
    block = next((b for b in (32, 16) if bh * triton.cdiv(state, b) >= 2 * _sms(part.device)), 8)
    cb = min(_pow2(n_chunks), 8192 // block)
    _combine[(bh, triton.cdiv(state, block))](part, out, n_chunks, scale, STATE=state, BLOCK=block, CB=cb,
                                                PDL=pdl, num_warps=4, **_pdl_kw(pdl))


def nala_forward(q: Tensor, k: Tensor, v: Tensor, lam: float, tau: float, alpha: float, eps: float,
                 rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor]:
    """o (B, N, H, Dv) contiguous in q's dtype, and the float32 state (B, H, 2·BD·BDV + 2·BD) = (S, z)."""
    b, n, h, d, dv, bd, bdv = _dims(q, v)
    state_n = _state_size(bd, bdv)
    rope = rope_h > 0
    dev = q.device
    o = _empty((b, n, h, dv), q.dtype, dev)
    state = _empty((b, h, state_n), torch.float32, dev)
    prec, approx = _precision(q, k, v), _approx_math(q, k, v, rope=rope)
    freq = _rope_freq(d, bd, float(rope_base), dev) if rope else state
    bucket = _pow2(b * n * h)
    zacc = rope or (_reduce_zacc() and prec == "tf32")
    clamp = _clamp(alpha)
    pdl = _pdl(dev)
    with _device_guard(q):
        offs64 = _offs64(n, k, v)
        chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["fwd_reduce"],
                                nala_rr.TILE_TOKENS, _FWD_REDUCE_MIN_CHUNK)
        rr = _reduce_rr(k, v, rope, prec, offs64, chunk)
        if not rr:
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["fwd_reduce"], _MAX_BLOCK_N,
                                    _FWD_REDUCE_MIN_CHUNK)
        part = _empty((b * h * n_chunks * state_n,), torch.float32, dev)
        if rr:
            feat_a = _forced("NALASR_RR_FEAT_A", ("0", "1"))  # unset: nala_rr.FEAT_A
            nala_rr.launch(k, v, part, n, chunk, n_chunks, alpha, lam, _lam_int(lam), approx, clamp, pdl=pdl,
                           strided=_strided("fwd_reduce"), feat_a=None if feat_a is None else feat_a == "1")
        else:
            _launch(_fwd_reduce_tuned, _fwd_reduce, (h, n_chunks, b),
                    k, v, freq, part, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                    *k.stride(), *v.stride(), float(alpha), float(lam),
                    D=d, DV=dv, BD=bd, BDV=bdv, BDZ=bdv if zacc or dv < bdv else 2 * bdv, LAM_INT=_lam_int(lam),
                    ROPE=rope, PREC=prec, APPROX=approx, OFFS64=offs64, VEC4=_reduce_vec4(), ZACC=zacc,
                    CLAMP=clamp, ZDOT=zacc and not rope and _reduce_zdot(), PDL=pdl)  # ZACC without RoPE: tf32
        _combine_launch(part, state, b * h, n_chunks, 1.0 / n, state_n, pdl)
        fastmag, f16 = _fastmag(approx, lam, tau, alpha), _map_f16(prec, rope)
        half = _map_half2(q, f16, fastmag, alpha)
        if _map_rr(q, o, half):
            chunk, n_chunks = _plan(n, b * h // 2, dev, _PROGRAMS_PER_SM["fwd_map_rr"], nala_map_rr.TILE_TOKENS,
                                    _FWD_MAP_RR_MIN_CHUNK)
            nala_map_rr.launch(q, state, o, n, chunk, n_chunks, alpha, lam, tau, eps, approx, pdl=pdl,
                               strided=_strided("fwd_map_rr"))
        elif _map_pair(q, half, h, d, dv, bd):
            block_n, warps, stages, cap = (int(_CONFIG["BLOCK_N"]), 1, 3, None) if _CONFIG is not None else _PAIR_TILE
            chunk, n_chunks = _plan(n, b * h // 2, dev, _PROGRAMS_PER_SM["fwd_map_pair"], _FWD_MAP_PAIR_QUANTUM,
                                    _FWD_MAP_PAIR_MIN_CHUNK)
            _fwd_map_pair[(h // 2, n_chunks, b)](
                q, state, o, n, h, chunk, n_chunks, *q.stride(), o.stride(0), o.stride(1),
                float(alpha), float(lam), float(tau), float(eps), BD=bd, APPROX=approx, OFFS64=_offs64(n, q, o),
                BLOCK_N=block_n, PDL=pdl, STRIDED=_strided("fwd_map_pair"), num_warps=warps, num_stages=stages,
                **_pdl_kw(pdl),
                **({"maxnreg": cap} if cap and not _INTERPRET else {}))
        else:
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["fwd_map_half2" if half else "fwd_map"],
                                    _FWD_MAP_QUANTUM, _FWD_MAP_MIN_CHUNK)
            _launch(_fwd_map_tuned, _fwd_map, (h, n_chunks, b),
                    q, state, freq, o, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                    *q.stride(), *o.stride(), float(alpha), float(lam), float(tau), float(eps),
                    D=d, DV=dv, BD=bd, BDV=bdv, ROPE=rope, PREC=prec, APPROX=approx, OFFS64=_offs64(n, q, o),
                    FASTMAG=fastmag, F16=f16, CLAMP=clamp, PDL=pdl, HALF2=half, STRIDED=_strided("fwd_map"),
                    **_pdl_kw(pdl))
    return o, state


def nala_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, state: Tensor, lam: float, tau: float, alpha: float,
                  eps: float, rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv (contiguous, in the dtypes of q, k, v) from dO = ∂L/∂o and the forward's state."""
    b, n, h, d, dv, bd, bdv = _dims(q, v)
    state_n = _state_size(bd, bdv)
    rope = rope_h > 0
    dev = q.device
    dq = _empty(q.shape, q.dtype, dev)
    dk = _empty(k.shape, k.dtype, dev)
    dvv = _empty(v.shape, v.dtype, dev)
    dstate = _empty((b, h, state_n), torch.float32, dev)
    prec, prec_g = _precision(q, k, v), _precision(q, k, v, grad=rope)
    centre = _centred(rope, prec_g)
    approx = _approx_math(q, k, v, rope=rope)
    clamp = _clamp(alpha)
    freq = _rope_freq(d, bd, float(rope_base), dev) if rope else state
    bucket = _pow2(b * n * h)
    pdl = _pdl(dev)
    with _device_guard(q):
        mpow, query_f16 = _bwd_mpow(approx, lam, tau), _bwd_f16(centre, q, do)
        if _bwd_query_rr(q, do, dq, query_f16, mpow, clamp, rope):
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["bwd_query_rr"], nala_bwd_query_rr.TILE_TOKENS)
            part = _empty((b * h * n_chunks * state_n,), torch.float32, dev)
            nala_bwd_query_rr.launch(q, do, state, dq, part, n, chunk, n_chunks, alpha, lam, tau, eps, approx,
                                     pdl=pdl, strided=_strided("bwd_query_rr"), maxnreg=_BWD_QUERY_RR_MAXNREG)
        else:
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["bwd_query"], _BWD_QUERY_QUANTUM)
            part = _empty((b * h * n_chunks * state_n,), torch.float32, dev)
            _launch(_bwd_query_tuned, _bwd_query, (h, n_chunks, b),
                    q, do, state, freq, dq, part, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                    *q.stride(), *do.stride(), *dq.stride(), float(alpha), float(lam), float(tau), float(eps),
                    D=d, DV=dv, BD=bd, BDV=bdv, ROPE=rope, PREC_G=prec_g, CENTRE=centre, APPROX=approx,
                    OFFS64=_offs64(n, q, do, dq), SPLIT=int(_reduce_split()),
                    EYE=_eye("bwd_query", q, do), DZACC=_bwd_dzacc(), MPOW=mpow, CLAMP=clamp,
                    PDL=pdl, F16=query_f16, STRIDED=_strided("bwd_query"))
        _combine_launch(part, dstate, b * h, n_chunks, 1.0 / n, state_n, pdl)
        key_f16 = _bwd_f16(centre, k, v) and _lam_int(lam) > 0
        if _bwd_key_rr(k, v, dk, dvv, key_f16, clamp, rope):
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["bwd_key_rr"], nala_bwd_key_rr.TILE_TOKENS)
            nala_bwd_key_rr.launch(k, v, state, dstate, dk, dvv, n, chunk, n_chunks, alpha, lam, _lam_int(lam), approx,
                                   pdl=pdl, strided=_strided("bwd_key_rr"))
        else:
            chunk, n_chunks = _plan(n, b * h, dev, _PROGRAMS_PER_SM["bwd_key"], _BWD_KEY_QUANTUM)
            _launch(_bwd_key_tuned, _bwd_key, (h, n_chunks, b),
                    k, v, state, dstate, freq, dk, dvv, n, max(rope_w, 1), h, chunk, n_chunks, bucket,
                    *k.stride(), *v.stride(), *dk.stride(), *dvv.stride(), float(alpha), float(lam),
                    D=d, DV=dv, BD=bd, BDV=bdv, LAM_INT=_lam_int(lam), ROPE=rope, PREC=prec, PREC_G=prec_g,
                    CENTRE=centre, APPROX=approx, OFFS64=_offs64(n, k, v, dk, dvv),
                    EYE=_eye("bwd_key", k, v), CLAMP=clamp, PDL=pdl,
                    F16=key_f16, STRIDED=_strided("bwd_key"), **_pdl_kw(pdl))
    return dq, dk, dvv


# ============================================================================================ torch binding
# Custom ops make the kernels opaque to torch.compile (no graph break around the Triton launches, and the
# fake implementations give shapes without running anything); the autograd.Function ties them together.


@torch.library.custom_op("nalasr_kernels::nala_fwd", mutates_args=())
def _nala_fwd_op(q: Tensor, k: Tensor, v: Tensor, lam: float, tau: float, alpha: float, eps: float,
                 rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor]:
    return nala_forward(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base)


@_nala_fwd_op.register_fake
def _(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
    b, n, h, d, dv, bd, bdv = _dims(q, v)
    return q.new_empty((b, n, h, dv)), q.new_empty((b, h, _state_size(bd, bdv)), dtype=torch.float32)


@torch.library.custom_op("nalasr_kernels::nala_bwd", mutates_args=())
def _nala_bwd_op(do: Tensor, q: Tensor, k: Tensor, v: Tensor, state: Tensor, lam: float, tau: float, alpha: float,
                 eps: float, rope_h: int, rope_w: int, rope_base: float) -> tuple[Tensor, Tensor, Tensor]:
    return nala_backward(do, q, k, v, state, lam, tau, alpha, eps, rope_h, rope_w, rope_base)


@_nala_bwd_op.register_fake
def _(do, q, k, v, state, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))


def _traced(*tensors: Tensor) -> bool:
    """True under torch.compile / export / any tracing dispatch mode: go through the custom op there. Plain
    eager calls skip the custom-op dispatcher, which costs ~10-15 µs a call (felt at small token counts)."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0:
        return True
    return any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors)


class NalaAttentionFunction(torch.autograd.Function):
    """o = NaLa(q, k, v); backward gives dq, dk, dv (the hyper-parameters are constants, not learnable)."""

    @staticmethod
    def forward(ctx, q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base):
        fwd = _nala_fwd_op if _traced(q, k, v) else nala_forward
        o, state = fwd(q, k, v, lam, tau, alpha, eps, rope_h, rope_w, rope_base)
        ctx.save_for_backward(q, k, v, state)
        ctx.hyper = (lam, tau, alpha, eps, rope_h, rope_w, rope_base)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, state = ctx.saved_tensors
        bwd = _nala_bwd_op if _traced(do, q, k, v) else nala_backward
        dq, dk, dv = bwd(do, q, k, v, state, *ctx.hyper)
        return dq, dk, dv, None, None, None, None, None, None, None


_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def nala_attention_triton(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    params: Any = None,
    rope_hw: tuple[int, int] | None = None,
    rope_base: float = 100.0,
) -> Tensor:
    """Fused NaLa attention, same contract as ``nalasr.ops.nala.nala_attention_reference``.

    Args:
        q, k: (B, N, H, D); v: (B, N, H, Dv); fp16/bf16/fp32, any strides (strided views of one Linear output
            are read in place, never copied). 1 ≤ D, Dv ≤ 64 (tested 16–64).
        params: any object with float attributes lam, tau, alpha, eps; None for the defaults (3, 0.5, 1, 1e-6).
        rope_hw: (rows, cols) of the token grid, rows·cols = N, for 2-D RoPE on the numerator; None for none.
    Returns:
        o: (B, N, H, Dv), contiguous, in q's dtype. Differentiable in q, k, v.
    """
    if q.dim() != 4 or q.shape != k.shape or q.shape[:3] != v.shape[:3]:
        raise ValueError(f"q, k, v must be (B, N, H, D) alike, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} is {t.dtype}; the kernel takes float16, bfloat16 or float32")
    if not (1 <= q.shape[-1] <= 64 and 1 <= v.shape[-1] <= 64):
        raise ValueError(f"head dims must be in 1..64, got D={q.shape[-1]}, Dv={v.shape[-1]}")
    hp = {name: float(getattr(params, name, default)) if params is not None else default
          for name, default in _DEFAULTS.items()}
    n = q.shape[1]
    if rope_hw is not None:
        rh, rw = int(rope_hw[0]), int(rope_hw[1])
        if rh * rw != n or rh < 1:
            raise ValueError(f"rope_hw {tuple(rope_hw)} has {rh * rw} positions but there are {n} tokens")
    else:
        rh = rw = 0
    if q.numel() == 0 or v.numel() == 0:  # nothing to attend over / to: an empty or zero result, no launch
        return q.new_zeros(v.shape, dtype=q.dtype) + 0 * (q.sum() + k.sum() + v.sum()).to(q.dtype)
    return NalaAttentionFunction.apply(q, k, v, hp["lam"], hp["tau"], hp["alpha"], hp["eps"], rh, rw,
                                       float(rope_base))
