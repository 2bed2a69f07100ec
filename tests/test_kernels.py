"""Parity of the fused Triton NaLa kernels (nalasr_kernels) with the reference (nalasr.ops.nala, the source of truth).

Every case compares the output AND the gradients of q, k, v with the reference evaluated in float64 on the very
same input values, as a relative RMS error ‖got − ref‖₂ / ‖ref‖₂ against a named tolerance per dtype. Cases cover
odd token counts (tails), head dims that are not powers of two, batch > 1, several heads, RoPE, strided inputs
(the model's views of one Linear output, head-major, a non-unit stride along D), an all-zero query vector (no
NaN), and every buffer the kernels write pre-filled with NaN so an element that is never written fails.

Where the cases run:
- CPU (always): one subprocess under TRITON_INTERPRET=1 runs every case and reports JSON; each case is then its
  own test here. The variable must be set before Triton is imported and must not leak into the rest of the suite
  (a later CUDA run in the same process would silently interpret), hence the subprocess. Tiny launch configs
  (BLOCK_N=16, CHUNK=32) give several chunks and ragged tails even at N = 37.
- CUDA (``-m gpu``, when a device is present): the same cases in-process on the GPU through the autotuned
  launch path. Full-size checks (N up to 518400) are in benchmarks/gpu_kernels_check.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
from kernel_testing import rel_err, run_under_interpreter, tf32_dots_in_interpreter

ROOT = Path(__file__).resolve().parents[1]

# Relative RMS error allowed against the float64 reference, by input dtype. fp32: the interpreter lands at
# ~3e-7, the GPU's tf32x3 dots at ~1e-6. fp16/bf16: the output and the gradients are rounded to the input dtype
# (2^-11 / 2^-8 relative, ~0.3e-3 / 2.3e-3 RMS) and the GPU's dots use tf32 (2^-11).
TOL_OUT = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.2e-2}
# Gradients go through more rounding steps (dq's projection onto the direction cancels); a little more room.
TOL_GRAD = {"float32": 5e-5, "float16": 4e-3, "bfloat16": 2.4e-2}

REF_FACTOR = 4.0
# A reduce switch off against on (run_extras): another float32 summation order, and in fp16 the output rounding
# flips it causes. Measured on the H200 (benchmarks/switch_errors.py): SPLIT bitwise equal in fp16 and 8.6e-8 in
# fp32 (session 12); ZACC 1.7e-5 in fp16 and 1.4e-7 in fp32, VEC4 over 1e-6 in fp16 once the one-warp reduce
# lays its tiles out differently for 4-column loads (session 13), 2.5e-7 (session 14); EYE_BWD_QUERY 3.9e-6 and
# EYE_BWD_KEY bitwise equal in fp16 (session 14). A mis-paired token group is off by O(1).
SWITCH_TOL = {"float16": 1e-4, "float32": 1e-5}
# NALASR_MAP_F16 changes the map product's operands: float16 rounded to nearest against tf32 truncated (both 11
# significant bits). On batch3 in the interpreter with the GPU's tf32 truncation, fp16 outputs against float32
# inputs: 3.6e-4 with it, 8.1e-4 without, 9.1e-4 apart; the gradients do not change. S scaled by the wrong power
# of two is off by ≥ 50%.
MAP_F16_TOL = 2e-3
# NALASR_MAP_HALF2 forms φq in float16 pairs (nalasr_kernels.half2): three float16 roundings of φq's halves (m, the
# angle polynomial, their product) where float32 features took one, and den from float16 products. batch3's output
# moves by 3.8e-4 in the interpreter and 3.9e-4 on the H200 (benchmarks/switch_errors.py, session 25 call 3), its
# gradients not at all (the backward is unchanged); against the float64 reference the fp16 output at 518K went from
# 3.81e-4 to 3.90e-4 (gpu_kernels_check.py). A pair of elements mixed up between tokens or dims, or z scaled by the
# wrong power of two, is off by O(1).
MAP_HALF2_TOL = 1e-3
# NALASR_BWD_DZACC sums dz's terms in float32 instead of tf32 products: in the interpreter with the GPU's tf32
# truncation, batch3's gradient moves by 1.5e-4 in fp16 (output rounding flips) and 2.9e-8 in fp32, and the gradients'
# errors against the float64 reference stay the same to three digits in every 16-bit case; a dz summed over the
# wrong tokens or columns is off by O(1). NALASR_BWD_MPOW (16-bit inputs only): 8.7e-6 in fp16.
BWD_DZACC_TOL = {"float16": 1e-3, "float32": 1e-5}
# NALASR_BWD_F16: the backward's gradient products in float16 (rounded to nearest) instead of tf32 (truncated), both
# 11 significant bits: in the interpreter with the GPU's tf32 truncation, batch3's gradient (of its one leaf) moves by
# 9.2e-4 and its output not at all, while the gradients' errors against the float64 reference fall (fp16-large-values
# dq 7.5e-4 → 4.0e-4); an operand scaled by the wrong power of two (S, dS, ‖k‖^λ, the halved values) is off by ≥ 50%.
BWD_F16_TOL = 2e-3

# NALASR_REDUCE_RR (the forward reduce from registers, nalasr_kernels.nala_rr) against _fwd_reduce: the same tf32
# operands summed in another order (other k slots, other accumulators). In the interpreter with the GPU's tf32
# truncation on batch3: the outputs equal, the gradients 5.2e-7 (fp16) and 4.1e-6 (bf16) apart; S or z stored
# under the wrong dim, column or half is off by O(1).
REDUCE_RR_TOL = {"float16": 1e-4, "bfloat16": 1e-3}

SMALL = {"BLOCK_N": 16, "CHUNK": 32, "num_warps": 1}  # several chunks and ragged tails at small N
GPU_CONFIG = {"BLOCK_N": 32, "CHUNK": 64, "num_warps": 4}
# Two 16-token groups per tile in _bwd_query's reduce products (nala_math._reduce_dot; SMALL's 16-token tiles are one
# group), two tiles per chunk; at N = 150 the last tile's second group holds 6 tokens.
GROUPED = {"BLOCK_N": 32, "CHUNK": 64, "num_warps": 2}

# ------------------------------------------------------------------------------------------------------ cases


# Every key _make and run_case read; a case overrides some (benchmarks/gpu_kernels_check.py builds its cases on it).
CASE_DEFAULTS = dict(B=2, N=37, H=2, D=16, DV=None, dtype="float32", rope=None, params=None, layout="contiguous",
                     zero_q=True, scale=1.0, v_shift=0.0, q_ramp=False, config=SMALL, env={})


def _cases() -> dict[str, dict]:
    base = CASE_DEFAULTS
    shapes = [
        dict(N=1, H=1, D=16),
        dict(N=7, H=3, D=24, rope=(1, 7)),
        dict(N=37, H=2, D=16, layout="qkvg"),
        dict(N=37, H=2, D=32, rope=(37, 1), layout="head_major"),
        dict(N=130, H=1, D=24, rope=(10, 13), layout="qkvg", config=None),  # the default launch path
        dict(N=130, H=3, D=16, layout="d_strided"),
    ]
    out: dict[str, dict] = {}
    for dtype in ("float32", "float16", "bfloat16"):
        for s in shapes:
            c = {**base, **s, "dtype": dtype}
            name = f"{dtype}-N{c['N']}-H{c['H']}-D{c['D']}-{c['layout']}" + ("-rope" if c["rope"] else "")
            out[name] = c
    extra = {
        # α = 20: θ hits the ±(π/4 − 1e-4) clamp (zero gradient there); λ = 2 takes the squared-magnitude path.
        # (No zero query in these two: with λτ < 1 the power p < 1 at q = 0 and the reference's own gradient there
        # is NaN (|0|^(p−1)); the kernel returns 0.)
        "alpha20-lam2": dict(params=dict(lam=2.0, tau=0.25, alpha=20.0, eps=1e-6), scale=2.0, rope=(37, 1),
                             zero_q=False),
        # Non-integer λ (exp2/log2 path) and an ε large enough to matter.
        "lam2.5-bigeps": dict(params=dict(lam=2.5, tau=0.3, alpha=0.7, eps=0.05), N=41, rope=None, zero_q=False),
        "dv-differs": dict(D=16, DV=24, N=45, rope=(5, 9)),
        "d8-dv5": dict(D=8, DV=5, N=19, H=3),
        "d64": dict(D=64, N=70, H=1, rope=(7, 10)),
        "odd-d17-rope": dict(D=17, N=15, rope=(5, 3)),
        "batch3": dict(B=3, N=50, H=2, D=16, layout="qkvg"),
        "offsets64-rope": dict(N=33, H=2, rope=(3, 11), layout="head_major", config={**SMALL, "OFFS64": True}),
        "fp16-large-values": dict(dtype="float16", scale=30.0, N=64, layout="qkvg"),
        # α = 20 without RoPE: the clamp and its gradient mask in the approximate-math kernels (16-bit inputs
        # without RoPE), which leave both out for |α| ≤ 4 (nala._clamp).
        "fp16-alpha20": dict(dtype="float16", params=dict(lam=3.0, tau=0.5, alpha=20.0, eps=1e-6), N=48, rope=None,
                             zero_q=False),
        "bf16-alpha20-rope": dict(dtype="bfloat16", params=dict(lam=3.0, tau=0.5, alpha=20.0, eps=1e-6),
                                  N=48, rope=(6, 8), layout="qkvg"),
        # Values with a large common offset: ∂L/∂q and ∂L/∂k are differences of nearly equal terms (∝ v_j − o_t),
        # so tf32 products in the backward miss them by ~2^-11 × 30 (the N = 1 cases are the extreme: o = v).
        "fp16-v-offset": dict(dtype="float16", N=64, H=2, v_shift=30.0, zero_q=False, layout="qkvg"),
        # The same with RoPE: the uncentred tf32x3 path of the backward.
        "fp16-v-offset-rope": dict(dtype="float16", N=64, H=2, v_shift=30.0, zero_q=False, rope=(8, 8)),
        # Query elements whose direction is subnormal in float32: the GPU's approximate log2 / division may
        # flush them; the kernels count them as 0 (m = |dir|^p underflows to 0 there anyway).
        "fp32-subnormal-q": dict(N=37, tiny_q=True),
        "bf16-subnormal-q": dict(dtype="bfloat16", N=37, tiny_q=True, layout="qkvg"),
        "grouped-fp16": dict(dtype="float16", N=150, H=2, layout="qkvg", zero_q=False, config=GROUPED),
        "grouped-rope": dict(N=150, H=2, rope=(10, 15), config=GROUPED),
        # float16 q, k, v as separate contiguous tensors (the model's), an even head count: the map over head pairs
        # (nala._map_pair, which takes it by itself from 400K tokens), on its own launch path (a ragged second chunk)
        # and on SMALL's 16-token tiles.
        # (with the register map off, which would take them when forced).
        "fp16-pair": dict(dtype="float16", N=301, H=4, config=None, env={"NALASR_MAP_PAIR": "1", "NALASR_MAP_RR": "0"}),
        "fp16-pair-small": dict(dtype="float16", N=37, H=2, env={"NALASR_MAP_PAIR": "1", "NALASR_MAP_RR": "0"}),
        # The register map (nala_map_rr: by default for float16 q of 16 dims and an even head count from 49K tokens
        # of 4 heads) forced on dense q of 4 heads: 2 head pairs, a ragged last tile.
        "fp16-map-rr": dict(dtype="float16", N=301, H=4, config=None, env={"NALASR_MAP_RR": "1"}),
        # The backward's key pass from registers (nala_bwd_key_rr, off unless NALASR_BWD_KEY_RR=1) on the model's
        # views: a ragged last tile.
        "fp16-bwd-key-rr": dict(dtype="float16", N=77, H=2, layout="qkvg", env={"NALASR_BWD_KEY_RR": "1"}),
        # The backward's query pass from registers (nala_bwd_query_rr, off unless NALASR_BWD_QUERY_RR=1) on the model's
        # views, queries whose 1/den grows along the tokens so that later tiles raise the dS operand's scale (a
        # chunk's earlier terms rescaled), a ragged last tile.
        "fp16-bwd-query-rr": dict(dtype="float16", N=77, H=2, layout="qkvg", q_ramp=True,
                                  env={"NALASR_BWD_QUERY_RR": "1"}),
    }
    for name, s in extra.items():
        out[name] = {**base, **s}
    return out


CASES = _cases()

# -------------------------------------------------------------------------------------------- case evaluation


def _make(case: dict, device: str, seed: int):
    """(q, k, v, g, leaves): q, k, v views in the case's layout (B, N, H, D/DV), g = ∂L/∂o (non-contiguous)."""
    b, n, h, d = case["B"], case["N"], case["H"], case["D"]
    dv = case["DV"] or d
    dtype = getattr(torch, case["dtype"])
    gen = torch.Generator(device=device).manual_seed(seed)

    def rnd(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64, device=device) * case["scale"]).to(dtype)

    layout = case["layout"]
    if layout == "qkvg":  # the model: q, k, v, g = Linear(C → 4C)(x).chunk(4), heads split off the channels
        assert dv == d
        leaves = [rnd(b, n, 4 * h * d)]
        views = lambda x: tuple(t.reshape(b, n, h, d) for t in x.chunk(4, dim=-1)[:3])  # noqa: E731
    elif layout == "head_major":  # (B, H, N, D) storage seen token-major: stride along N is D
        leaves = [rnd(b, h, n, d), rnd(b, h, n, d), rnd(b, h, n, dv)]
        views = lambda *x: tuple(t.transpose(1, 2) for t in x)  # noqa: E731
    elif layout == "d_strided":  # (B, N, D, H) storage: the head dim has stride H, the heads stride 1
        leaves = [rnd(b, n, d, h), rnd(b, n, d, h), rnd(b, n, dv, h)]
        views = lambda *x: tuple(t.permute(0, 1, 3, 2) for t in x)  # noqa: E731
    else:
        leaves = [rnd(b, n, h, d), rnd(b, n, h, d), rnd(b, n, h, dv)]
        views = lambda *x: tuple(x)  # noqa: E731
    if case["zero_q"]:
        views(*leaves)[0][0, 0] = 0  # every head of one query is the zero vector: dir = 0, m = 0, no NaN allowed
    if case["q_ramp"]:  # query norms from 0.05 to 4 along the tokens: 1/den grows ~50-fold (p = λ(τ + tanh‖q‖))
        with torch.no_grad():
            ramp = torch.linspace(0.0125, 1.0, n, dtype=torch.float64, device=device)
            views(*leaves)[0].mul_(ramp.to(dtype)[None, :, None, None])
    if case["v_shift"]:
        with torch.no_grad():
            views(*leaves)[2].add_(case["v_shift"])
    if case.get("tiny_q"):
        with torch.no_grad():
            views(*leaves)[0][:, 1:5, :, :3] = 1e-39  # float32/bfloat16 subnormals, next to normal elements
    for t in leaves:
        t.requires_grad_()
    q, k, v = views(*leaves)
    g = torch.randn(b, h, n, dv, generator=gen, dtype=torch.float64, device=device).to(dtype).transpose(1, 2)
    return q, k, v, g, leaves


