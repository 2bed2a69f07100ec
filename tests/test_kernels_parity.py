"""Parity of the fused Triton NaLa kernels (nalasr_kernels.nala) with the reference (nalasr.ops.nala, the source of truth).

Every case compares the output AND the gradients of q, k, v with the reference evaluated in float64 on the very
same input values, as a relative RMS error ‖got − ref‖₂ / ‖ref‖₂ against a named tolerance per dtype. Cases cover
odd token counts (tails), head dims that are not powers of two, batch > 1, several heads, RoPE, strided inputs
(the model's views of one Linear output, head-major, a non-unit stride along D), an all-zero query vector (no
NaN), θ's clamp, non-integer λ, large and offset values, and every buffer the kernels write pre-filled with NaN
(plan.OUT_FILL) so an element that is never written fails. Each kernel variant the plan can choose runs in some
case: the float16 16-dim cases on the model's views take the register passes (the map's from its size threshold,
lowered for those cases), bfloat16 / float32 / RoPE / clamp / other head dims the tl.dot passes.

Where the cases run:
- CPU (always): one subprocess under TRITON_INTERPRET=1 runs every case and reports JSON; each case is then its
  own test here. The variable must be set before Triton is imported and must not leak into the rest of the suite
  (a later CUDA run in the same process would silently interpret), hence the subprocess. Tiny launch configs
  (plan.TEST_CONFIG: BLOCK_N=16, CHUNK=32) give several chunks and ragged tails even at N = 37.
- CUDA (``-m gpu``, when a device is present): the same cases in-process on the GPU. Full-size checks (N up to
  518400) are in benchmarks/gpu_kernels_check.py.
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
# Or this factor times the error of the reference itself at the input dtype, where that is larger.
REF_FACTOR = 4.0
# Two runs that sum the same terms in another float32 order (and the float16 output flips that causes).
ORDER_TOL = {"float16": 1e-4, "float32": 1e-5}

SMALL = {"BLOCK_N": 16, "CHUNK": 32, "num_warps": 1}  # several chunks and ragged tails at small N
GPU_CONFIG = {"BLOCK_N": 32, "CHUNK": 64, "num_warps": 4}
# Two 16-token groups per tile in bwd_query's reduce products (device.reduce_dot; SMALL's 16-token tiles are one
# group), two tiles per chunk; at N = 150 the last tile's second group holds 6 tokens.
GROUPED = {"BLOCK_N": 32, "CHUNK": 64, "num_warps": 2}
# plan thresholds a case lowers so that a variant chosen from a size on runs at a test's size
REGISTER_MAP = {"MAP_RR_MIN_ROWS": 0}
PAIR_MAP = {"PAIR_MIN_ROWS": 0, "MAP_RR_MIN_ROWS": 1 << 62}

# ------------------------------------------------------------------------------------------------------ cases


# Every key _make and run_case read; a case overrides some (benchmarks/gpu_kernels_check.py builds its cases on it).
CASE_DEFAULTS = dict(B=2, N=37, H=2, D=16, DV=None, dtype="float32", rope=None, params=None, layout="contiguous",
                     zero_q=True, scale=1.0, v_shift=0.0, q_ramp=False, config=SMALL, plan={}, expect=None)


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
        "offsets64-fp16": dict(dtype="float16", N=33, H=2, layout="qkvg", config={**SMALL, "OFFS64": True},
                               expect=("fwd_reduce", "fwd_map_half2", "bwd_query", "bwd_key")),
        "fp16-large-values": dict(dtype="float16", scale=30.0, N=64, layout="qkvg"),
        # α = 20 without RoPE: the clamp and its gradient mask in the approximate-math kernels (16-bit inputs
        # without RoPE), which leave both out for |α| ≤ 4 (plan.clamp).
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
        # float16 q, k, v as separate contiguous tensors of an even head count: the map over head pairs (from 400K
        # tokens of 4 heads of 32 dims by itself), on its own launch path (a ragged second chunk) and on SMALL's tiles.
        "fp16-pair": dict(dtype="float16", N=301, H=4, config=None, plan=PAIR_MAP,
                          expect=("fwd_reduce_rr", "fwd_map_pair", "bwd_query_rr", "bwd_key_rr")),
        "fp16-pair-small": dict(dtype="float16", N=37, H=2, plan=PAIR_MAP,
                                expect=("fwd_reduce_rr", "fwd_map_pair", "bwd_query_rr", "bwd_key_rr")),
        "fp16-pair-d32": dict(dtype="float16", D=32, N=70, H=2, plan=PAIR_MAP, zero_q=False,
                              expect=("fwd_reduce", "fwd_map_pair", "bwd_query", "bwd_key")),
        # The model's case, every pass from registers (the register map from 49K tokens of 4 heads by itself, here
        # at 301 tokens): dense q of 4 heads (2 head pairs, a ragged last tile) and the model's views.
        "fp16-map-rr": dict(dtype="float16", N=301, H=4, config=None, plan=REGISTER_MAP,
                            expect=("fwd_reduce_rr", "fwd_map_rr", "bwd_query_rr", "bwd_key_rr")),
        "fp16-model-views": dict(dtype="float16", N=77, H=2, layout="qkvg", plan=REGISTER_MAP,
                                 expect=("fwd_reduce_rr", "fwd_map_rr", "bwd_query_rr", "bwd_key_rr")),
        # Queries whose 1/den grows along the tokens so that later tiles raise the register query pass's dS operand
        # scale (a chunk's earlier terms rescaled), a ragged last tile.
        "fp16-bwd-query-rr-ramp": dict(dtype="float16", N=77, H=2, layout="qkvg", q_ramp=True,
                                       expect=("fwd_reduce_rr", "fwd_map_half2", "bwd_query_rr", "bwd_key_rr")),
        "bf16-model-views": dict(dtype="bfloat16", N=77, H=2, layout="qkvg",
                                 expect=("fwd_reduce_rr", "fwd_map", "bwd_query", "bwd_key")),
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


@contextlib.contextmanager
def planned(config: dict | None, thresholds: dict | None = None, fill: float | None = float("nan")):
    """The block with plan.TEST_CONFIG = config, plan.OUT_FILL = fill and the plan's thresholds overridden."""
    from nalasr_kernels.nala import plan

    with mock.patch.multiple(plan, TEST_CONFIG=config, OUT_FILL=fill, **(thresholds or {})):
        yield


