"""The attention's launch plan: which pass, variant and launch shape runs for given tensors, chosen by rule.

``forward_plan(q, k, v, ...)`` and ``backward_plan(q, k, v, do, ...)`` return frozen dataclasses
(:class:`ForwardPlan`, :class:`BackwardPlan`) that :mod:`nalasr_kernels.nala.binding` executes as they say. Every
choice is a rule over dtypes, head dims, strides, sizes and the device, none a setting of the process. The
rules and the measurements behind them are in docs/kernels.md. In short, for the model's float16 heads of 16 dims
without RoPE every pass issues its mma from registers (the register passes ``fwd_reduce_rr``, ``fwd_map_rr`` from
``MAP_RR_MIN_ROWS`` (token, head pair) rows, ``bwd_query_rr``, ``bwd_key_rr``); elsewhere (bfloat16, float32, other
head dims, RoPE, θ's clamp, 64-bit offsets) the tl.dot passes run (``fwd_reduce``, ``fwd_map`` / ``fwd_map_pair``,
``bwd_query``, ``bwd_key``), each with the launch config (BLOCK_N, warps, stages) of :mod:`.configs`' table for its
products, head width and token-count bucket (``Launch.config``: one config a shape, nothing benchmarked), and with
compile-time options that follow the inputs (precision, approximate math, HALF2, F16, EYE, MPOW, centring).

Test hooks (public, module attributes, None in normal use): ``TEST_CONFIG`` a fixed launch config {"BLOCK_N": ..,
"CHUNK": .., "num_warps": .., optional "num_stages": .., "OFFS64": True} for the tl.dot passes instead of the table
(tiny chunks give several chunks and ragged tails at small N); ``OUT_FILL`` a value every buffer the kernels must write
is filled with before launching (NaN in the tests: an unwritten element cannot pass).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from . import bwd_key_rr, bwd_query_rr, configs, fwd_map_rr, fwd_reduce_rr
from .configs import LaunchConfig
from .device import HAS_GDC, INTERPRET

__all__ = ["BackwardPlan", "ForwardPlan", "Launch", "LaunchConfig", "backward_plan", "chunks", "dot_config",
           "forward_plan", "n_bucket"]

TEST_CONFIG: dict | None = None
OUT_FILL: float | None = None

# ============================================================================================ launch constants
# Programs per SM and pass: several waves balance the load and keep enough loads in flight to hide HBM latency; the
# passes that reduce (fwd_reduce, bwd_query) pay for more programs with partial buffers (one state per chunk).
PROGRAMS_PER_SM = {
    "fwd_reduce": 16,     # one-warp programs at 128 registers: 16 fill an SM, one wave (and half the partials of 32)
    "fwd_reduce_rr": 16,  # the register reduce shares the reduce's plan
    "fwd_map": 36,        # 2-warp programs, 12 fit an SM: 36 is 2.92 waves on 64-token quanta
    "fwd_map_half2": 28,  # fwd_map with HALF2 (66 registers, 14 an SM): two whole waves
    "fwd_map_pair": 16,   # one-warp programs at 118 registers: one wave
    "fwd_map_rr": 16,
    "bwd_query": 8,
    "bwd_query_rr": 12,   # its 168-register cap fits 3 warps a scheduler
    "bwd_key": 8,         # 4 programs an SM: two full waves
    "bwd_key_rr": 16,     # 124 registers
}
MAX_BLOCK_N = 256  # the reduce's chunks are multiples of this, so every config of configs.TUNING_SPACE tiles one
# Chunk quanta (a finer one fills the last wave more closely) and smallest chunks (fewer partials at small N).
QUANTUM = {"fwd_reduce": MAX_BLOCK_N, "fwd_reduce_rr": fwd_reduce_rr.TILE_TOKENS, "fwd_map": 64,
           "fwd_map_half2": 64, "fwd_map_pair": 32, "fwd_map_rr": fwd_map_rr.TILE_TOKENS, "bwd_query": 64,
           "bwd_query_rr": bwd_query_rr.TILE_TOKENS, "bwd_key": 64, "bwd_key_rr": bwd_key_rr.TILE_TOKENS}
MIN_CHUNK = {"fwd_reduce": 128, "fwd_reduce_rr": 128, "fwd_map": 128, "fwd_map_half2": 128,
             "fwd_map_pair": MAX_BLOCK_N, "fwd_map_rr": 128, "bwd_query": MAX_BLOCK_N,
             "bwd_query_rr": MAX_BLOCK_N, "bwd_key": MAX_BLOCK_N, "bwd_key_rr": MAX_BLOCK_N}
# Tile-strided chunks (program c takes tiles c, c + n_chunks, …): a wave reads a narrow window of the token axis
# instead of ~1,000 streams across each tensor. Faster in every pass but the one-head map (a tie: contiguous).
STRIDED = {"fwd_reduce": False, "fwd_reduce_rr": True, "fwd_map": False, "fwd_map_half2": False,
           "fwd_map_pair": True, "fwd_map_rr": True, "bwd_query": True, "bwd_query_rr": True, "bwd_key": True,
           "bwd_key_rr": True}
PAIR_TILE = LaunchConfig(32, 1, 3)  # fwd_map_pair's tokens a tile, warps, stages (no cap: ptxas's 118 regs, 16 an SM)
PAIR_MIN_ROWS = 800_000  # (token, head pair) rows from which the pair map runs on dense q (400K tokens of 4 heads)
MAP_RR_MIN_ROWS = 98_304  # (token, head pair) rows from which the register map runs (49K tokens of 4 heads)
BWD_QUERY_RR_MAXNREG = 168  # 3 warps a scheduler, 12 programs an SM (uncapped: 213 registers, 8 an SM)
CLAMP_FREE = 4.0  # θ's clamp at ±Θ cannot bind for |α| ≤ 4 (tanh(4)·(1 + 2^-11) < Θ/(π/4)): left out there
FASTMAG_ALPHA = (2.0**-20, 2.0**20)  # |α| where xa = α·dir keeps |dir|^p (see device.query_mag_fwd)


@dataclass(frozen=True)
class Launch:
    """One pass: its kernel variant (a key of PROGRAMS_PER_SM), tokens per program and number of chunks, whether its
    chunks are tile-strided, and the launch config of a tl.dot pass or the pair map (None for the register passes,
    whose tiles their modules fix)."""

    variant: str
    chunk: int
    n_chunks: int
    strided: bool
    config: LaunchConfig | None = None


@dataclass(frozen=True)
class ForwardPlan:
    """The forward's passes (reduce → combine → map) and their compile-time options."""

    reduce: Launch
    map: Launch
    prec: str          # tl.dot precision of the tl.dot passes: tf32 (16-bit inputs) or tf32x3 (float32)
    approx: bool       # tanh.approx and short sin/cos polynomials: 16-bit inputs without RoPE
    clamp: bool        # θ's clamp (|α| > CLAMP_FREE)
    pdl: bool          # programmatic dependent launch between the passes (sm_90+)
    zacc: bool         # fwd_reduce: z in an elementwise accumulator (tf32 products or RoPE) or a ones column
    zdot: bool         # fwd_reduce: z from a product of φk with ones (ZACC without RoPE)
    fastmag: bool      # the map's m_q from xa (see device.query_mag_fwd)
    f16: bool          # the map's product in float16 operands (where it would be tf32, no RoPE)
    half2: bool        # φq in float16 pairs (half2.py): float16 q, F16, FASTMAG, |α| ≤ 1