def run_case(case: dict, device: str, seed: int = 0, ref_device: str = "cpu") -> dict:
    """Kernel vs float64 reference (on ref_device) for one case: relative RMS errors and contract checks."""
    from nalasr.ops.nala import NalaParams, nala_attention_reference
    from nalasr_kernels import nala as K

    params = NalaParams(**case["params"]) if case["params"] else None
    rope = tuple(case["rope"]) if case["rope"] else None
    q, k, v, g, _ = _make(case, device, seed)
    for t in (q, k, v):
        t.retain_grad()
    saved = K._CONFIG, K._OUT_FILL
    K._CONFIG, K._OUT_FILL = case["config"], float("nan")
    try:
        with mock.patch.dict(os.environ, case["env"]):
            o = K.nala_attention_triton(q, k, v, params, rope)
            o.backward(g)
    finally:
        K._CONFIG, K._OUT_FILL = saved
    # The reference in float64 on exactly the values the kernel saw.
    q64, k64, v64 = (t.detach().to(ref_device, torch.float64).requires_grad_() for t in (q, k, v))
    ref = nala_attention_reference(q64, k64, v64, params or NalaParams(), rope)
    ref.backward(g.detach().to(ref_device, torch.float64))
    # The reference itself at the input dtype (float32 math, rounded to the dtype), same device: the yardstick
    # for ill-conditioned cases (N = 1: o ≈ v, so dq, dk are ε-sized leftovers of a cancellation).
    qd, kd, vd = (t.detach().clone().requires_grad_() for t in (q, k, v))
    refd = nala_attention_reference(qd, kd, vd, params or NalaParams(), rope)
    refd.backward(g)
    return {
        "o": rel_err(o, ref), "dq": rel_err(q.grad, q64.grad), "dk": rel_err(k.grad, k64.grad), "dv": rel_err(v.grad, v64.grad),
        "o_ref": rel_err(refd, ref), "dq_ref": rel_err(qd.grad, q64.grad), "dk_ref": rel_err(kd.grad, k64.grad),
        "dv_ref": rel_err(vd.grad, v64.grad),
        "o_dtype_ok": o.dtype == q.dtype, "o_contiguous": o.is_contiguous(), "o_shape_ok": o.shape == ref.shape,
        "grad_dtypes_ok": (q.grad.dtype, k.grad.dtype, v.grad.dtype) == (q.dtype, k.dtype, v.dtype),
        "finite": bool(all(torch.isfinite(t).all() for t in (o, q.grad, k.grad, v.grad))),
    }