@contextlib.contextmanager
def recorded_plans() -> list:
    """The block's forward and backward plans, as binding made them."""
    from nalasr_kernels.nala import binding

    plans: list = []
    real_f, real_b = binding.forward_plan, binding.backward_plan

    def fwd(*a, **kw):
        plans.append(real_f(*a, **kw))
        return plans[-1]

    def bwd(*a, **kw):
        plans.append(real_b(*a, **kw))
        return plans[-1]

    with mock.patch.object(binding, "forward_plan", fwd), mock.patch.object(binding, "backward_plan", bwd):
        yield plans


def run_case(case: dict, device: str, seed: int = 0, ref_device: str = "cpu") -> dict:
    """Kernel vs float64 reference (on ref_device) for one case: relative RMS errors and contract checks."""
    from nalasr.ops.nala import NalaParams, nala_attention_reference
    from nalasr_kernels.nala import nala_attention_triton

    params = NalaParams(**case["params"]) if case["params"] else None
    rope = tuple(case["rope"]) if case["rope"] else None
    q, k, v, g, _ = _make(case, device, seed)
    for t in (q, k, v):
        t.retain_grad()
    with planned(case["config"], case["plan"]), recorded_plans() as plans:
        o = nala_attention_triton(q, k, v, params, rope)
        o.backward(g)
    variants = [plans[0].reduce.variant, plans[0].map.variant, plans[1].query.variant, plans[1].key.variant]
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
        "variants": variants,
    }


def _batch3_runs(dtype: str, device: str, ctx_of_run, **case) -> list[float]:
    """batch3 (or batch3 with ``case``'s fields) twice, run r inside ``ctx_of_run(r)``: the relative errors of the
    second run's output and leaf gradient against the first's (NaN-filled buffers, the GPU's tf32 rounding on CPU)."""
    from nalasr_kernels.nala import nala_attention_triton

    runs = []
    for r in range(2):
        q, k, v, g, leaves = _make({**CASES["batch3"], **case, "dtype": dtype, "config": None}, device, seed=5)
        tf32 = tf32_dots_in_interpreter() if device == "cpu" else contextlib.nullcontext()
        with ctx_of_run(r), tf32, planned(None):
            o = nala_attention_triton(q, k, v)
            o.backward(g)
        runs.append([o.detach().float()] + [t.grad.float() for t in leaves])
    return [rel_err(b, a) for a, b in zip(*runs)]


