"""Helpers of the Triton kernel tests (tests/test_kernels_parity.py, test_layernorm_kernel.py, test_dwconv_kernel.py).

- ``run_under_interpreter``: run a kernel test file as a script under the Triton interpreter and read back the
  JSON it writes. TRITON_INTERPRET must be set before Triton is imported and must not leak into the rest of the
  suite (a later CUDA run in the same process would silently interpret), hence a subprocess per test file.
  It skips, with the reason, when the installed Triton's interpreter cannot run our loops at all (a probe).
- ``nan_filled_buffers``: fresh torch.empty buffers come NaN-filled, so an element a kernel fails to write shows.
- ``rel_err``: the relative RMS error every parity check compares with its tolerance.
- ``tf32_dots_in_interpreter``: the interpreter's tl.dot rounds its operands to tf32 where the GPU's would.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


# Every chunked kernel loops over ``tl.range(start, tl.minimum(start + CHUNK, N), BLOCK_N)``. Triton 3.6's
# interpreter turns that bound into a 1-element array and calls int() on it, which NumPy >= 2.4 refuses (seen on
# the H200 machine: torch 2.11, Triton 3.6); Triton 3.9's interpreter runs it. The compiled kernels are unaffected.
_PROBE = """
import triton, triton.language as tl, torch
@triton.jit
def probe(X, N, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    start = tl.program_id(0) * CHUNK
    for n0 in tl.range(start, tl.minimum(start + CHUNK, N), BLOCK):
        tl.store(X + n0 + tl.arange(0, BLOCK), 1.0)
x = torch.zeros(32)
probe[(2,)](x, 32, CHUNK=16, BLOCK=8)
assert x.sum().item() == 32, x
"""


@functools.cache
def interpreter_problem() -> str | None:
    """Why the installed Triton's interpreter cannot run the kernels' loop pattern (the known int() failure on
    the loop bound), or None: then the interpreter tests run, and any other failure shows in them."""
    env = {**_env(), "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "probe.py"  # @triton.jit reads the kernel's source, so it must live in a file
        script.write_text(_PROBE)
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    if proc.returncode == 0 or "converted to Python scalars" not in last:
        return None  # it runs, or it failed some other way: then the tests run and show that failure
    versions = subprocess.run([sys.executable, "-c", "import numpy, triton; print(triton.__version__, numpy.__version__)"],
                              env=env, capture_output=True, text=True).stdout.split()
    return (f"the Triton interpreter cannot run a chunked tl.range loop here (Triton {' / NumPy '.join(versions)}): "
            f"{last[-200:]}; the interpreter tests need Triton >= 3.9 (or NumPy < 2.4)")


def _env() -> dict[str, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "kernels"), env.get("PYTHONPATH", "")])
    return env


def run_under_interpreter(script: str, out: Path, *args: str, timeout: int = 300) -> dict:
    """``python script *args out`` with TRITON_INTERPRET=1 and no GPU visible; the JSON the script wrote to out.
    Skips the calling test when the interpreter fails the probe (see interpreter_problem)."""
    problem = interpreter_problem()
    if problem:
        pytest.skip(problem)
    env = _env()
    proc = subprocess.run([sys.executable, script, *args, str(out)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise AssertionError(f"interpreter worker failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(Path(out).read_text())


@contextlib.contextmanager
def nan_filled_buffers() -> Iterator[None]:
    """torch.empty / torch.empty_like return NaN-filled tensors inside: an element a kernel fails to write shows."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    torch.empty = lambda *a, **k: real_empty(*a, **k).fill_(float("nan"))  # type: ignore[assignment]
    torch.empty_like = lambda *a, **k: real_empty_like(*a, **k).fill_(float("nan"))  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.empty, torch.empty_like = real_empty, real_empty_like


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """‖got − ref‖₂ / ‖ref‖₂ in float64 on ref's device; inf when got has a non-finite element (NaN: unwritten)."""
    ref = ref.detach().double()
    got = got.detach().to(ref.device, torch.float64)
    if not torch.isfinite(got).all():
        return math.inf
    den = ref.pow(2).mean().sqrt().item()
    return (got - ref).pow(2).mean().sqrt().item() / max(den, 1e-300)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 → tf32 as the tensor cores take it from a float32 register: the low 13 mantissa bits dropped
    (truncation; Triton passes tf32 operands unrounded, triton-lang/triton#4574). inf/NaN kept."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, bits & np.uint32(0xFFFFE000)).view(np.float32)


@contextlib.contextmanager
def tf32_dots_in_interpreter() -> Iterator[None]:
    """Inside, a tl.dot the kernel asks for in tf32 rounds its float32 operands to tf32 under TRITON_INTERPRET.

    The interpreter multiplies in float32 whatever input_precision says, while the GPU's tf32 products keep 10
    mantissa bits of each operand (truncated, see _round_tf32): a cancellation that tf32 cannot carry (the
    attention backward at N = 1) passed on CPU and failed on the GPU. With this the CPU parity tests see the GPU's
    operand rounding (tf32x3 and ieee stay float32, as on the GPU to within float32 accumulation order)."""
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is None or not hasattr(builder, "create_dot"):
        raise RuntimeError("this Triton's interpreter has no InterpreterBuilder.create_dot to emulate tf32 in")
    real = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision == ir.INPUT_PRECISION.TF32:
            a, b = (interpreter.TensorHandle(_round_tf32(t.data), t.dtype) if t.data.dtype == np.float32 else t
                    for t in (a, b))
        return real(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    try:
        yield
    finally:
        builder.create_dot = real