@contextlib.contextmanager
def recording(owner, name: str):
    """owner.name wrapped for the block: yields the list of (args, result) of every call made through it."""
    fn, calls = getattr(owner, name), []

    def wrapped(*args, **kwargs):
        calls.append((args, fn(*args, **kwargs)))
        return calls[-1][1]

    with mock.patch.object(owner, name, wrapped):
        yield calls


def setting(owner, name: str, off, on):
    """switch_errors' patch for a module attribute: owner.name = off at flag "0", on at "1"."""
    return lambda flag: mock.patch.object(owner, name, on if flag == "1" else off)


def clamp_forced(flag: str):
    """switch_errors' patch for θ's clamp: the default at "0", forced on at "1" (nala._clamp binds for any α)."""
    from nalasr_kernels import nala as K

    return setting(K, "_CLAMP_FREE", K._CLAMP_FREE, -1.0)(flag)


def switch_errors(switch: str, dtype: str, device: str, patch=None, **case) -> list[float]:
    """Relative errors of the output and the gradient (batch3, or batch3 with the fields ``case`` gives: q, k, v are
    views of one leaf) with the environment switch ``switch`` at 1 against 0 (or with the context ``patch(flag)``
    gives), every buffer the kernels must write NaN-filled first (a tile a switch skips must not read as the other
    run's leftovers). On the CPU interpreter the tf32
    products round their operands as on the GPU (NALASR_REDUCE_ZACC=0 takes z out of such a product, =1 sums the
    tf32-truncated φk itself)."""
    from nalasr_kernels import nala as K

    runs = []
    for flag in ("0", "1"):
        q, k, v, g, leaves = _make({**CASES["batch3"], **case, "dtype": dtype, "config": None}, device, seed=5)
        tf32 = tf32_dots_in_interpreter() if device == "cpu" else contextlib.nullcontext()
        with patch(flag) if patch else mock.patch.dict(os.environ, {switch: flag}), tf32, \
                mock.patch.object(K, "_OUT_FILL", float("nan")):
            o = K.nala_attention_triton(q, k, v)
            o.backward(g)
        runs.append([o.detach().float()] + [t.grad.float() for t in leaves])
    return [rel_err(b, a) for a, b in zip(*runs)]