def run_extras(device: str) -> dict:
    """Checks beyond parity: determinism, argument validation, the device math, the naive reference."""
    from nalasr.ops.nala import NalaParams, nala_attention_reference
    from nalasr_kernels.nala import nala_attention_naive, nala_attention_triton

    out: dict = {}
    # Bitwise reproducible: the partial sums are combined in a fixed order (no atomics).
    errs = _batch3_runs("float16", device, lambda r: contextlib.nullcontext())
    out["deterministic"] = max(errs) == 0.0
    # Validation: clear errors for what the kernel does not take.
    x = torch.zeros(1, 4, 1, 16, device=device)
    bad = {
        "shape": lambda: nala_attention_triton(x, x[:, :3], x),
        "dtype": lambda: nala_attention_triton(x.double(), x.double(), x.double()),
        "head_dim": lambda: nala_attention_triton(*(torch.zeros(1, 4, 1, 72, device=device),) * 3),
        "rope_hw": lambda: nala_attention_triton(x, x, x, None, (3, 2)),
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
    # θ's clamp, left out for |α| ≤ 4 (plan.clamp; batch3 has α = 1), cannot bind there: forced on, the output is the
    # same bit for bit (the one-head map either way: the register map's threshold out of reach). A clamp that did
    # bind would be off by O(1).
    for dtype in ("float16", "float32"):
        no_rr = {"MAP_RR_MIN_ROWS": 1 << 62}
        errs = _batch3_runs(dtype, device, lambda r: planned(None, {**no_rr, "CLAMP_FREE": -1.0} if r else no_rr))
        out[f"clamp_noop_{dtype}"] = errs[0] == 0.0
    # The float16 products scale S into float16's range: inputs ×30 (S ~ 1e6, past float16's 65504) and
    # ×0.02 (S ~ 1e-7, float16 subnormals) give the output the same inputs in float32 give.
    for name, scale in (("large", 30.0), ("small", 0.02)):
        q, k, v, _, _ = _make({**CASES["batch3"], "dtype": "float16", "scale": scale, "config": None}, device, seed=6)
        with torch.no_grad(), planned(None, REGISTER_MAP):
            o16 = nala_attention_triton(q, k, v)
            o32 = nala_attention_triton(q.float(), k.float(), v.float())
        out[f"map_f16_{name}_inputs"] = rel_err(o16, o32) <= TOL_OUT["float16"]
    # params=None means the reference defaults; an object with the four attributes works too.
    q, k, v, _, _ = _make({**CASES["d8-dv5"], "config": None}, device, seed=4)
    with torch.no_grad():
        a = nala_attention_triton(q, k, v)

        class P:
            lam, tau, alpha, eps = 3.0, 0.5, 1.0, 1e-6

        b = nala_attention_triton(q, k, v, P())
    out["params_default"] = torch.equal(a, b)
    out.update(_launch_config_extras(device))
    # The naive reference beside the kernel is the model's reference, with and without RoPE, in float64.
    for name, case in (("rope", "alpha20-lam2"), ("plain", "lam2.5-bigeps")):
        c = CASES[case]
        q, k, v, _, _ = _make({**c, "dtype": "float32"}, device, seed=7)
        q, k, v = (t.detach().double() for t in (q, k, v))
        p = NalaParams(**c["params"])
        rope = tuple(c["rope"]) if c["rope"] else None
        out[f"naive_reference_{name}"] = rel_err(nala_attention_naive(q, k, v, p, rope),
                                                 nala_attention_reference(q, k, v, p, rope)) < 1e-6
    return out


def _launch_config_extras(device: str) -> dict:
    """The tl.dot passes launch with the plan's config, configs.launch_config's (no autotuner, no TEST_CONFIG):
    recorded through binding.TUNE (which then launches as binding does) on cases of every tl.dot pass and kind, the
    same output and gradients bit for bit as the plain launch. And the opt-in autotuner (nala.tuning, what
    benchmarks/kernel_configs.py runs) with a fake timer: a pick per pass, the fastest config of its pruned space,
    gradients within tolerance, binding.TUNE None again after it."""
    from nalasr_kernels.nala import binding, configs, nala_attention_triton, plan, tuning

    out: dict = {}

    def run(name: str, seed: int) -> list:
        q, k, v, g, leaves = _make({**CASES[name], "config": None}, device, seed=seed)
        with planned(None):
            o = nala_attention_triton(q, k, v, None, tuple(CASES[name]["rope"]) if CASES[name]["rope"] else None)
            o.backward(g)
        return [o.detach()] + [t.grad for t in leaves]

    def kind(pass_: str, meta: dict) -> str:
        return {"fwd_map": configs.map_kind(meta.get("F16", False)),
                "bwd_query": configs.query_kind(meta.get("EYE", False))}.get(pass_, "")

    launched: list = []

    def record(pass_, kernel, cfg, bucket, grid, args, meta):
        launched.append((pass_, kind(pass_, meta), max(meta["BD"], meta["BDV"]), bucket, cfg))
        kernel[grid](*args, **meta, **cfg.kwargs(compiled=not binding.INTERPRET))

    same, table, seen = True, True, set()
    for seed, name in enumerate(("bfloat16-N130-H1-D24-qkvg-rope", "float32-N130-H1-D24-qkvg-rope", "d8-dv5",
                                 "bf16-model-views")):
        plain = run(name, seed)
        launched.clear()
        with mock.patch.object(binding, "TUNE", record):
            recorded = run(name, seed)
        same &= all(torch.equal(a, b) for a, b in zip(plain, recorded))
        c = CASES[name]
        bucket = plan.pow2(c["B"] * c["N"] * c["H"])
        table &= bool(launched) and all(b == bucket and cfg == configs.launch_config(p, kd, bd, b)
                                        for p, kd, bd, b, cfg in launched)
        seen |= {(p, kd) for p, kd, *_ in launched}
    out["launch_config_is_the_tables"] = table
    out["launch_config_output_unchanged"] = same
    out["launch_config_every_pass_kind"] = seen == {(p, kd) for p in configs.PASSES for kd in configs.kinds(p)}
    # the autotuner, timed by a fake: the n-th config benchmarked takes n ms, so the first one kept is the pick
    ticks = iter(range(1, 1 << 30))

    def fake_bench(fn, quantiles):
        t = float(next(ticks))
        return [t, t, t]

    plain = run("d8-dv5", 9)
    with tuning.autotuning(bench=fake_bench) as tuner:
        assert binding.TUNE is tuner
        tuned = run("d8-dv5", 9)
    picks = list(tuner.picks.values())
    ok = binding.TUNE is None and sorted(p.pass_ for p in picks) == sorted(configs.PASSES)
    for p in picks:
        kept = [cfg for cfg in tuning.space(p.pass_)
                if configs.per_thread(cfg, p.bd) <= configs.PER_THREAD_LIMIT[p.pass_]]
        ok &= list(p.times_ms) == kept and p.best == kept[0] and p.table == configs.launch_config(
            p.pass_, p.kind, p.bd, p.bucket)
    out["autotuner_tool_picks"] = ok
    out["autotuner_tool_output"] = all(rel_err(b, a) <= TOL_GRAD["float32"] for a, b in zip(plain, tuned))
    return out


def _worker(out_path: str) -> None:
    """Runs in the TRITON_INTERPRET=1 subprocess: every case on CPU, one JSON file back."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    sys.path.insert(0, str(ROOT / "kernels"))
    sys.path.insert(0, str(ROOT))
    import nalasr_kernels.nala  # noqa: F401  (before nalasr: it must not pull nalasr in)

    res: dict = {"never_imports_nalasr": "nalasr" not in sys.modules, "cases": {}}
    torch.set_num_threads(1)
    only = sys.argv[2:-1]
    for name, case in CASES.items():
        if only and name not in only:
            continue
        try:
            with tf32_dots_in_interpreter():  # the GPU's tf32 operand rounding, so precision defects show here too
                res["cases"][name] = run_case(case, "cpu")
        except Exception as e:  # one broken case must not hide the others
            res["cases"][name] = {"error": f"{type(e).__name__}: {e}"}
    if not only:
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
    res, case = interpreted["cases"][name], CASES[name]
    _check(res, case)
    if case["expect"]:
        assert tuple(res["variants"]) == case["expect"], res["variants"]


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
    # One fixed config for the tl.dot passes (autotuning every dtype × head dim × RoPE × λ variant would compile
    # hundreds of kernels); the autotuned path at full size is benchmarks/gpu_kernels_check.py.
    case = {**CASES[name], "config": {**GPU_CONFIG, **{k: v for k, v in (CASES[name]["config"] or {}).items()
                                                      if k == "OFFS64"}}}
    res = run_case(case, "cuda", ref_device="cuda")
    _check(res, case)
    if case["expect"]:
        assert tuple(res["variants"]) == case["expect"], res["variants"]


@pytest.mark.gpu
@needs_cuda
def test_extras_cuda():
    extras = run_extras("cuda")
    assert all(extras.values()), extras


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker(sys.argv[-1])
