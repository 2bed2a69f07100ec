"""Small Triton kernels that expose the attention kernels' device math to tests (imported only where Triton is).

probe_math(t, approx) runs ``sincos_angle`` (at u = t/(π/4), as the kernels call it with θ = (π/4)·u) and
``tanh_any`` of nalasr_kernels.nala.device elementwise over a float32 vector, so their accuracy claims (full paths ~1e-7;
APPROX: cos < 1.1e-5, sin < 1e-6, tanh.approx ~2^-11) are checked on the CPU interpreter and on the GPU alike.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from nalasr_kernels.nala.device import sincos_angle, tanh_any


@triton.jit
def _probe(T, C, S, TH, n, APPROX: tl.constexpr, SIN5: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    t = tl.load(T + offs, mask=mask, other=0.0)
    c, s = sincos_angle(t * 1.2732395447351628, APPROX, SIN5)  # 4/π
    tl.store(C + offs, c, mask=mask)
    tl.store(S + offs, s, mask=mask)
    tl.store(TH + offs, tanh_any(t, APPROX), mask=mask)


def probe_math(t: Tensor, approx: bool, sin5: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """cos t, sin t, tanh t (float32 (n,) each) as the kernels compute them (``sin5``: the degree 5 sine)."""
    t = t.float().contiguous()
    c, s, th = (torch.full_like(t, float("nan")) for _ in range(3))
    block = 128
    _probe[(triton.cdiv(t.numel(), block),)](t, c, s, th, t.numel(), APPROX=approx, SIN5=sin5, BLOCK=block)
    return c, s, th
