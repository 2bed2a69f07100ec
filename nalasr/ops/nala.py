"""NaLa attention (norm-aware linear attention): the plain PyTorch reference.

This file is the single source of truth for the math (docs/design.md §2). The fused Triton kernels in
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

How it is computed (the math above is unchanged; CPU speed is why): the cos and sin halves of φ are kept
apart and contracted with batched matmuls on head-major views (no 2d-wide concatenation, no einsum
copies); m_q = exp(p·log|dir|) (a per-token torch.pow is not vectorised); and where autograd does not
record, intermediates are overwritten in place instead of allocating new (B, N, H, D) buffers.
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
    """Hyper-parameters of the NaLa feature maps (docs/design.md §2)."""

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


def _records_grad(*tensors: Tensor) -> bool:
    """True when autograd records the ops on ``tensors``.

    When it does not (inference), the code below overwrites its own intermediates in place: the values are
    the same, but on CPU every fresh (B, N, H, D) buffer costs page faults (large blocks go back to the OS
    when freed), which in this memory-bound code weighs as much as the arithmetic.
    """
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _magnitude_and_angle(x: Tensor, *, query: bool, params: NalaParams) -> tuple[Tensor, Tensor]:
    """The polar parts of φ(x): magnitude m and angle θ, each (..., d) in the compute dtype."""
    x = x.to(_compute_dtype(x))
    recording = _records_grad(x)
    ss = torch.linalg.vector_norm(x, dim=-1, keepdim=True).square()  # Σx², without an (..., d) temporary
    inv = torch.rsqrt(ss + NORM_EPS)
    direction = x * inv
    if query:
        # The exponent depends on ‖q‖: this is what keeps the query norm from cancelling.
        power = params.lam * (params.tau + torch.tanh(ss * inv))
        mag = nonneg_pow(direction.abs(), power, positive=params.lam > 0 and params.tau > 0)
    else:
        mag = x.abs().pow_(params.lam)  # in place on abs's own output: fine under autograd too
    # θ = (π/4)·tanh(α·dir); α·x with α = 1 is x itself, so that multiply is skipped (no bit changes).
    if recording:
        theta = (math.pi / 4) * torch.tanh(direction if params.alpha == 1 else params.alpha * direction)
    else:  # the same ops, in direction's buffer
        theta = (direction if params.alpha == 1 else direction.mul_(params.alpha)).tanh_().mul_(math.pi / 4)
    if abs(params.alpha) > _ALPHA_CAP_FREE:  # for smaller α the cap cannot bind (|dir| ≤ 1): skipped
        theta = theta.clamp_(-THETA_MAX, THETA_MAX)
    return mag, theta


# With |α| ≤ 4, |θ| ≤ (π/4)·tanh(4·(1 + rounding)) < π/4 − 4e-4 < THETA_MAX: the cap is a no-op.
_ALPHA_CAP_FREE = 4.0


def nonneg_pow(base: Tensor, exponent: Tensor, *, positive: bool) -> Tensor:
    """base ** exponent for base ≥ 0, with an exponent per token broadcast over the last axis.

    torch.pow with a broadcast tensor exponent is not vectorised on CPU; exp(exponent·log base) is ~10×
    faster and agrees within fp32 rounding: log 0 = −inf gives exp(−inf) = 0 = 0^p for p > 0. ``positive``
    says p > 0 holds; otherwise (0·log 0 = NaN, while 0^0 = 1) torch.pow runs. Without autograd ``base`` is
    overwritten. Under autograd the same values come with a finite gradient at base = 0 (not 0·∞ = NaN).
    """
    if not positive:
        return base.pow(exponent)
    if not _records_grad(base, exponent):
        return base.log_().mul_(exponent).exp_()
    nonzero = base > 0
    return torch.where(nonzero, torch.exp(torch.log(torch.where(nonzero, base, 1.0)) * exponent), 0.0)


def _cos_sin(mag: Tensor, theta: Tensor, *, reuse_theta: bool = False) -> tuple[Tensor, Tensor]:
    """The two halves of φ = [m·cos θ, m·sin θ], kept apart (no concatenated 2d-wide copy).

    ``reuse_theta``: θ is not needed afterwards and autograd does not record, so sin θ goes into its buffer.
    The in-place products are safe under autograd (cos and sin keep their input, not their output).
    """
    cos = torch.cos(theta).mul_(mag)
    sin = theta.sin_() if reuse_theta else torch.sin(theta)
    return cos, sin.mul_(mag)


def nala_features(x: Tensor, *, query: bool, params: NalaParams, shift: Tensor | None = None) -> Tensor:
    """φq or φk of x: (..., d) → (..., 2d), float32 (float64 for float64 input).

    ``shift`` (broadcastable to (..., d)) is added to the angle θ; RoPE uses it.
    """
    mag, theta = _magnitude_and_angle(x, query=query, params=params)
    if shift is not None:
        theta = theta + shift
    return torch.cat(_cos_sin(mag, theta), dim=-1)


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
        o: (B, N, H, D) in q's dtype (a head-major view: not necessarily contiguous). Feature maps and the
        sums S, z are float32 whatever the input (float64 for float64 input).

    φ's cos and sin halves are never concatenated: φᵀS = cᵀS_cos + sᵀS_sin, with S_cos = (1/N) Σ_j c_j v_jᵀ
    and so on; each product is a batched matmul over (B, H) on head-major views of the token-major tensors.
    """
    if q.shape != k.shape or q.shape[:3] != v.shape[:3]:
        raise ValueError(f"q, k, v must be (B, N, H, D) alike, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    n = q.shape[1]
    if rope_hw is not None and rope_hw[0] * rope_hw[1] != n:
        raise ValueError(f"rope_hw {tuple(rope_hw)} has {rope_hw[0] * rope_hw[1]} positions but there are {n} tokens")
    recording = _records_grad(q, k, v)
    mag_q, theta_q = _magnitude_and_angle(q, query=True, params=params)  # (B, N, H, D) each
    mag_k, theta_k = _magnitude_and_angle(k, query=False, params=params)
    if rope_hw is not None:
        # RoPE rotates the numerator's features only: angles θ + ω·pos, the same magnitudes.
        ang = rope_angles(rope_hw, q.shape[-1], rope_base, q.device)[None, :, None, :]  # (1, N, 1, D)
        qrc, qrs = _cos_sin(mag_q, theta_q + ang, reuse_theta=not recording)
        krc, krs = _cos_sin(mag_k, theta_k + ang, reuse_theta=not recording)
    qc, qs = _cos_sin(mag_q, theta_q, reuse_theta=not recording)  # φq = [qc, qs]
    kc, ks = _cos_sin(mag_k, theta_k, reuse_theta=not recording)  # φk = [kc, ks]
    heads = lambda t: t.transpose(1, 2)  # noqa: E731 — (B, N, H, ·) → (B, H, N, ·), a view
    vh = heads(v.to(qc.dtype))  # (B, H, N, Dv)
    z_c, z_s = kc.sum(1)[..., None] / n, ks.sum(1)[..., None] / n  # z = [z_c; z_s]: (B, H, D, 1) each
    if rope_hw is None:
        s_c = heads(kc).mT @ vh / n  # (B, H, D, Dv)
        s_s = heads(ks).mT @ vh / n
        # z rides along as an extra column of S: one product gives numerator and denominator.
        nd = _matmul_sum(heads(qc), torch.cat([s_c, z_c], -1), heads(qs), torch.cat([s_s, z_s], -1))
        num, den = nd[..., :-1], nd[..., -1:]  # (B, H, N, Dv), (B, H, N, 1)
    else:
        s_c = heads(krc).mT @ vh / n
        s_s = heads(krs).mT @ vh / n
        num = _matmul_sum(heads(qrc), s_c, heads(qrs), s_s)
        den = _matmul_sum(heads(qc), z_c, heads(qs), z_s)
    den = den + params.eps
    o = num / den if recording else num.div_(den)
    return heads(o).to(q.dtype)


def _matmul_sum(a1: Tensor, b1: Tensor, a2: Tensor, b2: Tensor) -> Tensor:
    """a1 @ b1 + a2 @ b2 for (B, H, ·, ·) operands; the second product accumulates into the first's output."""
    out = a1 @ b1
    if not out.dtype == a2.dtype == b2.dtype:  # autocast made the product half precision: no in-place mixing
        return out + a2 @ b2
    out.flatten(0, -3).baddbmm_(a2.flatten(0, -3), b2.flatten(0, -3))  # out is contiguous: a view of it
    return out
