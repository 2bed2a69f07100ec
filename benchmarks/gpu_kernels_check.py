"""Full-size parity of the fused Triton NaLa kernels on CUDA (the CPU tests run the same checks at small sizes).

For every case: output and the gradients of q, k, v against the reference (nalasr.ops.nala) evaluated in float64
on the GPU on the same input values, as relative RMS errors with the tolerances of tests/test_kernels.py; every
buffer the kernels write is pre-filled with NaN. Also: bitwise determinism at full size, torch.compile around
the op (forward and backward) against eager, and the peak extra memory of the forward at 518K tokens (no N×N).

    python benchmarks/gpu_kernels_check.py            # all cases, ~2-4 min on an H200 (first run compiles)
    python benchmarks/gpu_kernels_check.py --cases 518400 bf16   # cases whose name contains all the words

Prints a compact table; exits 1 when anything fails (2 when there is no CUDA device).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels"), str(ROOT / "tests")]  # tests/: the test modules it loads import their helpers


def _load_tests(name: str = "test_kernels"):
    spec = importlib.util.spec_from_file_location(f"nalasr_{name}", ROOT / "tests" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T = _load_tests()  # run_case, tolerances: one definition for the CPU tests and this check
from kernel_testing import rel_err  # noqa: E402  (tests/ is on sys.path above)
LN = _load_tests("test_layernorm_kernel")  # run_cases, check: the fused LayerNorm's
# LayerNorm at the network's sizes (518K and 2M tokens × 64 channels) besides the test's odd small ones.
LN_CASES = LN.CASES + [(518400, 64, "float16"), (518400, 64, "bfloat16"), (2073600, 64, "float16"),
                       (147456, 48, "float32")]
GATED_CASES = LN.GATED_CASES + [(518400, 64, "float16", 4), (518400, 64, "bfloat16", 4)]

FIXED = {"BLOCK_N": 64, "CHUNK": 1024, "num_warps": 4}  # side cases: skip autotuning (and its compile time)


def _cases() -> dict[str, dict]:
    base = {**T.CASE_DEFAULTS, "B": 1, "H": 4, "D": 16, "layout": "qkvg", "config": None}
    out: dict[str, dict] = {}
    for dtype in ("bfloat16", "float16", "float32"):
        # 720×720 LR tokens (4K output at ×... the design's 518K), the model's 4 heads × 16, autotuned path.
        out[f"{dtype}-N518400-H4-D16"] = {**base, "dtype": dtype, "N": 518400}
        # Urban100-like 192×256 with RoPE.
        out[f"{dtype}-N49152-H4-D16-rope"] = {**base, "dtype": dtype, "N": 49152, "rope": (192, 256)}
    out["bfloat16-train-B32-N4096-H4-D16"] = {**base, "dtype": "bfloat16", "B": 32, "N": 4096}
    out["bfloat16-train-B32-N4096-H4-D16-rope"] = {**base, "dtype": "bfloat16", "B": 32, "N": 4096, "rope": (64, 64)}
    out["float16-N1048576-H4-D16"] = {**base, "dtype": "float16", "N": 1048576}
    # q, k, v separate contiguous tensors, as the model's four C-wide products give them: the two-head map
    # (nala._map_pair).
    out["float16-N518400-H4-D16-dense"] = {**base, "dtype": "float16", "N": 518400, "layout": "contiguous"}
    # The small sizes' one-head map, autotuned, on chunks of its 128-token minimum (nala._FWD_MAP_MIN_CHUNK): Urban100
    # ×4's LR in the model's layout, and an odd size whose last chunk is part of a tile.
    out["float16-N49152-H4-D16-dense"] = {**base, "dtype": "float16", "N": 49152, "layout": "contiguous"}
    out["float16-N4097-H4-D16-odd"] = {**base, "dtype": "float16", "N": 4097}
    # Values with a common offset (the backward's cancellation, see nalasr_kernels.nala), at full size.
    out["float16-N518400-H4-D16-v-offset"] = {**base, "dtype": "float16", "N": 518400, "v_shift": 30.0}
    out["float16-N130321-H3-D16-rope-odd"] = {**base, "dtype": "float16", "N": 130321, "H": 3, "rope": (361, 361),
                                               "config": FIXED}
    out["float16-N100003-H2-D32-head_major"] = {**base, "dtype": "float16", "N": 100003, "H": 2, "D": 32,
                                                 "layout": "head_major", "config": FIXED}
    out["bfloat16-N65537-H1-D64"] = {**base, "dtype": "bfloat16", "N": 65537, "H": 1, "D": 64, "config": FIXED}
    out["bfloat16-N40000-H6-D24-d_strided"] = {**base, "dtype": "bfloat16", "N": 40000, "H": 6, "D": 24,
                                                "layout": "d_strided", "config": FIXED}
    out["float32-N9999-H2-D16-alpha20"] = {**base, "dtype": "float32", "N": 9999, "H": 2, "scale": 2.0,
                                           "params": dict(lam=2.0, tau=0.75, alpha=20.0, eps=1e-6), "config": FIXED}
    return out


def _determinism(K) -> bool:
    case = {**_cases()["bfloat16-N518400-H4-D16"], "zero_q": False}
    runs = []
    for _ in range(2):
        q, k, v, g, leaves = T._make(case, "cuda", seed=7)
        o = K.nala_attention_triton(q, k, v)
        o.backward(g)
        runs.append([o.detach().clone()] + [t.grad.detach().clone() for t in leaves])
    return all(torch.equal(a, b) for a, b in zip(*runs))


def _compiled_matches_eager(K) -> tuple[bool, str]:
    """torch.compile around the op: same output and gradients as eager (the custom ops keep it one graph)."""
    case = {**_cases()["bfloat16-train-B32-N4096-H4-D16-rope"], "zero_q": False}

    def step(x, w):
        qkv = (x @ w).chunk(4, dim=-1)
        b, n = x.shape[:2]
        q, k, v = (t.reshape(b, n, 4, 16) for t in qkv[:3])
        return K.nala_attention_triton(q, k, v, None, (64, 64)).float().square().mean()

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(case["B"], case["N"], 64, device="cuda", generator=gen, dtype=torch.bfloat16)
    w0 = torch.randn(64, 256, device="cuda", generator=gen, dtype=torch.bfloat16) * 0.2
    res = []
    for fn in (step, torch.compile(step, fullgraph=True)):
        w = w0.clone().requires_grad_()
        loss = fn(x, w)
        loss.backward()
        res.append((loss.detach().float(), w.grad.detach().float()))
    (l0, g0), (l1, g1) = res
    err_l = abs((l1 - l0) / l0).item()
    err_g = rel_err(g1, g0)
    return err_l < 1e-3 and err_g < 1e-2, f"loss rel {err_l:.1e}, dW rel-RMS {err_g:.1e}"


def _peak_forward_memory(K) -> tuple[bool, str]:
    """Extra memory of one forward at 518K tokens: o + the partial/state buffers, O(N·d); an N×N buffer is 1 TB."""
    b, n, h, d = 1, 518400, 4, 16
    x = torch.randn(b, n, 4 * h * d, device="cuda", dtype=torch.float16)
    q, k, v, _ = (t.reshape(b, n, h, d) for t in x.chunk(4, dim=-1))
    with torch.no_grad():
        K.nala_attention_triton(q, k, v)  # warm (autotune allocates its own buffers)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        o = K.nala_attention_triton(q, k, v)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base
    o_bytes = o.numel() * o.element_size()
    return extra <= 2 * o_bytes, f"peak extra {extra / 2**20:.1f} MiB (o itself {o_bytes / 2**20:.1f} MiB)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="*", default=[], help="run only cases whose name contains all these words")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check (the CPU interpreter tests are tests/test_kernels.py)")
        return 2
    from nalasr_kernels import nala as K

    print(f"device {torch.cuda.get_device_name()} · torch {torch.__version__} · triton "
          f"{__import__('triton').__version__}")
    cases = {n: c for n, c in _cases().items() if all(w in n for w in args.cases)}
    failed = 0
    head = f"{'case':42s} {'o':>9s} {'dq':>9s} {'dk':>9s} {'dv':>9s} {'tol o/grad':>15s} {'s':>6s}  status"
    print(head)
    print("-" * len(head))
    for name, case in cases.items():
        t0 = time.perf_counter()
        try:
            res = T.run_case(case, "cuda", ref_device="cuda")
            T._check(res, case)
            status = "ok"
        except AssertionError as e:
            status, failed = f"FAIL {str(e)[:300]}", failed + 1
        except Exception as e:
            status, failed = f"ERROR {type(e).__name__}: {str(e)[:300]}", failed + 1
            res = {}
            traceback.print_exc(limit=3)
        errs = " ".join(f"{res.get(k, math.nan):9.2e}" for k in ("o", "dq", "dk", "dv"))
        tol = f"{T.TOL_OUT[case['dtype']]:.0e}/{T.TOL_GRAD[case['dtype']]:.0e}"
        print(f"{name:42s} {errs} {tol:>15s} {time.perf_counter() - t0:6.1f}  {status}", flush=True)
        torch.cuda.empty_cache()
    norm_runs = [] if args.cases and "layernorm" not in args.cases else (
        [("layernorm", r, LN.check) for r in LN.run_cases("cuda", LN_CASES)]
        + [("gatednorm", r, LN.check_gated) for r in LN.run_gated_cases("cuda", GATED_CASES)])
    for kind, r, check in norm_runs:
        try:
            check(r)
            status = "ok"
        except AssertionError as e:
            status, failed = f"FAIL {str(e)[:200]}", failed + 1
        name = f"{kind}-" + "-".join(map(str, r["case"]))
        errs = " ".join(f"{r.get(k, math.nan):9.2e}" for k in ("y", "dx", "dw", "db"))
        print(f"{name:42s} {errs} {LN.TOL[r['case'][2]]:>15.0e} {'':>6s}  {status}", flush=True)
    for label, fn in (("deterministic (518K, bf16, fwd+bwd twice)", lambda: (_determinism(K), "bitwise")),
                      ("torch.compile(fullgraph) = eager", lambda: _compiled_matches_eager(K)),
                      ("forward peak extra memory O(N·d)", lambda: _peak_forward_memory(K))):
        if args.cases:
            break
        try:
            ok, info = fn()
        except Exception as e:
            ok, info = False, f"{type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc(limit=3)
        failed += not ok
        print(f"{label:42s} {'ok' if ok else 'FAIL'}  {info}", flush=True)
    print(f"\n{'FAILED: ' + str(failed) if failed else 'all passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