def run_extras(device: str) -> dict:
    """Checks beyond parity: determinism, argument validation, no copies of strided inputs."""
    from nalasr_kernels import nala as K

    out: dict = {}
    # Bitwise reproducible: the partial sums are combined in a fixed order (no atomics).
    case = {**CASES["batch3"], "config": None}
    runs = []
    for _ in range(2):
        q, k, v, g, leaves = _make(case, device, seed=3)
        o = K.nala_attention_triton(q, k, v, None, None)
        o.backward(g)
        runs.append([o.detach().cpu()] + [t.grad.detach().cpu() for t in leaves])
    out["deterministic"] = all(torch.equal(a, b) for a, b in zip(*runs))
    # The forward's plans take each pass's own smallest chunk (nala._FWD_REDUCE_MIN_CHUNK, _FWD_MAP_MIN_CHUNK), read
    # when it runs: set apart here, the reduce's plans (the register reduce's, then the generic one's where that
    # does not apply) get the one and the map's the other.
    with mock.patch.multiple(K, _FWD_REDUCE_MIN_CHUNK=96, _FWD_MAP_MIN_CHUNK=192), recording(K, "_plan") as calls:
        with torch.no_grad():
            K.nala_attention_triton(*_make(case, device, seed=3)[:3])
    out["plan_minimums"] = [args[5] for args, _ in calls] in ([96, 192], [96, 96, 192])
    # Validation: clear errors for what the kernel does not take.
    x = torch.zeros(1, 4, 1, 16, device=device)
    bad = {
        "shape": lambda: K.nala_attention_triton(x, x[:, :3], x),
        "dtype": lambda: K.nala_attention_triton(x.double(), x.double(), x.double()),
        "head_dim": lambda: K.nala_attention_triton(*(torch.zeros(1, 4, 1, 72, device=device),) * 3),
        "rope_hw": lambda: K.nala_attention_triton(x, x, x, None, (3, 2)),
    }
    for name, fn in bad.items():
        try:
            fn()
            out[f"rejects_{name}"] = False
        except (ValueError, TypeError):
            out[f"rejects_{name}"] = True
    # The device math's accuracy: full paths ~1e-7; APPROX's degree 4 cosine < 1.1e-5 (and really that one: > 5e-6,
    # where the degree 6 series of before had < 4e-6), its sines < 1e-6 (degree 7 and, SIN5, degree 5: > 5e-7, the
    # degree 7 has < 4.5e-7), its tanh.approx (GPU only; the interpreter has no MUFU op) within 2^-10 relative.
    from kernel_probes import probe_math

    t = torch.linspace(-0.7853, 0.7853, 1001, device=device)
    exact = [f(t.double()) for f in (torch.cos, torch.sin, torch.tanh)]
    full = [(a.double() - b).abs().max().item() for a, b in zip(probe_math(t, False), exact)]
    short = [(a.double() - b).abs().max().item() for a, b in zip(probe_math(t, True), exact)]
    out["math_full"] = max(full) < 2e-7
    sin5 = (probe_math(t, True, sin5=True)[1].double() - exact[1]).abs().max().item()
    out["math_approx_series"] = 5e-6 < short[0] < 1.1e-5 and short[1] < 4.5e-7 and 5e-7 < sin5 < 1e-6
    out["math_approx_tanh"] = short[2] <= 2 ** -10 * 0.66  # |tanh| ≤ tanh(π/4) = 0.66 on this grid
    # The switches only change how the reduce is computed: NALASR_REDUCE_VEC4 _fwd_reduce's column offsets (the
    # same numbers, 4-column runs for the compiler), NALASR_REDUCE_SPLIT the grouping of the tokens in the reduce
    # products (the same tf32 operands, another fp32 summation order), NALASR_REDUCE_ZACC where z is summed (the
    # tf32-truncated φk either way: a ones column in the S product or an elementwise accumulator), NALASR_REDUCE_ZDOT
    # how (a product of the same φk operand with ones, or an elementwise sum of it truncated). Off must agree
    # with on, output and gradients; a tile's groups paired with the wrong tokens would be off by O(1).
    # NALASR_EYE_BWD_QUERY / _BWD_KEY only move the backward's 16-bit tiles to float32 through an exact product
    # (on the GPU a different layout, hence fp32 summation order; in the interpreter nothing). The backward's switches
    # run with its register passes off (which take _bwd_query's and _bwd_key's place in float16 by default).
    no_bwd_rr = mock.patch.dict(os.environ, {"NALASR_BWD_QUERY_RR": "0", "NALASR_BWD_KEY_RR": "0"})
    for switch in ("NALASR_REDUCE_VEC4", "NALASR_REDUCE_SPLIT", "NALASR_REDUCE_ZACC", "NALASR_REDUCE_ZDOT",
                   "NALASR_EYE_BWD_QUERY", "NALASR_EYE_BWD_KEY"):
        for dtype in ("float16", "float32"):
            with no_bwd_rr:
                out[f"{switch.lower()}_{dtype}"] = max(switch_errors(switch, dtype, device)) <= SWITCH_TOL[dtype]
    # The maps' switches with the register map off (NALASR_MAP_RR=0), so each compares the maps it names whatever
    # size the register map's rule starts from.
    no_rr = mock.patch.dict(os.environ, {"NALASR_MAP_RR": "0"})
    with no_rr:
        out["map_f16_float16"] = max(switch_errors("NALASR_MAP_F16", "float16", device)) <= MAP_F16_TOL
        out["map_half2_float16"] = max(switch_errors("NALASR_MAP_HALF2", "float16", device)) <= MAP_HALF2_TOL
    # NALASR_MAP_PAIR=1 takes the map over head pairs on batch3's strided q and small size as well (the rule's
    # default takes it for dense q from 400K tokens): the same math on other tiles, so other float32 roundings at
    # most. A head's output written to its neighbour's columns is off by O(1). Taken exactly in the forced run.
    with no_rr, recording(K, "_map_pair") as calls:
        out["map_pair_float16"] = max(switch_errors("NALASR_MAP_PAIR", "float16", device)) <= SWITCH_TOL["float16"]
    out["map_pair_taken"] = [taken for _, taken in calls] == [False, True]
    # The register map (nala_map_rr, NALASR_MAP_RR) against the one-head HALF2 map it replaces on batch3: the same
    # float16 features and float16 products summed in float32, other shuffles and slots, so float32 rounding and the
    # float16 output flips it causes (interpreter: 2e-5). A dim, column, head or token in the wrong k slot, lane or
    # word is off by O(1); a word left unstored is NaN. Taken in the run with it on and only there.
    from nalasr_kernels import nala_map_rr

    with recording(nala_map_rr, "launch") as calls:
        out["map_rr_float16"] = max(switch_errors("NALASR_MAP_RR", "float16", device)) <= SWITCH_TOL["float16"]
    out["map_rr_taken"] = len(calls) == 1
    # The backward's key pass from registers (nala_bwd_key_rr, NALASR_BWD_KEY_RR=1) against _bwd_key's float16
    # products: dv from the same float16 operands (interpreter: 1e-5), dk centred exactly ((v − v̄)·dSᵀ as float16 v
    # against float16 dS summed in float32, where _bwd_key rounds v − v̄ to float16 first): 3.2e-4 apart in the
    # interpreter, each within float16 rounding of the float64 reference (and the register pass the closer of the two
    # on batch3, fp16-large-values and fp16-map-rr). A dim, column or token in the wrong slot is off by O(1).
    from nalasr_kernels import nala_bwd_key_rr

    with recording(nala_bwd_key_rr, "launch") as calls:
        out["bwd_key_rr_float16"] = max(switch_errors("NALASR_BWD_KEY_RR", "float16", device)) <= BWD_F16_TOL
    out["bwd_key_rr_taken"] = len(calls) == 1
    # The backward's query pass from registers (nala_bwd_query_rr, NALASR_BWD_QUERY_RR=1) against _bwd_query's float16
    # products: dq from the same float32 chain and float16 S·dnum (interpreter: 1.7e-6), dS = Σ φ̃q·dnumᵀ from
    # float16 φ̃q and g·(1/den)·2^-E where _bwd_query takes tf32 products, so dk, dv 4.7e-4 apart, each within float16
    # rounding of the float64 reference. A dim, column or token in the wrong slot is off by O(1).
    from nalasr_kernels import nala_bwd_query_rr

    with recording(nala_bwd_query_rr, "launch") as calls:
        out["bwd_query_rr_float16"] = max(switch_errors("NALASR_BWD_QUERY_RR", "float16", device)) <= BWD_F16_TOL
    out["bwd_query_rr_taken"] = len(calls) == 1
    # The forward reduce from registers (nala_rr) where it applies (16-bit inputs, D = Dv = 16, no RoPE; batch3's
    # qkvg views), and only there: once per 16-bit run with the switch on, never for float32.
    from nalasr_kernels import nala_rr

    with recording(nala_rr, "launch") as calls:
        for dtype in ("float16", "bfloat16"):
            out[f"reduce_rr_{dtype}"] = max(switch_errors("NALASR_REDUCE_RR", dtype, device)) <= REDUCE_RR_TOL[dtype]
        switch_errors("NALASR_REDUCE_RR", "float32", device)
    out["reduce_rr_used"] = [args[0].dtype for args, _ in calls] == [torch.float16, torch.bfloat16]
    # Its token strides as constexprs (nala_rr.STATIC_STRIDES) change only the address arithmetic: the same bits.
    static_strides = setting(nala_rr, "STATIC_STRIDES", False, True)
    out["reduce_rr_static_strides"] = max(switch_errors("static", "float16", device, patch=static_strides)) == 0.0
    # Programmatic dependent launch (nala._pdl, on by default on sm_90+; off in the interpreter) changes when the
    # passes start, not what they compute: the same bits, forward and backward.
    pdl_off = setting(K, "_pdl", lambda device: False, K._pdl)
    for dtype in ("float16", "float32"):
        out[f"pdl_noop_{dtype}"] = max(switch_errors("pdl", dtype, device, patch=pdl_off)) == 0.0
    # _bwd_query's NALASR_BWD_DZACC (where dz is summed) and NALASR_BWD_MPOW (m/dir as one power; 16-bit only).
    with no_bwd_rr:
        for dtype in ("float16", "float32"):
            out[f"bwd_dzacc_{dtype}"] = max(switch_errors("NALASR_BWD_DZACC", dtype, device)) <= BWD_DZACC_TOL[dtype]
        out["bwd_mpow_float16"] = max(switch_errors("NALASR_BWD_MPOW", "float16", device)) <= SWITCH_TOL["float16"]
        out["bwd_f16_float16"] = max(switch_errors("NALASR_BWD_F16", "float16", device)) <= BWD_F16_TOL
    # The register reduce's whole-tile loads as inline PTX (nala_rr.ASM_LOADS, GPU only) load the same values: the
    # same bits.
    asm_loads = setting(nala_rr, "ASM_LOADS", False, True)
    out["reduce_rr_asm_loads"] = max(switch_errors("asm", "float16", device, patch=asm_loads)) == 0.0
    # Tile-strided chunks (nala._strided): program c takes tiles c, c + n_chunks, … The register reduce's partials then
    # hold other tokens (their sum over the chunks is the same to float32 summation order: every slot written, NaN-
    # filled buffers, ragged last tiles), the attention within SWITCH_TOL; the pair map computes each token as before,
    # so the same bits. A tile skipped or taken twice would be off by O(1). 229 tokens of 2 heads: the reduce's 2
    # chunks of 128 (nala._FWD_REDUCE_MIN_CHUNK) and the pair map's 4 of 64 take 4 and 2 tiles each, the last ragged.
    out["strided_fwd_reduce_float16"] = (
        max(switch_errors("NALASR_STRIDED_FWD_REDUCE", "float16", device, B=1, N=229)) <= SWITCH_TOL["float16"])
    def pair_strided(flag):
        return mock.patch.dict(os.environ, {"NALASR_MAP_PAIR": "1", "NALASR_STRIDED_FWD_MAP_PAIR": flag})

    with no_rr, recording(K, "_map_pair") as calls:
        out["strided_fwd_map_pair_float16"] = max(switch_errors("strided", "float16", device, patch=pair_strided,
                                                                B=1, N=229)) == 0.0
    out["strided_fwd_map_pair_taken"] = [taken for _, taken in calls] == [True, True]
    # The same in the other streaming passes, at 600 tokens (the one-head map's 2-tile chunks; the backward's 5 and
    # 8 chunks of 1-2 tiles and their ragged ends): the maps compute each token as before (the same bits); _bwd_query's
    # dS, dz partials hold other tokens (the gradient within SWITCH_TOL).
    # The register map likewise (the same bits), at 229 tokens: its 2 chunks of 128 take 4 tiles each, one ragged.
    with mock.patch.dict(os.environ, {"NALASR_MAP_RR": "1"}):
        out["strided_fwd_map_rr_float16"] = max(switch_errors("NALASR_STRIDED_FWD_MAP_RR", "float16", device, B=1,
                                                              N=229)) == 0.0
    # The backward's register passes likewise, on their own switches: the key pass computes each token as before,
    # the query pass's dS, dz partials hold other tokens.
    for name, dtypes, exact in (("fwd_map", ("float16",), True), ("bwd_query", ("float16", "float32"), False),
                                ("bwd_key", ("float16",), True), ("bwd_query_rr", ("float16",), False),
                                ("bwd_key_rr", ("float16",), True)):
        for dtype in dtypes:
            # the one-head map, which the register map would take the place of in float16, and _bwd_query, _bwd_key
            # where their own switches are tested
            with no_rr, (contextlib.nullcontext() if name.endswith("_rr") else no_bwd_rr):
                errs = switch_errors(f"NALASR_STRIDED_{name.upper()}", dtype, device, B=1, N=600)
            out[f"strided_{name}_{dtype}"] = max(errs) == 0.0 if exact else max(errs) <= SWITCH_TOL[dtype]
    gen = torch.Generator().manual_seed(12)
    for n, chunk, dtype in ((100, 32, torch.float16), (229, 64, torch.bfloat16), (37, 64, torch.float16)):
        k, v = (torch.randn(2, n, 3, 16, generator=gen).to(device, dtype) for _ in range(2))
        n_chunks = -(-n // chunk)
        totals = []
        for strided in (False, True):
            part = torch.full((2 * 3 * n_chunks * 544,), float("nan"), device=device)
            nala_rr.launch(k, v, part, n, chunk, n_chunks, 1.0, 3.0, 3, True, False, strided=strided)
            totals.append(part.view(6, n_chunks, 544).sum(1))
        out[f"strided_fwd_reduce_partials_{n}"] = bool(torch.isfinite(totals[1]).all()) and torch.allclose(
            totals[1], totals[0], rtol=1e-5, atol=1e-5 * totals[0].abs().max().item())
    # The register reduce's products with φk as A (nala_rr.FEAT_A) against vᵀ as A: the same tf32 products in other
    # mma slots, so every chunk's partial within float32 summation order (interpreter: 1e-7 of the largest entry); a
    # dim, value column or half of S or z stored in the wrong place is off by O(1), a slot left unwritten is NaN.
    for n, chunk, dtype, strided in ((100, 32, torch.float16, False), (229, 64, torch.bfloat16, True)):
        k, v = (torch.randn(2, n, 3, 16, generator=gen).to(device, dtype) for _ in range(2))
        n_chunks = -(-n // chunk)
        parts = []
        for feat_a in (False, True):
            part = torch.full((2 * 3 * n_chunks * 544,), float("nan"), device=device)
            nala_rr.launch(k, v, part, n, chunk, n_chunks, 1.0, 3.0, 3, True, False, strided=strided, feat_a=feat_a)
            parts.append(part)
        out[f"reduce_rr_feat_a_{n}"] = bool(torch.isfinite(parts[1]).all()) and torch.allclose(
            parts[1], parts[0], rtol=1e-5, atol=1e-6 * parts[0].abs().max().item())
    # θ's clamp, left out for |α| ≤ 4 (nala._clamp; batch3 has α = 1), cannot bind there: forced on, the output is
    # the same bit for bit (only min/max drop out of the forward), and so are the gradients but for the compiler's
    # freedom in the backward, whose gradient mask is a select between products that ptxas may then fuse otherwise:
    # on the H200 the float16 gradient moved by 9.7e-7, every run, with HALF2 and PDL on or off, the float32 one not
    # at all (benchmarks/clamp_noop_gpu.py, session 26 call 4). A clamp or mask that did bind would be off by O(1).
    # (The backward's register passes have no clamp: the rule keeps them out where it is on, so they stay off here.)
    for dtype in ("float16", "float32"):
        with no_bwd_rr:
            errs = switch_errors("clamp", dtype, device, patch=clamp_forced)
        out[f"clamp_noop_{dtype}"] = errs[0] == 0.0 and max(errs[1:]) <= SWITCH_TOL[dtype]
    # The float16 product scales S into float16's range: inputs ×30 (S ~ 1e6, past float16's 65504) and
    # ×0.02 (S ~ 1e-7, float16 subnormals) give the output the same inputs in float32 give.
    for name, scale in (("large", 30.0), ("small", 0.02)):
        q, k, v, _, _ = _make({**CASES["batch3"], "dtype": "float16", "scale": scale, "config": None}, device, seed=6)
        with torch.no_grad():
            o16 = K.nala_attention_triton(q, k, v)
            o32 = K.nala_attention_triton(q.float(), k.float(), v.float())
        out[f"map_f16_{name}_inputs"] = rel_err(o16, o32) <= TOL_OUT["float16"]
    # params=None means the reference defaults; an object with the four attributes works too.
    q, k, v, _, _ = _make({**CASES["d8-dv5"], "config": None}, device, seed=4)
    with torch.no_grad():
        a = K.nala_attention_triton(q, k, v)

        class P:
            lam, tau, alpha, eps = 3.0, 0.5, 1.0, 1e-6

        b = K.nala_attention_triton(q, k, v, P())
    out["params_default"] = torch.equal(a, b)
    return out


def _worker(out_path: str) -> None:
    """Runs in the TRITON_INTERPRET=1 subprocess: every case on CPU, one JSON file back."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    sys.path.insert(0, str(ROOT / "kernels"))
    sys.path.insert(0, str(ROOT))
    import nalasr_kernels.nala  # noqa: F401  (before nalasr: it must not pull nalasr in)

    res: dict = {"never_imports_nalasr": "nalasr" not in sys.modules, "cases": {}}
    torch.set_num_threads(1)
    for name, case in CASES.items():
        try:
            with tf32_dots_in_interpreter():  # the GPU's tf32 operand rounding, so precision defects show here too
                res["cases"][name] = run_case(case, "cpu")
        except Exception as e:  # one broken case must not hide the others
            res["cases"][name] = {"error": f"{type(e).__name__}: {e}"}
    try:
        res["extras"] = run_extras("cpu")
    except Exception as e:
        res["extras"] = {"error": f"{type(e).__name__}: {e}"}
    Path(out_path).write_text(json.dumps(res))


# ------------------------------------------------------------------------------------------------------ tests


def _have_triton() -> bool:
    import importlib.util

    return importlib.util.find_spec("triton") is not None


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory) -> dict:
    if not _have_triton():
        pytest.skip("triton is not installed")
    return run_under_interpreter(__file__, tmp_path_factory.mktemp("kernels") / "interpreted.json", "--worker",
                                 timeout=900)


def _check(res: dict, case: dict) -> None:
    assert "error" not in res, res.get("error")
    assert res["finite"], f"NaN/inf in the output or a gradient (unwritten memory or a 0/0): {res}"
    assert res["o_dtype_ok"] and res["o_contiguous"] and res["o_shape_ok"] and res["grad_dtypes_ok"], res
    dtype = case["dtype"]
    # The named tolerance, or REF_FACTOR × the error of the reference itself run at the input dtype where that
    # is larger (an ill-conditioned quantity no float32 evaluation can get closer than that).
    errs = {k: (res[k], max(TOL_OUT[dtype] if k == "o" else TOL_GRAD[dtype], REF_FACTOR * res[k + "_ref"]))
            for k in ("o", "dq", "dk", "dv")}
    bad = {k: f"{e:.3g} > {t:.1g}" for k, (e, t) in errs.items() if not e <= t}
    assert not bad, f"relative RMS error vs the float64 reference: {bad} (all: {res})"


@pytest.mark.parametrize("name", list(CASES))
def test_parity_interpreter(interpreted, name):
    _check(interpreted["cases"][name], CASES[name])


def test_interpreter_extras(interpreted):
    extras = interpreted["extras"]
    assert "error" not in extras, extras
    assert all(extras.values()), extras


def test_kernels_never_import_nalasr(interpreted):
    assert interpreted["never_imports_nalasr"]


def test_package_imports_without_triton():
    """With triton unimportable, nalasr_kernels still imports, says HAS_TRITON = False and raises on use."""
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import nalasr_kernels as nk\n"
        "assert nk.HAS_TRITON is False\n"
        "try:\n    nk.nala_attention_triton(None, None, None)\nexcept ImportError:\n    print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "kernels"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("name", list(CASES))
def test_parity_cuda(name):
    # One fixed config (autotuning every dtype × head dim × RoPE × λ variant would compile hundreds of kernels);
    # the autotuned path at full size is benchmarks/gpu_kernels_check.py.
    case = {**CASES[name], "config": {**GPU_CONFIG, **{k: v for k, v in (CASES[name]["config"] or {}).items()
                                                      if k == "OFFS64"}}}
    _check(run_case(case, "cuda", ref_device="cuda"), case)


@pytest.mark.gpu
@needs_cuda
def test_extras_cuda():
    extras = run_extras("cuda")
    assert all(extras.values()), extras


@needs_cuda
def test_reduce_rr_stamps_cuda():
    """nala_rr's diagnostic stamps (benchmarks/reduce_tail_gpu.py) write every program's start, end and SM and leave
    the partial sums as they are, bit for bit."""
    sys.path.insert(0, str(ROOT / "kernels"))
    from nalasr_kernels import nala, nala_rr

    x = torch.randn(1, 9000, 4 * 64, device="cuda", dtype=torch.float16)
    k, v = (x[..., i * 64:(i + 1) * 64].view(1, 9000, 4, 16) for i in (1, 2))
    chunk, n_chunks = nala._plan(9000, 4, k.device, 16, nala_rr.TILE_TOKENS)
    parts = [torch.full((4 * n_chunks * nala._state_size(16, 16),), float("nan"), device="cuda") for _ in range(2)]
    times = torch.zeros(4 * n_chunks, 4, dtype=torch.int64, device="cuda")
    args = (9000, chunk, n_chunks, 1.0, 3.0, 3, True, False)
    nala_rr.launch(k, v, parts[0], *args)
    nala_rr.launch(k, v, parts[1], *args, times=times)
    assert torch.equal(parts[0], parts[1]) and not parts[0].isnan().any()
    t = times.cpu()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert (t[:, 0] > 0).all() and (t[:, 1] >= t[:, 0]).all() and ((t[:, 2] >= 0) & (t[:, 2] < sms)).all()


@pytest.fixture
def nala():
    """nalasr_kernels.nala for the tests of its host-side rules (skipped where Triton is not installed)."""
    if not _have_triton():
        pytest.skip("triton is not installed")
    sys.path.insert(0, str(ROOT / "kernels"))
    from nalasr_kernels import nala as module

    return module


@pytest.mark.parametrize("name", ["VEC4", "SPLIT", "ZACC", "ZDOT"])
def test_reduce_switches(monkeypatch, nala, name):
    """NALASR_REDUCE_VEC4 / _SPLIT / _ZACC / _ZDOT are on unless set to 0; any other value is refused with the
    variable's name."""
    var, rule = f"NALASR_REDUCE_{name}", getattr(nala, f"_reduce_{name.lower()}")
    monkeypatch.delenv(var, raising=False)
    assert rule()
    monkeypatch.setenv(var, "1")
    assert rule()
    monkeypatch.setenv(var, "0")
    assert not rule()
    monkeypatch.setenv(var, "on")
    with pytest.raises(ValueError, match=var):
        rule()


def test_map_f16_rule(monkeypatch, nala):
    """NALASR_MAP_F16: the map's float16 product where it would be tf32 without RoPE, unless set to 0 (float32
    inputs' tf32x3 and RoPE never); any other value is refused with the variable's name."""
    monkeypatch.delenv("NALASR_MAP_F16", raising=False)
    assert nala._map_f16("tf32", rope=False)
    assert not nala._map_f16("tf32x3", rope=False) and not nala._map_f16("tf32", rope=True)
    monkeypatch.setenv("NALASR_MAP_F16", "0")
    assert not nala._map_f16("tf32", rope=False)
    monkeypatch.setenv("NALASR_MAP_F16", "on")
    with pytest.raises(ValueError, match="NALASR_MAP_F16"):
        nala._map_f16("tf32", rope=False)


def test_map_half2_rule(monkeypatch, nala):
    """NALASR_MAP_HALF2: φq in float16 pairs for float16 queries with the float16 product, FASTMAG and |α| ≤ 1 (the
    angle polynomials' domain), unless set to 0; bfloat16 / float32 queries, |α| > 1 or no F16 / FASTMAG never."""
    monkeypatch.delenv("NALASR_MAP_HALF2", raising=False)
    q16, qb, q32 = (torch.zeros(1, 2, 1, 16, dtype=t) for t in (torch.float16, torch.bfloat16, torch.float32))
    assert nala._map_half2(q16, True, True, 1.0) and nala._map_half2(q16, True, True, -0.25)
    assert not nala._map_half2(qb, True, True, 1.0) and not nala._map_half2(q32, True, True, 1.0)
    assert not nala._map_half2(q16, False, True, 1.0) and not nala._map_half2(q16, True, False, 1.0)
    assert not nala._map_half2(q16, True, True, 1.0001) and not nala._map_half2(q16, True, True, 20.0)
    monkeypatch.setenv("NALASR_MAP_HALF2", "0")
    assert not nala._map_half2(q16, True, True, 1.0)
    monkeypatch.setenv("NALASR_MAP_HALF2", "on")
    with pytest.raises(ValueError, match="NALASR_MAP_HALF2"):
        nala._map_half2(q16, True, True, 1.0)


def test_map_pair_rule(monkeypatch, nala):
    """NALASR_MAP_PAIR: two heads a map program with HALF2, an even head count and D = DV = BD, by default for q whose
    token rows hold exactly its H·D elements, from 400K tokens of 4 heads (_PAIR_MIN_ROWS); =1 for any such q layout
    and size, =0 never; other values are refused."""
    monkeypatch.delenv("NALASR_MAP_PAIR", raising=False)
    monkeypatch.setattr(nala, "_PAIR_MIN_ROWS", 6)  # (token, head pair) rows: 3 tokens of 4 heads are 6
    dense = torch.zeros(1, 3, 4, 16)
    views = torch.zeros(1, 3, 4 * 64)[..., :64].view(1, 3, 4, 16)  # q of one (B, N, 4C) projection
    assert nala._map_pair(dense, True, 4, 16, 16, 16) and nala._map_pair(torch.zeros(3, 1, 4, 16), True, 4, 16, 16, 16)
    assert not nala._map_pair(dense[:, :2], True, 4, 16, 16, 16)  # 4 rows: below the size
    assert not nala._map_pair(views, True, 4, 16, 16, 16)
    assert not nala._map_pair(dense, False, 4, 16, 16, 16)  # no HALF2
    assert not nala._map_pair(torch.zeros(1, 3, 3, 16), True, 3, 16, 16, 16)  # odd head count
    assert not nala._map_pair(dense, True, 4, 16, 24, 32) and not nala._map_pair(dense, True, 4, 12, 12, 16)
    monkeypatch.setenv("NALASR_MAP_PAIR", "1")
    assert nala._map_pair(views, True, 4, 16, 16, 16) and not nala._map_pair(views, False, 4, 16, 16, 16)
    assert nala._map_pair(dense[:, :1], True, 4, 16, 16, 16)
    monkeypatch.setenv("NALASR_MAP_PAIR", "0")
    assert not nala._map_pair(dense, True, 4, 16, 16, 16)
    monkeypatch.setenv("NALASR_MAP_PAIR", "yes")
    with pytest.raises(ValueError, match="NALASR_MAP_PAIR"):
        nala._map_pair(dense, True, 4, 16, 16, 16)


def test_map_rr_rule(monkeypatch, nala):
    """NALASR_MAP_RR: the register map with HALF2's features for float16 q of 16 dims, an even head count, unit-stride
    dims, strides that are multiples of 4, 8-byte aligned data and int32 offsets, dense or the model's views, by default from
    _MAP_RR_MIN_ROWS (token, head pair) rows; =1 for any size, =0 never, anything else is refused."""
    monkeypatch.delenv("NALASR_MAP_RR", raising=False)
    monkeypatch.setattr(nala, "_MAP_RR_MIN_ROWS", 6)  # 3 tokens of 4 heads
    dense = torch.zeros(1, 3, 4, 16, dtype=torch.float16)
    views = torch.zeros(1, 3, 4 * 64, dtype=torch.float16)[..., 64:128].view(1, 3, 4, 16)  # k of one projection
    o = torch.zeros(1, 3, 4, 16, dtype=torch.float16)
    assert nala._map_rr(dense, o, True) and nala._map_rr(views, o, True)
    monkeypatch.setattr(nala, "_CONFIG", {"OFFS64": True})  # offsets past int32 (as the tests force them)
    assert not nala._map_rr(dense, o, True)
    monkeypatch.setattr(nala, "_CONFIG", None)
    assert not nala._map_rr(dense, o, False)  # no HALF2
    assert not nala._map_rr(dense.float(), o, True)
    assert not nala._map_rr(torch.zeros(1, 3, 3, 16, dtype=torch.float16), torch.zeros(1, 3, 3, 16), True)  # odd H
    assert not nala._map_rr(torch.zeros(1, 3, 2, 8, dtype=torch.float16), torch.zeros(1, 3, 2, 8), True)  # D = 8
    d_strided = torch.zeros(1, 3, 16, 4, dtype=torch.float16).transpose(2, 3)
    assert not nala._map_rr(d_strided, o, True)
    odd_rows = torch.zeros(1, 3, 4 * 16 + 2, dtype=torch.float16)[..., :64].view(1, 3, 4, 16)  # token stride 66
    assert not nala._map_rr(odd_rows, o, True)
    shifted = torch.zeros(4 + 3 * 64, dtype=torch.float16)[2:2 + 3 * 64].view(1, 3, 4, 16)  # 4-byte aligned data
    assert not nala._map_rr(shifted, o, True)
    assert not nala._map_rr(dense, o.transpose(1, 2).contiguous().transpose(1, 2), True)  # o not contiguous
    assert not nala._map_rr(dense[:, :2], o[:, :2], True)  # 4 rows: below the size
    monkeypatch.setenv("NALASR_MAP_RR", "1")
    assert nala._map_rr(dense[:, :2], o[:, :2], True) and not nala._map_rr(dense[:, :2], o[:, :2], False)
    monkeypatch.setenv("NALASR_MAP_RR", "0")
    assert not nala._map_rr(dense, o, True)
    monkeypatch.setenv("NALASR_MAP_RR", "on")
    with pytest.raises(ValueError, match="NALASR_MAP_RR"):
        nala._map_rr(dense, o, True)


def _check_register_switch(monkeypatch, nala, var: str, taken) -> None:
    """A register pass's switch ``var`` on a case its rule takes (``taken()``: the rule's answer): taken by default and
    at 1, not at 0 nor with offsets past int32 (as the tests force them), any other value refused with the variable's
    name. Leaves ``var`` at 1 for the caller's refusals."""
    monkeypatch.delenv(var, raising=False)
    assert taken()
    monkeypatch.setattr(nala, "_CONFIG", {"OFFS64": True})
    assert not taken()
    monkeypatch.setattr(nala, "_CONFIG", None)
    monkeypatch.setenv(var, "on")
    with pytest.raises(ValueError, match=var):
        taken()
    monkeypatch.setenv(var, "0")
    assert not taken()
    monkeypatch.setenv(var, "1")
    assert taken()


def test_bwd_key_rr_rule(monkeypatch, nala):
    """The backward's key pass from registers where _bwd_key takes float16 products (F16), without RoPE or the clamp,
    for float16 k, v of 16 dims with strides that are multiples of 4, 8-byte aligned data and int32 offsets: by
    default and at NALASR_BWD_KEY_RR=1, never at 0; anything else is refused."""
    k = torch.zeros(1, 3, 4 * 64, dtype=torch.float16)[..., 64:128].view(1, 3, 4, 16)
    d = torch.zeros(1, 3, 4, 16, dtype=torch.float16)
    _check_register_switch(monkeypatch, nala, "NALASR_BWD_KEY_RR",
                           lambda: nala._bwd_key_rr(k, k, d, d, True, False, False))
    assert not nala._bwd_key_rr(k, k, d, d, False, False, False)  # tf32 products
    assert not nala._bwd_key_rr(k, k, d, d, True, True, False)  # the clamp
    assert not nala._bwd_key_rr(k, k, d, d, True, False, True)  # RoPE
    assert not nala._bwd_key_rr(k.float(), k.float(), d.float(), d.float(), True, False, False)
    odd = torch.zeros(1, 3, 4 * 16 + 2, dtype=torch.float16)[..., :64].view(1, 3, 4, 16)  # token stride 66
    assert not nala._bwd_key_rr(odd, odd, d, d, True, False, False)


def test_bwd_query_rr_rule(monkeypatch, nala):
    """The backward's query pass from registers where _bwd_query takes float16 products (F16) and MPOW, without RoPE
    or the clamp, for float16 q, ∂L/∂o of 16 dims with strides that are multiples of 4, 8-byte aligned data and int32
    offsets: by default and at NALASR_BWD_QUERY_RR=1, never at 0; anything else is refused."""
    q = torch.zeros(1, 3, 4 * 64, dtype=torch.float16)[..., :64].view(1, 3, 4, 16)
    do = torch.zeros(1, 4, 3, 16, dtype=torch.float16).transpose(1, 2)  # head-major ∂L/∂o, as autograd may give
    dq = torch.zeros(1, 3, 4, 16, dtype=torch.float16)
    _check_register_switch(monkeypatch, nala, "NALASR_BWD_QUERY_RR",
                           lambda: nala._bwd_query_rr(q, do, dq, True, True, False, False))
    assert not nala._bwd_query_rr(q, do, dq, False, True, False, False)  # tf32 products
    assert not nala._bwd_query_rr(q, do, dq, True, False, False, False)  # no MPOW (λτ ≤ 1 or float32 math)
    assert not nala._bwd_query_rr(q, do, dq, True, True, True, False)  # the clamp
    assert not nala._bwd_query_rr(q, do, dq, True, True, False, True)  # RoPE
    assert not nala._bwd_query_rr(q.float(), do.float(), dq.float(), True, True, False, False)
    odd = torch.zeros(1, 3, 4 * 16 + 2, dtype=torch.float16)[..., :64].view(1, 3, 4, 16)  # token stride 66
    assert not nala._bwd_query_rr(odd, do, dq, True, True, False, False)
    assert not nala._bwd_query_rr(q, odd, dq, True, True, False, False)
    assert not nala._bwd_query_rr(q, do, dq.transpose(1, 2).contiguous().transpose(1, 2), True, True, False, False)


def test_bwd_query_rules(monkeypatch, nala):
    """NALASR_BWD_DZACC: on unless set to 0; NALASR_BWD_MPOW: on for 16-bit inputs (APPROX) with λτ > 1 (p > 1, where
    |dir|^(p−1) is 0 at dir = 0) unless set to 0, never for float32; NALASR_BWD_F16: on for float16 inputs of the
    centred backward unless set to 0, never for bfloat16 or float32 or uncentred; any other value is refused with the
    variable's name."""
    for var in ("NALASR_BWD_DZACC", "NALASR_BWD_MPOW", "NALASR_BWD_F16"):
        monkeypatch.delenv(var, raising=False)
    h, b, f = (torch.zeros(1, 2, 1, 16, dtype=t) for t in (torch.float16, torch.bfloat16, torch.float32))
    assert nala._bwd_dzacc() and nala._bwd_mpow(True, 3.0, 0.5) and not nala._bwd_mpow(False, 3.0, 0.5)
    assert not nala._bwd_mpow(True, 2.0, 0.5) and nala._bwd_mpow(True, 2.5, 0.5)  # λτ = 1: p = 1 at q = 0
    assert nala._bwd_f16(True, h, h) and not nala._bwd_f16(False, h, h)
    assert not nala._bwd_f16(True, h, b) and not nala._bwd_f16(True, b, b) and not nala._bwd_f16(True, f, f)
    for var in ("NALASR_BWD_DZACC", "NALASR_BWD_MPOW", "NALASR_BWD_F16"):
        monkeypatch.setenv(var, "0")
    assert not nala._bwd_dzacc() and not nala._bwd_mpow(True, 3.0, 0.5) and not nala._bwd_f16(True, h, h)
    rules = (("NALASR_BWD_DZACC", nala._bwd_dzacc), ("NALASR_BWD_MPOW", lambda: nala._bwd_mpow(True, 3.0, 0.5)),
             ("NALASR_BWD_F16", lambda: nala._bwd_f16(True, h)))
    for var, rule in rules:
        monkeypatch.setenv(var, "yes")
        with pytest.raises(ValueError, match=var):
            rule()


def test_clamp_rule(nala):
    """The kernels clamp θ only for |α| > 4, where tanh(α·dir) can pass Θ/(π/4) (nala._clamp)."""
    assert [nala._clamp(a) for a in (1.0, 4.0, -4.0, 4.01, -20.0, 0.0)] == [False, False, False, True, True, False]


def test_fastmag_rule(nala):
    """The map's m_q from α·dir (nala_math._query_mag_fwd) only with approximate math, λτ ≥ 1.5 and |α| within
    2^-20 .. 2^20, where log2|α| is finite and α·dir keeps what |dir|^p needs (α = 0 takes the other path)."""
    ok = [nala._fastmag(True, 3.0, 0.5, a) for a in (1.0, -20.0, 2.0**-20, 2.0**20, 0.0, 2.0**-21, 2.0**21)]
    assert ok == [True, True, True, True, False, False, False]
    assert not nala._fastmag(False, 3.0, 0.5, 1.0) and not nala._fastmag(True, 2.0, 0.5, 1.0)


def test_half2_angle_polynomials(nala):
    """HALF2's angle polynomials (nalasr_kernels.half2._F, _G, their float16 bits in _F_HEX, _G_HEX) evaluated in
    float16 with a rounding a step, as the kernel's HFMA2s do, over every float16 x in [−1, 1]: cos / sin((π/4)·tanh x)
    within 3.4e-4 / 5.4e-4 at most and an RMS of 1e-4 / 6e-5, against float16's own rounding of the exact values,
    2.4e-4 at most (any one coefficient 0.4% off fails)."""
    import numpy as np

    from nalasr_kernels import half2

    assert [int(h, 16) for h in half2._F_HEX + half2._G_HEX] == [
        int(np.float16(c).view(np.uint16)) for c in half2._F + half2._G]
    bits = np.arange(0, 0x3C01, dtype=np.uint16).view(np.float16).astype(np.float64)
    x = np.concatenate([-bits[::-1], bits])
    theta = np.pi / 4 * np.tanh(x)

    def r16(v):
        return v.astype(np.float16).astype(np.float64)

    q = r16(x * x)
    c = np.full_like(x, half2._F[4])
    for k in (3, 2, 1, 0):
        c = r16(c * q + half2._F[k])
    t = np.full_like(x, half2._G[3])
    for k in (2, 1, 0):
        t = r16(t * q + half2._G[k])
    s = r16(t * x)
    ec, es = c - np.cos(theta), s - np.sin(theta)
    assert np.abs(ec).max() < 3.4e-4 and np.abs(es).max() < 5.4e-4
    assert np.sqrt((ec ** 2).mean()) < 1e-4 and np.sqrt((es ** 2).mean()) < 6e-5


@pytest.mark.parametrize("name", ["BWD_QUERY", "BWD_KEY"])
def test_eye_switches(monkeypatch, nala, name):
    """NALASR_EYE_BWD_QUERY / _BWD_KEY: on for 16-bit tiles unless set to 0, never for float32 (the t·I product
    would be tf32); any other value is refused with the variable's name."""
    var = f"NALASR_EYE_{name}"
    half, bf, full = (torch.zeros(1, dtype=t) for t in (torch.float16, torch.bfloat16, torch.float32))
    monkeypatch.delenv(var, raising=False)
    assert nala._eye(name.lower(), half, half) and nala._eye(name.lower(), bf, bf)
    assert not nala._eye(name.lower(), half, full)
    monkeypatch.setenv(var, "0")
    assert not nala._eye(name.lower(), half, half)
    monkeypatch.setenv(var, "yes")
    with pytest.raises(ValueError, match=var):
        nala._eye(name.lower(), half, half)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        _worker(sys.argv[2])
    else:
        sys.exit("usage: test_kernels.py --worker OUT.json (run by the tests under TRITON_INTERPRET=1)")


def test_approx_math_rule(monkeypatch, nala):
    """APPROX (tanh.approx, shorter sin/cos series) exactly when every input is 16-bit; the env var forces it."""
    _approx_math = nala._approx_math

    h, b, f = (torch.zeros(1, dtype=t) for t in (torch.float16, torch.bfloat16, torch.float32))
    monkeypatch.delenv("NALASR_APPROX_MATH", raising=False)
    assert _approx_math(h, h, h) and _approx_math(b, b, b) and _approx_math(h, b, h)
    assert not _approx_math(f, f, f) and not _approx_math(h, h, f) and not _approx_math(h, h, h, rope=True)
    monkeypatch.setenv("NALASR_APPROX_MATH", "0")
    assert not _approx_math(h, h, h)
    monkeypatch.setenv("NALASR_APPROX_MATH", "1")
    assert _approx_math(f, f, f) and not _approx_math(h, h, h, rope=True)
    monkeypatch.setenv("NALASR_APPROX_MATH", "yes")
    with pytest.raises(ValueError, match="NALASR_APPROX_MATH"):
        _approx_math(h)


def test_reduce_rr_rule(monkeypatch, nala):
    """NALASR_REDUCE_RR: the register reduce for 16-bit k, v of 16 dims with unit-stride dims, even strides, 4-byte
    aligned data and whole tiles a chunk, where _fwd_reduce would take tf32 products without RoPE; 0 keeps
    _fwd_reduce, anything else but 1 is refused."""
    from nalasr_kernels import nala_rr

    monkeypatch.delenv("NALASR_REDUCE_RR", raising=False)
    k = torch.zeros(2, 64, 4, 16, dtype=torch.float16)
    assert nala._reduce_rr(k, k, False, "tf32", False, 256)
    assert nala._reduce_rr(k.bfloat16(), k.bfloat16(), False, "tf32", False, 256)
    assert not nala._reduce_rr(k, k, True, "tf32", False, 256)  # RoPE
    assert not nala._reduce_rr(k, k, False, "tf32x3", False, 256)
    assert not nala._reduce_rr(k, k, False, "tf32", True, 256)  # 64-bit offsets
    assert not nala_rr.usable(k.float(), k.float(), 256)
    assert not nala_rr.usable(k, k.bfloat16(), 256)
    assert not nala_rr.usable(k[..., :8], k[..., :8], 256)  # D = 8
    assert not nala_rr.usable(k, k, 48)  # not whole 32-token tiles
    d_strided = torch.zeros(2, 64, 16, 4, dtype=torch.float16).transpose(2, 3)
    assert not nala_rr.usable(d_strided, d_strided, 256)
    shifted = torch.zeros(1 + 64 * 4 * 16, dtype=torch.float16)[1:].view(1, 64, 4, 16)  # 2-byte aligned data
    assert not nala_rr.usable(shifted, shifted, 256)
    monkeypatch.setenv("NALASR_REDUCE_ZDOT", "0")  # the register reduce is ZDOT's z: off with it
    assert not nala._reduce_rr(k, k, False, "tf32", False, 256)
    monkeypatch.delenv("NALASR_REDUCE_ZDOT")
    monkeypatch.setenv("NALASR_REDUCE_RR", "0")
    assert not nala._reduce_rr(k, k, False, "tf32", False, 256)
    monkeypatch.setenv("NALASR_REDUCE_RR", "on")
    with pytest.raises(ValueError, match="NALASR_REDUCE_RR"):
        nala._reduce_rr(k, k, False, "tf32", False, 256)


def test_strided_rule(monkeypatch, nala):
    """NALASR_STRIDED_<PASS>: tile-strided chunks at 1, contiguous at 0, nala._STRIDED when unset; anything else is
    refused with the variable's name."""
    for name in nala._STRIDED:
        var = f"NALASR_STRIDED_{name.upper()}"
        monkeypatch.delenv(var, raising=False)
        assert nala._strided(name) is nala._STRIDED[name]
        for value, taken in (("1", True), ("0", False)):
            monkeypatch.setenv(var, value)
            assert nala._strided(name) is taken
        monkeypatch.setenv(var, "yes")
        with pytest.raises(ValueError, match=var):
            nala._strided(name)


def test_pdl_rule(monkeypatch, nala):
    """NALASR_PDL: programmatic dependent launch on sm_90+ CUDA devices unless set to 0, never on the CPU or under
    the interpreter; any other value is refused with the variable's name wherever it runs."""
    cpu = torch.device("cpu")
    for value in (None, "1", "0"):
        if value is None:
            monkeypatch.delenv("NALASR_PDL", raising=False)
        else:
            monkeypatch.setenv("NALASR_PDL", value)
        assert not nala._pdl(cpu)
    monkeypatch.setenv("NALASR_PDL", "yes")
    with pytest.raises(ValueError, match="NALASR_PDL"):
        nala._pdl(cpu)
    assert nala._pdl_kw(False) == {} and nala._pdl_kw(True) == {"launch_pdl": True}


def test_plans(monkeypatch, nala):
    """The passes' chunk plans on the H200's 132 SMs at 518,400 tokens of 4 heads (the numbers the session 20 notes
    quote), the 256-token minimum at small sizes, and for any size whole chunks of the quantum that cover the tokens
    with no empty chunk."""
    monkeypatch.setattr(nala, "_sms", lambda device: 132)
    dev = torch.device("cuda")
    pp = nala._PROGRAMS_PER_SM
    assert nala._plan(518_400, 4, dev, pp["fwd_reduce"], 32) == (992, 523)  # 2,092 one-warp programs of 2,112
    assert nala._plan(518_400, 4, dev, pp["fwd_reduce"]) == (1024, 507)  # the 256-token rounding of before
    assert nala._plan(518_400, 4, dev, pp["bwd_query"], nala._BWD_QUERY_QUANTUM) == (1984, 262)
    assert nala._plan(518_400, 4, dev, pp["bwd_key"], nala._BWD_KEY_QUANTUM) == (1984, 262)
    assert nala._plan(518_400, 4, dev, pp["fwd_map"], nala._FWD_MAP_QUANTUM) == (448, 1158)  # 2.92 waves of 1,584
    # HALF2's map: 3,600 programs, 1.95 waves of its 14 programs an SM (1,848)
    assert nala._plan(518_400, 4, dev, pp["fwd_map_half2"], nala._FWD_MAP_QUANTUM) == (576, 900)
    # the map over head pairs: 2,026 one-warp programs in one wave of 2,112 (16 an SM)
    assert nala._plan(518_400, 2, dev, pp["fwd_map_pair"], nala._FWD_MAP_PAIR_QUANTUM) == (512, 1013)
    assert nala._plan(4096, 4, dev, pp["fwd_reduce"], 32) == (256, 16)
    assert nala._plan(4096, 4, dev, pp["fwd_reduce"], 32, nala._FWD_REDUCE_MIN_CHUNK) == (128, 32)  # its own
    # a pass's own smallest chunk (the map passes' _MIN_CHUNK knobs): 4K tokens in 64 chunks of 64, not 16 of 256
    assert nala._plan(4096, 4, dev, pp["fwd_map_half2"], 64, minimum=64) == (64, 64)
    assert nala._plan(4096, 4, dev, pp["fwd_map_half2"], 64) == (256, 16)
    assert nala._plan(4096, 4, dev, pp["fwd_map_half2"], 64, nala._FWD_MAP_MIN_CHUNK) == (128, 32)  # the map's own
    assert nala._plan(49_152, 4, dev, pp["fwd_map_half2"], 64, nala._FWD_MAP_MIN_CHUNK) == (128, 384)
    for n in (1, 37, 255, 256, 257, 49_152, 518_401, 1_048_576):
        for bh in (1, 4, 128):
            for quantum in (32, 64, 256):
                chunk, n_chunks = nala._plan(n, bh, dev, 16, quantum)
                assert chunk % quantum == 0 and chunk >= nala._MAX_BLOCK_N
                assert (n_chunks - 1) * chunk < n <= n_chunks * chunk, (n, bh, quantum)
