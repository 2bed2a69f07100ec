"""NaLa attention in plain PyTorch, beside the fused kernel with its signature (the kernel's own yardstick).

``nala_attention_naive(q, k, v, params, rope_hw, rope_base)`` is the math of :mod:`nalasr_kernels.nala.binding`'s
docstring written straight, in q's compute dtype (float32, or float64 for float64 inputs), with autograd: no
Triton, no in-place tricks. It equals ``nalasr.ops.nala.nala_attention_reference`` (the model's reference, which is
tuned for CPU speed) to rounding, which tests/test_kernels_parity.py checks; this package does not import nalasr.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

NORM_EPS = 1e-12
THETA_MAX = math.pi / 4 - 1e-4
CAP_FREE_ALPHA = 4.0  # the clamp at ±THETA_MAX cannot bind for |α| ≤ 4
DEFAULTS = dict(lam=3.0, tau=0.5, alpha=1.0, eps=1e-6)

__all__ = ["nala_attention_naive", "rope_angles"]


def rope_angles(hw: tuple[int, int], head_dim: int, base: float, device) -> Tensor:
    """(N, d) float32: angle j < d/2 is row·ω_j, angle d/2 + j is col·ω_j, ω_j = base^(−j/(d/2)); odd d's last 0."""
    h, w = hw
    half = head_dim // 2
    freq = base ** (-torch.arange(half, dtype=torch.float32, device=device) / half)
    rows = torch.arange(h, dtype=torch.float32, device=device).repeat_interleave(w)
    cols = torch.arange(w, dtype=torch.float32, device=device).repeat(h)
    ang = torch.zeros(h * w, head_dim, dtype=torch.float32, device=device)
    ang[:, :half] = rows[:, None] * freq
    ang[:, half:2 * half] = cols[:, None] * freq
    return ang


def _polar(x: Tensor, query: bool, lam: float, tau: float, alpha: float) -> tuple[Tensor, Tensor]:
    ss = (x * x).sum(-1, keepdim=True)
    r = torch.rsqrt(ss + NORM_EPS)
    dirn = x * r
    if query:
        p = lam * (tau + torch.tanh(ss * r))
        a = dirn.abs()
        mag = torch.where(a > 0, torch.exp(p * torch.log(torch.where(a > 0, a, 1.0))), 0.0)
    else:
        mag = x.abs() ** lam
    theta = (math.pi / 4) * torch.tanh(alpha * dirn)
    if abs(alpha) > CAP_FREE_ALPHA:
        theta = theta.clamp(-THETA_MAX, THETA_MAX)
    return mag, theta


def nala_attention_naive(q: Tensor, k: Tensor, v: Tensor, params: Any = None,
                         rope_hw: tuple[int, int] | None = None, rope_base: float = 100.0) -> Tensor:
    """q, k: (B, N, H, D), v: (B, N, H, Dv) → o (B, N, H, Dv) in q's dtype; params: lam, tau, alpha, eps or None."""
    hp = {name: float(getattr(params, name, default)) if params is not None else default
          for name, default in DEFAULTS.items()}
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf = q.to(ct), k.to(ct), v.to(ct)
    n = q.shape[1]
    mq, tq = _polar(qf, True, hp["lam"], hp["tau"], hp["alpha"])
    mk, tk = _polar(kf, False, hp["lam"], hp["tau"], hp["alpha"])
    phi_q = torch.cat([mq * torch.cos(tq), mq * torch.sin(tq)], -1)  # (B, N, H, 2D)
    phi_k = torch.cat([mk * torch.cos(tk), mk * torch.sin(tk)], -1)
    if rope_hw is not None:  # RoPE on the numerator: angles θ + ω·pos, the same magnitudes
        ang = rope_angles(rope_hw, q.shape[-1], rope_base, q.device).to(ct)[None, :, None, :]
        num_q = torch.cat([mq * torch.cos(tq + ang), mq * torch.sin(tq + ang)], -1)
        num_k = torch.cat([mk * torch.cos(tk + ang), mk * torch.sin(tk + ang)], -1)
    else:
        num_q, num_k = phi_q, phi_k
    s = torch.einsum("bnhf,bnhe->bhfe", num_k, vf) / n  # (B, H, 2D, Dv)
    z = phi_k.sum(1) / n  # (B, H, 2D)
    num = torch.einsum("bnhf,bhfe->bnhe", num_q, s)
    den = torch.einsum("bnhf,bhf->bnh", phi_q, z)[..., None] + hp["eps"]
    return (num / den).to(q.dtype)
