"""Full-size parity of the fused Triton NaLa attention and LayerNorm on CUDA (the CPU tests check small sizes).

For every case: the output and the gradients of q, k, v against the reference (nalasr.ops.nala) evaluated in float64
on the GPU on the same input values, as relative RMS errors against per-dtype tolerances (those of
tests/test_kernels_parity.py). Also: bitwise determinism at 518K tokens, torch.compile around the op against eager,
the peak extra memory of the forward (no N×N), and the fused LayerNorm at the network's sizes. Public API only
(nalasr_kernels.nala_attention_triton, layer_norm_triton), so it runs against any snapshot of the code that
PYTHONPATH selects (the repository is appended to sys.path, not put first).

    python benchmarks/gpu_kernels_check.py                  # every case, ~1-2 min on an H200 (first run compiles)
    python benchmarks/gpu_kernels_check.py --cases 518400   # cases whose name contains all the words

Prints a table; exits 1 when anything fails (2 when there is no CUDA device).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path += [str(ROOT), str(ROOT / "kernels")]

TOL_OUT = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.2e-2}
TOL_GRAD = {"float32": 5e-5, "float16": 4e-3, "bfloat16": 2.4e-2}
REF_FACTOR = 4.0  # or this factor times the error of the reference itself at the input dtype, where larger


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.detach().double()
    got = got.detach().to(ref.device, torch.float64)
    if not torch.isfinite(got).all():
        return math.inf
    return (got - ref).pow(2).mean().sqrt().item() / max(ref.pow(2).mean().sqrt().item(), 1e-300)


def cases() -> dict[str, dict]:
    base = dict(B=1, H=4, D=16, layout="qkvg", rope=None, v_shift=0.0, params=None)
    out = {}
    for dtype in ("bfloat16", "float16", "float32"):
        out[f"{dtype}-N518400-H4-D16"] = {**base, "dtype": dtype, "N": 518400}
        out[f"{dtype}-N49152-H4-D16-rope"] = {**base, "dtype": dtype, "N": 49152, "rope": (192, 256)}
    out["bfloat16-train-B32-N4096-H4-D16-rope"] = {**base, "dtype": "bfloat16", "B": 32, "N": 4096, "rope": (64, 64)}
    out["float16-N1048576-H4-D16"] = {**base, "dtype": "float16", "N": 1048576}
    out["float16-N518400-H4-D16-dense"] = {**base, "dtype": "float16", "N": 518400, "layout": "contiguous"}
    out["float16-N49152-H4-D16-dense"] = {**base, "dtype": "float16", "N": 49152, "layout": "contiguous"}
    out["float16-N4097-H4-D16-odd"] = {**base, "dtype": "float16", "N": 4097}
    out["float16-N518400-H4-D16-v-offset"] = {**base, "dtype": "float16", "N": 518400, "v_shift": 30.0}
    out["float16-N400000-H4-D32-dense"] = {**base, "dtype": "float16", "N": 400000, "D": 32, "layout": "contiguous"}
    out["bfloat16-N65537-H1-D64"] = {**base, "dtype": "bfloat16", "N": 65537, "H": 1, "D": 64, "layout": "contiguous"}
    out["float32-N9999-H2-D16-alpha20"] = {**base, "dtype": "float32", "N": 9999, "H": 2,
                                           "params": dict(lam=2.0, tau=0.75, alpha=20.0, eps=1e-6)}
    return out


def make(case: dict, seed: int = 0):
    """q, k, v in the case's layout (qkvg: views of one (B, N, 4·H·D) tensor, as the model's), g = ∂L/∂o, the leaves."""
    b, n, h, d = case["B"], case["N"], case["H"], case["D"]
    dtype = getattr(torch, case["dtype"])
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen, device="cuda").to(dtype)  # noqa: E731
    if case["layout"] == "qkvg":
        leaves = [rnd(b, n, 4 * h * d)]
        q, k, v = (t.reshape(b, n, h, d) for t in leaves[0].chunk(4, dim=-1)[:3])
    else:
        leaves = [rnd(b, n, h, d) for _ in range(3)]
        q, k, v = leaves
    if case["v_shift"]:
        with torch.no_grad():
            v.add_(case["v_shift"])
    for t in leaves:
        t.requires_grad_()
    if case["layout"] == "qkvg":
        q, k, v = (t.reshape(b, n, h, d) for t in leaves[0].chunk(4, dim=-1)[:3])
    else:
        q, k, v = leaves
    g = torch.randn(b, n, h, d, generator=gen, device="cuda").to(dtype)
    return q, k, v, g, leaves


def nan_filled():
    """torch.empty / empty_like return NaN-filled tensors inside the block: an unwritten element shows."""
    import contextlib

    def poison(t: torch.Tensor) -> torch.Tensor:
        # integer buffers (offsets, counters) have no NaN: the most negative value shows an unwritten one as well
        if t.is_floating_point():
            return t.fill_(float("nan"))
        return t.fill_(True if t.dtype == torch.bool else torch.iinfo(t.dtype).min)

    @contextlib.contextmanager
    def ctx():
        e, el = torch.empty, torch.empty_like
        torch.empty = lambda *a, **k: poison(e(*a, **k))  # type: ignore[assignment]
        torch.empty_like = lambda *a, **k: poison(el(*a, **k))  # type: ignore[assignment]
        try:
            yield
        finally:
            torch.empty, torch.empty_like = e, el

    return ctx()


def check_case(case: dict) -> tuple[bool, str]:
    from nalasr.ops.nala import NalaParams, nala_attention_reference
    from nalasr_kernels import nala_attention_triton

    params = NalaParams(**case["params"]) if case["params"] else NalaParams()
    q, k, v, g, _ = make(case)
    for t in (q, k, v):
        t.retain_grad()
    with nan_filled():
        o = nala_attention_triton(q, k, v, params, case["rope"])
        o.backward(g)
    got = (o, q.grad, k.grad, v.grad)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = nala_attention_reference(q64, k64, v64, params, case["rope"])
    ref.backward(g.double())
    refs = (ref, q64.grad, k64.grad, v64.grad)
    qd, kd, vd = (t.detach().clone().requires_grad_() for t in (q, k, v))
    refd = nala_attention_reference(qd, kd, vd, params, case["rope"])
    refd.backward(g)
    own = (refd, qd.grad, kd.grad, vd.grad)
    dt = case["dtype"]
    errs, ok = [], o.dtype == q.dtype and o.is_contiguous()
    for name, a, r, s in zip(("o", "dq", "dk", "dv"), got, refs, own):
        e = rel_err(a, r)
        tol = max(TOL_OUT[dt] if name == "o" else TOL_GRAD[dt], REF_FACTOR * rel_err(s, r))
        ok &= e <= tol
        errs.append(f"{name} {e:.2e}/{tol:.0e}")
    return ok, ", ".join(errs)


def determinism() -> tuple[bool, str]:
    from nalasr_kernels import nala_attention_triton

    runs = []
    for _ in range(2):
        q, k, v, g, leaves = make(cases()["float16-N518400-H4-D16"], seed=7)
        o = nala_attention_triton(q, k, v)
        o.backward(g)
        runs.append([o.detach().clone()] + [t.grad.detach().clone() for t in leaves])
    return all(torch.equal(a, b) for a, b in zip(*runs)), "two runs, bit for bit"


def compiled_matches_eager() -> tuple[bool, str]:
    from nalasr_kernels import nala_attention_triton

    def step(x, w):
        b, n = x.shape[:2]
        q, k, v = (t.reshape(b, n, 4, 16) for t in (x @ w).chunk(4, dim=-1)[:3])
        return nala_attention_triton(q, k, v, None, (64, 64)).float().square().mean()

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(32, 4096, 64, device="cuda", generator=gen, dtype=torch.bfloat16)
    w0 = torch.randn(64, 256, device="cuda", generator=gen, dtype=torch.bfloat16) * 0.2
    res = []
    for fn in (step, torch.compile(step, fullgraph=True)):
        w = w0.clone().requires_grad_()
        loss = fn(x, w)
        loss.backward()
        res.append((loss.detach().float(), w.grad.detach().float()))
    (l0, g0), (l1, g1) = res
    el, eg = abs((l1 - l0) / l0).item(), rel_err(g1, g0)
    return el < 1e-3 and eg < 1e-2, f"loss rel {el:.1e}, dW rel-RMS {eg:.1e}"


def peak_forward_memory() -> tuple[bool, str]:
    from nalasr_kernels import nala_attention_triton

    x = torch.randn(1, 518400, 256, device="cuda", dtype=torch.float16)
    q, k, v = (t.reshape(1, 518400, 4, 16) for t in x.chunk(4, dim=-1)[:3])
    with torch.no_grad():
        nala_attention_triton(q, k, v)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        o = nala_attention_triton(q, k, v)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base
    size = o.numel() * o.element_size()
    return extra <= 2 * size, f"peak extra {extra / 2**20:.1f} MiB (o {size / 2**20:.1f} MiB)"


def layer_norm_cases() -> tuple[bool, str]:
    import torch.nn.functional as F

    from nalasr_kernels import layer_norm_triton

    worst, ok = 0.0, True
    for m, c, dt in ((518400, 64, "float16"), (518400, 64, "bfloat16"), (2073600, 64, "float16"), (147456, 48, "float32"),
                     (1000, 3, "float32"), (4097, 200, "float16")):
        dtype = getattr(torch, dt)
        x = torch.randn(m, c, device="cuda").to(dtype).requires_grad_()
        w, b = (torch.randn(c, device="cuda").to(dtype).requires_grad_() for _ in range(2))
        gy = torch.randn(m, c, device="cuda").to(dtype)
        with nan_filled():
            y = layer_norm_triton(x, (c,), w, b, 1e-5)
            grads = torch.autograd.grad(y, (x, w, b), gy)
        x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
        y64 = F.layer_norm(x64, (c,), w64, b64, 1e-5)
        refs = torch.autograd.grad(y64, (x64, w64, b64), gy.double())
        tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.2e-2}[dt]
        errs = [rel_err(y, y64)] + [rel_err(a, r) for a, r in zip(grads, refs)]
        ok &= max(errs) <= 2 * tol
        worst = max(worst, max(errs) / tol)
    return ok, f"worst error {worst:.2f} × its dtype's tolerance"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="*", default=[], help="run only checks whose name contains all these words")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check (the CPU tests are tests/test_kernels_parity.py)")
        return 2
    import nalasr
    import nalasr_kernels

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; nalasr from {Path(nalasr.__file__).parent}, "
          f"nalasr_kernels from {Path(nalasr_kernels.__file__).parent}")
    checks = {f"attention {name}": (lambda c=c: check_case(c)) for name, c in cases().items()}
    checks.update({"attention determinism 518400": determinism, "attention torch.compile": compiled_matches_eager,
                   "attention peak memory 518400": peak_forward_memory, "layernorm 518400 sizes": layer_norm_cases})
    failed = 0
    for name, fn in checks.items():
        if not all(w in name for w in args.cases):
            continue
        t0 = time.perf_counter()
        try:
            ok, msg = fn()
        except Exception as e:  # one broken check must not hide the others
            ok, msg = False, f"{type(e).__name__}: {e}"
            traceback.print_exc()
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:45s} {time.perf_counter() - t0:6.1f} s  {msg}", flush=True)
        torch.cuda.empty_cache()
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