@dataclass(frozen=True)
class BackwardPlan:
    """The backward's passes (query → combine → key) and their compile-time options."""

    query: Launch
    key: Launch
    prec: str
    prec_g: str        # precision of the products feeding dq, dk: tf32x3 with RoPE, else prec
    centre: bool       # values centred on v̄ (tf32 products without RoPE)
    approx: bool
    clamp: bool
    pdl: bool
    mpow: bool         # m/dir as sign(dir)·|dir|^(p−1) (APPROX, λτ > 1)
    query_f16: bool    # bwd_query's gradient products in float16 (float16 q and ∂L/∂o, centred)
    key_f16: bool      # bwd_key's likewise (float16 k, v, centred, an integer λ)
    eye_query: bool    # bwd_query's 16-bit tiles to float32 as t·I on the tensor cores
    eye_key: bool


# ==================================================================================================== rules


def pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@functools.lru_cache(maxsize=16)
def _props(device_index: int):
    return torch.cuda.get_device_properties(device_index)


def cuda_props(device: torch.device):
    """The properties of a CUDA device (cached; the current device where it has no index)."""
    return _props(device.index if device.index is not None else torch.cuda.current_device())


def sms(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 2 elsewhere (the interpreter's plans)."""
    if device.type != "cuda":
        return 2
    return cuda_props(device).multi_processor_count


def chunks(n: int, bh: int, device: torch.device, variant: str) -> tuple[int, int]:
    """(tokens per program, number of chunks) of pass ``variant`` over n tokens of bh program rows ((batch, head) or
    (batch, head pair)): PROGRAMS_PER_SM[variant] programs per SM, chunks of at least MIN_CHUNK[variant] tokens
    rounded up to a multiple of QUANTUM[variant] (a finer quantum fills the last wave more closely); TEST_CONFIG's
    CHUNK when set."""
    if TEST_CONFIG is not None:
        chunk = int(TEST_CONFIG["CHUNK"])
        assert chunk % int(TEST_CONFIG["BLOCK_N"]) == 0, "CHUNK must be a multiple of BLOCK_N"
    else:
        target = max(1, -(-sms(device) * PROGRAMS_PER_SM[variant] // bh))  # chunks per (b, h)
        chunk = -(-n // target)
        quantum = QUANTUM[variant]
        chunk = max(MIN_CHUNK[variant], -(-chunk // quantum) * quantum)
    return chunk, -(-n // chunk)


def _launch(n: int, bh: int, device: torch.device, variant: str, config: LaunchConfig | None = None) -> Launch:
    chunk, n_chunks = chunks(n, bh, device, variant)
    return Launch(variant, chunk, n_chunks, STRIDED[variant], config)


def n_bucket(b: int, n: int, h: int) -> int:
    """The token-count bucket of B·N·H (token, head) rows: the next power of two (the table's and the autotuner's)."""
    return pow2(b * n * h)


def dot_config(pass_: str, kind: str, bd: int, bdv: int, bucket: int) -> LaunchConfig:
    """The launch config of tl.dot pass ``pass_`` (configs.PASSES) for products of ``kind`` (configs.kinds) over
    padded head widths BD, BDV: configs.launch_config at max(BD, BDV), or TEST_CONFIG's tile when set."""
    if TEST_CONFIG is not None:
        stages = TEST_CONFIG.get("num_stages")
        return LaunchConfig(int(TEST_CONFIG["BLOCK_N"]), int(TEST_CONFIG.get("num_warps", 4)),
                            None if stages is None else int(stages))
    return configs.launch_config(pass_, kind, max(bd, bdv), bucket)


def pair_config() -> LaunchConfig:
    """The pair map's tile: PAIR_TILE, with TEST_CONFIG's BLOCK_N when set."""
    if TEST_CONFIG is not None:
        return LaunchConfig(int(TEST_CONFIG["BLOCK_N"]), PAIR_TILE.num_warps, PAIR_TILE.num_stages)
    return PAIR_TILE


try:
    from triton.backends.nvidia.compiler import CUDAOptions as _CUDAOptions
    _PDL_OK = HAS_GDC and "launch_pdl" in _CUDAOptions.__dataclass_fields__
except ImportError:  # a Triton without its CUDA backend: only the interpreter runs here
    _PDL_OK = False


def pdl(device: torch.device) -> bool:
    """Whether the passes chain by programmatic dependent launch: each pass lets the next kernel start in its tail,
    the next waits for its inputs after what it can do before. sm_90+, a Triton with grid dependency control."""
    if INTERPRET or not _PDL_OK or device.type != "cuda":
        return False
    return cuda_props(device).major >= 9


def precision(*tensors: Tensor, grad: bool = False) -> str:
    """tl.dot precision: tf32x3 for float32 inputs and for the backward's uncentred products (``grad``: RoPE)."""
    return "tf32x3" if grad or all(t.dtype == torch.float32 for t in tensors) else "tf32"


def all_16bit(*tensors: Tensor) -> bool:
    return all(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)


def approx_math(*tensors: Tensor, rope: bool = False) -> bool:
    """APPROX for 16-bit inputs without RoPE: errors (~2^-11, 1e-5) below the inputs' own rounding."""
    return not rope and all_16bit(*tensors)


def clamp(alpha: float) -> bool:
    """Whether the kernels must clamp θ (the reference's cap, which skips itself for |α| ≤ 4.8 the same way)."""
    return abs(float(alpha)) > CLAMP_FREE


def fastmag(approx: bool, lam: float, tau: float, alpha: float) -> bool:
    """m_q from xa: APPROX, λτ ≥ 1.5 and |α| in FASTMAG_ALPHA."""
    return approx and lam * tau >= 1.5 and FASTMAG_ALPHA[0] <= abs(alpha) <= FASTMAG_ALPHA[1]


def lam_int(lam: float) -> int:
    return int(lam) if lam in (1.0, 2.0, 3.0, 4.0) else 0


def dims(q: Tensor, v: Tensor) -> tuple[int, int, int, int, int, int, int]:
    b, n, h, d = q.shape
    dv = v.shape[-1]
    bd, bdv = max(16, pow2(d)), max(16, pow2(dv))  # tl.dot needs ≥ 16 along every axis
    return b, n, h, d, dv, bd, bdv


def state_size(bd: int, bdv: int) -> int:
    return 2 * bd * bdv + 2 * bd


def offs64(n: int, *tensors: Tensor) -> bool:
    """True when a token/dim offset inside one (b, h) slab of any tensor could exceed int32."""
    if TEST_CONFIG is not None and TEST_CONFIG.get("OFFS64"):  # tests: the 64-bit path at small sizes
        return True
    return any((n - 1) * abs(t.stride(1)) + (t.shape[-1] - 1) * abs(t.stride(3)) >= 2**31 - 1 for t in tensors)


def map_half2(q: Tensor, f16: bool, fastmag_: bool, alpha: float) -> bool:
    """φq in float16 pairs: float16 q, the float16 product, FASTMAG and |α| ≤ 1 (the angle polynomials' domain)."""
    return q.dtype == torch.float16 and f16 and fastmag_ and abs(alpha) <= 1.0


def map_pair(q: Tensor, half: bool) -> bool:
    """The map two heads a program: HALF2, an even head count, D = Dv = BD, dense q (its token rows exactly H·D
    elements), from PAIR_MIN_ROWS (token, head pair) rows (below, its one-warp programs are too few)."""
    b, n, h, d = q.shape
    if not (half and h % 2 == 0 and d == max(16, pow2(d))):
        return False
    dense = q.stride(3) == 1 and q.stride(2) == d and q.stride(1) == h * d
    return dense and b * n * (h // 2) >= PAIR_MIN_ROWS


def map_rr(q: Tensor, o: Tensor, half: bool) -> bool:
    """The register map: HALF2, float16 q of 16 dims, an even head count, strides multiples of 4 (fwd_map_rr.usable),
    int32 offsets, from MAP_RR_MIN_ROWS (token, head pair) rows."""
    if not (half and fwd_map_rr.usable(q, o)) or offs64(q.shape[1], q, o):
        return False
    return q.shape[0] * q.shape[1] * (q.shape[2] // 2) >= MAP_RR_MIN_ROWS


def reduce_rr(k: Tensor, v: Tensor, rope: bool, prec: str, offs64_: bool, chunk: int) -> bool:
    """The register reduce: tf32 products without RoPE (ZDOT), int32 offsets, 16-bit k, v of 16 unit-stride dims."""
    return not rope and prec == "tf32" and not offs64_ and fwd_reduce_rr.usable(k, v, chunk)


def bwd_f16(centre: bool, *tensors: Tensor) -> bool:
    """The backward's gradient products in float16 operands: float16 inputs, centred (no RoPE)."""
    return centre and all(t.dtype == torch.float16 for t in tensors)


def bwd_mpow(approx: bool, lam: float, tau: float) -> bool:
    """m/dir as one power: APPROX and λτ > 1 (p > 1 everywhere, so |dir|^(p−1) is 0 at dir = 0)."""
    return approx and lam * tau > 1.0


def centred(rope: bool, prec_g: str) -> bool:
    """The backward centres the values on v̄: tf32 products without RoPE (float32 inputs are not centred)."""
    return not rope and prec_g == "tf32"


def bwd_query_rr_ok(q: Tensor, do: Tensor, dq: Tensor, f16: bool, mpow: bool, clamp_: bool, rope: bool) -> bool:
    """The register query pass: F16 with MPOW, float16 q, ∂L/∂o of 16 dims, no RoPE, no clamp, int32 offsets."""
    return (f16 and mpow and not clamp_ and not rope and bwd_query_rr.usable(q, do, dq)
            and not offs64(q.shape[1], q, do, dq))


def bwd_key_rr_ok(k: Tensor, v: Tensor, dk: Tensor, dv: Tensor, f16: bool, clamp_: bool, rope: bool) -> bool:
    """The register key pass: F16 (an integer λ), float16 k, v of 16 dims, no RoPE, no clamp, int32 offsets."""
    return (f16 and not clamp_ and not rope and bwd_key_rr.usable(k, v, dk, dv)
            and not offs64(k.shape[1], k, v, dk, dv))


# ==================================================================================================== plans


def forward_plan(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lam: float, tau: float, alpha: float,
                 rope: bool) -> ForwardPlan:
    """The forward's plan for q, k, v (B, N, H, D / Dv) writing o (contiguous)."""
    b, n, h, d, dv, bd, bdv = dims(q, v)
    dev = q.device
    bucket = n_bucket(b, n, h)
    prec, approx = precision(q, k, v), approx_math(q, k, v, rope=rope)
    zacc = rope or prec == "tf32"
    rr = _launch(n, b * h, dev, "fwd_reduce_rr")
    if reduce_rr(k, v, rope, prec, offs64(n, k, v), rr.chunk):
        reduce = rr
    else:
        reduce = _launch(n, b * h, dev, "fwd_reduce", dot_config("fwd_reduce", "", bd, bdv, bucket))
    fm, f16 = fastmag(approx, lam, tau, alpha), prec == "tf32" and not rope
    half = map_half2(q, f16, fm, alpha)
    if map_rr(q, o, half):
        mp = _launch(n, b * h // 2, dev, "fwd_map_rr")
    elif map_pair(q, half) and dv == d:
        mp = _launch(n, b * h // 2, dev, "fwd_map_pair", pair_config())
    else:
        mp = _launch(n, b * h, dev, "fwd_map_half2" if half else "fwd_map",
                     dot_config("fwd_map", configs.map_kind(f16), bd, bdv, bucket))
    return ForwardPlan(reduce=reduce, map=mp, prec=prec, approx=approx, clamp=clamp(alpha), pdl=pdl(dev), zacc=zacc,
                       zdot=zacc and not rope, fastmag=fm, f16=f16, half2=half)


def backward_plan(q: Tensor, k: Tensor, v: Tensor, do: Tensor, dq: Tensor, dk: Tensor, dv_: Tensor, lam: float,
                  tau: float, alpha: float, rope: bool) -> BackwardPlan:
    """The backward's plan for q, k, v, ∂L/∂o writing dq, dk, dv (contiguous)."""
    b, n, h, d, dv, bd, bdv = dims(q, v)
    dev = q.device
    bucket = n_bucket(b, n, h)
    eye_query, eye_key = all_16bit(q, do), all_16bit(k, v)
    prec, prec_g = precision(q, k, v), precision(q, k, v, grad=rope)
    centre = centred(rope, prec_g)
    approx = approx_math(q, k, v, rope=rope)
    clamp_ = clamp(alpha)
    mpow, query_f16 = bwd_mpow(approx, lam, tau), bwd_f16(centre, q, do)
    key_f16 = bwd_f16(centre, k, v) and lam_int(lam) > 0
    if bwd_query_rr_ok(q, do, dq, query_f16, mpow, clamp_, rope):
        query = _launch(n, b * h, dev, "bwd_query_rr")
    else:
        query = _launch(n, b * h, dev, "bwd_query", dot_config("bwd_query", configs.query_kind(eye_query), bd, bdv,
                                                               bucket))
    if bwd_key_rr_ok(k, v, dk, dv_, key_f16, clamp_, rope):
        key = _launch(n, b * h, dev, "bwd_key_rr")
    else:
        key = _launch(n, b * h, dev, "bwd_key", dot_config("bwd_key", "", bd, bdv, bucket))
    return BackwardPlan(query=query, key=key, prec=prec, prec_g=prec_g, centre=centre, approx=approx, clamp=clamp_,
                        pdl=pdl(dev), mpow=mpow, query_f16=query_f16, key_f16=key_f16,
                        eye_query=eye_query, eye_key=eye_key)
