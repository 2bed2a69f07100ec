"""NaLa attention (norm-aware linear attention): the plain PyTorch reference.

This file is the single source of truth for the math (DESIGN.md §2). The fused Triton kernels in
``nalasr_kernels`` have the same signature and are tested against :func:`nala_attention_reference`.

Per head, with d = head dim and x = ‖x‖·dir(x):

    p(q)  = λ·(τ + tanh‖q‖)                        per token and head, in [λτ, λ(τ+1))
    m_q   = |dir(q)| ^ p(q)                         query magnitude, elementwise
    m_k   = |k| ^ λ                                 key magnitude, elementwise
    θ(x)  = (π/4)·tanh(α·dir(x))                    direction angle, in (−π/4, π/4) (|θ| ≤ THETA_MAX)
    φ(x)  = [m·cos θ, m·sin θ]                      2d wide
    o_t   = φq(q_t)ᵀ S / (φq(q_t)ᵀ z + ε),  S = (1/N) Σ_j φk(k_j) v_jᵀ,  z = (1/N) Σ_j φk(k_j)

Optional 2-D RoPE acts on the numerator only. Because φ's two halves are (m·cos θ, m·sin θ), a
rotation of the pair (j, j+d) by ω_j·pos is the same as adding ω_j·pos to θ_j, which is how it is
applied here; the first d/2 angles use the row index, the other d/2 the column index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["NalaParams", "nala_attention_reference", "nala_features", "rope_angles"]

# Added to Σx² before the square root: keeps dir(0) = 0 and its gradient finite (no NaN for q = 0).
NORM_EPS = 1e-12
# |θ| is capped just below π/4 so that φq·φk ≥ 0 survives rounding. Once α·|dir| ≳ 9, tanh rounds to
# exactly ±1 in fp32, θ reaches ±π/4, θq − θk = ±π/2 rounds past π/2, cos < 0 and φq·φk < 0 (−1e12 for
# |k| = 1e6 at α = 20). With the cap each pair term is ≥ m_q·m_k·sin(2e-4), far above the rounding of
# cos·cos + sin·sin (also with a kernel's approximate tanh/sin/cos). It only binds where
# tanh(α·|dir|) > 1 − 1.3e-4 (α·|dir| > 4.8): never for α ≤ 4.8 (the default α = 1 gives |θ| ≤ 0.6).
# A fused kernel applies the same cap.
THETA_MAX = math.pi / 4 - 1e-4


def _compute_dtype(x: Tensor) -> torch.dtype:
    """float32 for fp16/bf16/fp32 inputs; float64 stays float64 (gradcheck, explicit comparisons)."""
    return torch.promote_types(x.dtype, torch.float32)


@dataclass(frozen=True)
class NalaParams:
    """Hyper-parameters of the NaLa feature maps (DESIGN.md §2)."""

    lam: float = 3.0  # λ: key power, and the scale of the query power
    tau: float = 0.5  # τ: offset of the query power, p ∈ [λτ, λ(τ+1))
    alpha: float = 1.0  # α: slope of the direction angle
    eps: float = 1e-6  # ε: added to the normaliser


def rope_angles(hw: tuple[int, int], head_dim: int, base: float = 100.0, device=None) -> Tensor:
    """2-D RoPE angles ω_j·pos for every token, shape (N, d) float32, N = H·W (row-major tokens).

    Angle j < d/2 uses the row index with ω_j = base^(−j/(d/2)); j ≥ d/2 uses the column index with
    the same frequencies. A low base keeps the slowest wave meaningful at image sizes (hundreds of px).
    """
    h, w = hw
    half = head_dim // 2
    freq = base ** (-torch.arange(half, dtype=torch.float32, device=device) / half)  # (d/2,)
    rows = torch.arange(h, dtype=torch.float32, device=device).repeat_interleave(w)  # (N,)
    cols = torch.arange(w, dtype=torch.float32, device=device).repeat(h)  # (N,)
    ang = torch.empty(h * w, 2 * half, dtype=torch.float32, device=device)
    ang[:, :half] = rows[:, None] * freq
    ang[:, half:] = cols[:, None] * freq
    if head_dim % 2:  # odd dim: last angle gets no rotation
        ang = torch.cat([ang, ang.new_zeros(h * w, 1)], dim=1)
    return ang


def nala_features(x: Tensor, *, query: bool, params: NalaParams, shift: Tensor | None = None) -> Tensor:
    """φq or φk of x: (..., d) → (..., 2d), float32 (float64 for float64 input).

    ``shift`` (broadcastable to (..., d)) is added to the angle θ; RoPE uses it.
    """
    x = x.to(_compute_dtype(x))
    ss = (x * x).sum(-1, keepdim=True)
    inv = torch.rsqrt(ss + NORM_EPS)
    direction = x * inv
    if query:
        # The exponent depends on ‖q‖: this is what keeps the query norm from cancelling.
        power = params.lam * (params.tau + torch.tanh(ss * inv))
        mag = direction.abs().pow(power)
    else:
        mag = x.abs().pow(params.lam)
    theta = ((math.pi / 4) * torch.tanh(params.alpha * direction)).clamp(-THETA_MAX, THETA_MAX)
    if shift is not None:
        theta = theta + shift
    return torch.cat([mag * torch.cos(theta), mag * torch.sin(theta)], dim=-1)


def nala_attention_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    params: NalaParams = NalaParams(),
    rope_hw: tuple[int, int] | None = None,
    rope_base: float = 100.0,
) -> Tensor:
    """Bidirectional NaLa attention over all N tokens.

    Args:
        q, k, v: (B, N, H, D) — token-major, as a channels-last feature map splits into heads.
        params: feature-map hyper-parameters.
        rope_hw: (rows, cols) of the token grid, N = rows·cols, to apply 2-D RoPE; None for none.
    Returns:
        o: (B, N, H, D) in q's dtype. Feature maps and the sums S, z are float32 whatever the input
        (float64 for float64 input).
    """
    if q.shape != k.shape or q.shape[:3] != v.shape[:3]:
        raise ValueError(f"q, k, v must be (B, N, H, D) alike, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    n = q.shape[1]
    if rope_hw is not None and rope_hw[0] * rope_hw[1] != n:
        raise ValueError(f"rope_hw {tuple(rope_hw)} has {rope_hw[0] * rope_hw[1]} positions but there are {n} tokens")
    phi_q = nala_features(q, query=True, params=params)  # (B, N, H, 2D)
    phi_k = nala_features(k, query=False, params=params)
    vf = v.to(phi_q.dtype)
    z = phi_k.sum(1) / n  # (B, H, 2D)
    den = torch.einsum("bnhf,bhf->bnh", phi_q, z) + params.eps  # (B, N, H)
    if rope_hw is None:
        s = torch.einsum("bnhf,bnhe->bhfe", phi_k, vf) / n  # (B, H, 2D, Dv)
        num = torch.einsum("bnhf,bhfe->bnhe", phi_q, s)
    else:
        ang = rope_angles(rope_hw, q.shape[-1], rope_base, q.device)[None, :, None, :]  # (1, N, 1, D)
        phi_kr = nala_features(k, query=False, params=params, shift=ang)
        phi_qr = nala_features(q, query=True, params=params, shift=ang)
        s = torch.einsum("bnhf,bnhe->bhfe", phi_kr, vf) / n
        num = torch.einsum("bnhf,bhfe->bnhe", phi_qr, s)
    return (num / den[..., None]).to(q.dtype)
