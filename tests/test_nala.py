"""NaLa attention reference (docs/design.md §2) against an independent, explicit N×N evaluation of the kernel.

The explicit form below is written from the paper formula, not from the implementation: per head

    w_tj = Σ_i m_q,i(q_t) · m_k,i(k_j) · cos(θ_q,i(q_t) − θ_k,i(k_j))        (= φq(q_t)·φk(k_j))
    o_t  = Σ_j w_tj v_j / (Σ_j w_tj + N·ε)

The N·ε is the reference's ε after S and z are scaled by 1/N: o = φqᵀ(S/N) / (φqᵀ(z/N) + ε).
With RoPE the numerator weight uses cos(θq − θk + ω·(pos_t − pos_j)); the denominator stays unrotated.
θ = (π/4)·tanh(α·dir) lies in the open interval (−π/4, π/4); the implementation caps |θ| at THETA_MAX, a hair
below π/4, so that fp32 rounding cannot close the interval (tanh rounds to 1 once α·|dir| ≳ 9, and then
φq·φk < 0). The cap only binds for large α; the explicit form applies it too, and its size is bounded here.
"""

from __future__ import annotations

import math

import pytest
import torch

from nalasr.ops import BACKENDS, NalaParams, nala_attention, nala_attention_reference, nala_features, rope_angles
from nalasr.ops.nala import THETA_MAX

DEFAULT = NalaParams()


# ------------------------------------------------------------------------------------------ explicit form


def _unit(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.norm(dim=-1, keepdim=True)
    return torch.where(n > 0, x / n.clamp_min(1e-300), torch.zeros_like(x)), n


def _rope_rotation(hw: tuple[int, int], d: int, base: float) -> torch.Tensor:
    """rot[t, j, i] = ω_i·(pos_t,i − pos_j,i), float64, written with plain loops.

    Angle i < d/2 follows the row, d/2 ≤ i < 2·(d/2) the column (same frequencies ω = base^(−i'/(d/2))),
    an odd last angle is not rotated.
    """
    h, w = hw
    half = d // 2
    pos = torch.zeros(h * w, d, dtype=torch.float64)
    for r in range(h):
        for c in range(w):
            t = r * w + c
            for i in range(half):
                omega = base ** (-i / half)
                pos[t, i] = r * omega
                pos[t, half + i] = c * omega
    return pos[:, None, :] - pos[None, :, :]


def explicit_nala(q, k, v, params: NalaParams = DEFAULT, rope_hw=None, rope_base: float = 100.0):
    """O(N²) float64 evaluation of NaLa attention. q, k, v: (B, N, H, D) → (B, N, H, D)."""
    q, k, v = q.double(), k.double(), v.double()
    lam, tau, alpha, eps = params.lam, params.tau, params.alpha, params.eps
    dq, nq = _unit(q)
    dk, _ = _unit(k)
    mq = dq.abs() ** (lam * (tau + torch.tanh(nq)))  # (B, N, H, D)
    mk = k.abs() ** lam
    thq = ((math.pi / 4) * torch.tanh(alpha * dq)).clamp(-THETA_MAX, THETA_MAX)
    thk = ((math.pi / 4) * torch.tanh(alpha * dk)).clamp(-THETA_MAX, THETA_MAX)
    n = q.shape[1]
    mm = mq[:, :, None] * mk[:, None, :]  # (B, Nq, Nk, H, D)
    diff = thq[:, :, None] - thk[:, None, :]
    w_den = (mm * torch.cos(diff)).sum(-1)  # (B, Nq, Nk, H)
    if rope_hw is None:
        w_num = w_den
    else:
        rot = _rope_rotation(rope_hw, q.shape[-1], rope_base)[None, :, :, None, :]
        w_num = (mm * torch.cos(diff + rot)).sum(-1)
    num = torch.einsum("btjh,bjhe->bthe", w_num, v)
    return num / (w_den.sum(2)[..., None] + n * eps)


def _qkv(b, n, h, d, dv=None, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, n, h, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, n, h, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, n, h, dv or d, generator=g, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


# ------------------------------------------------------------------------------------ equality with N×N

PARAMS = [
    DEFAULT,
    NalaParams(lam=2.0, tau=0.25, alpha=20.0),  # the re-implementation's α, other powers
    NalaParams(lam=3.0, tau=0.5, alpha=0.5, eps=0.05),  # an ε large enough to matter
]


@pytest.mark.parametrize("params", PARAMS, ids=["default", "alpha20", "big-eps"])
@pytest.mark.parametrize("n", [1, 3, 37])
def test_reference_matches_explicit_kernel(params, n):
    q, k, v = _qkv(2, n, 3, 8, dv=5, seed=n)
    got = nala_attention_reference(q, k, v, params)
    assert got.shape == (2, n, 3, 5) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), explicit_nala(q, k, v, params), rtol=2e-4, atol=1e-5)


def test_eps_is_scaled_by_n():
    """ε enters as N·ε in the explicit form; a plain ε (no 1/N on S, z) is detectably different here."""
    params = PARAMS[2]
    q, k, v = _qkv(1, 37, 2, 8, seed=5)
    got = nala_attention_reference(q, k, v, params).double()
    unscaled = explicit_nala(q, k, v, NalaParams(params.lam, params.tau, params.alpha, params.eps / 37))
    assert (got - unscaled).abs().max() > 1e-2  # the test can tell the two apart...
    torch.testing.assert_close(got, explicit_nala(q, k, v, params), rtol=2e-4, atol=1e-5)  # ...and it is N·ε


@pytest.mark.parametrize("hw,d", [((1, 1), 4), ((3, 5), 8), ((5, 3), 5), ((4, 4), 6)])
def test_rope_matches_explicit_kernel(hw, d):
    n = hw[0] * hw[1]
    q, k, v = _qkv(2, n, 2, d, seed=d)
    params = NalaParams(alpha=2.0, eps=1e-3)
    got = nala_attention_reference(q, k, v, params, rope_hw=hw, rope_base=10.0)
    torch.testing.assert_close(got.double(), explicit_nala(q, k, v, params, hw, 10.0), rtol=2e-4, atol=1e-5)
    if n > 1:  # RoPE does something: not the same as no RoPE
        plain = nala_attention_reference(q, k, v, params)
        assert (got - plain).abs().max() > 1e-3


def test_rope_orientation_matters():
    """Rows and columns are not interchangeable: a 3×5 grid differs from a 5×3 grid on the same tokens."""
    q, k, v = _qkv(1, 15, 1, 8, seed=3)
    a = nala_attention_reference(q, k, v, rope_hw=(3, 5), rope_base=10.0)
    b = nala_attention_reference(q, k, v, rope_hw=(5, 3), rope_base=10.0)
    assert (a - b).abs().max() > 1e-3


def test_rope_grid_must_match_tokens():
    q, k, v = _qkv(1, 6, 1, 4)
    with pytest.raises(ValueError):
        nala_attention_reference(q, k, v, rope_hw=(1, 1))
    with pytest.raises(ValueError):
        nala_attention_reference(q, k, v, rope_hw=(2, 2))


def test_rope_angles_layout():
    ang = rope_angles((2, 3), 5, base=100.0)
    assert ang.shape == (6, 5) and ang.dtype == torch.float32
    # token 5 is row 1, column 2; d/2 = 2 frequencies 1 and 100^(-1/2)
    torch.testing.assert_close(ang[5], torch.tensor([1.0, 0.1, 2.0, 0.2, 0.0]))
    assert torch.all(ang[0] == 0)


def test_heads_and_batch_are_independent():
    q, k, v = _qkv(2, 9, 3, 4, seed=7)
    full = nala_attention_reference(q, k, v)
    one = nala_attention_reference(q[1:, :, 2:], k[1:, :, 2:], v[1:, :, 2:])
    torch.testing.assert_close(full[1:, :, 2:], one)


def test_shape_mismatch_rejected():
    q, k, v = _qkv(1, 4, 2, 4)
    with pytest.raises(ValueError):
        nala_attention_reference(q, k[:, :3], v)
    with pytest.raises(ValueError):
        nala_attention_reference(q, k, v[:, :, :1])


# ------------------------------------------------------------------------------------- kernel is ≥ 0


def test_theta_cap_is_a_hair_below_pi_over_4():
    """The cap keeps θ inside (−π/4, π/4) after rounding and changes nothing for moderate α."""
    assert 0 < math.pi / 4 - THETA_MAX <= 1e-4
    assert float(torch.tensor(THETA_MAX, dtype=torch.float32)) < math.pi / 4
    x = torch.randn(64, 16, dtype=torch.float64)
    f = nala_features(x, query=False, params=NalaParams(alpha=1.0))
    theta = torch.atan2(f[:, 16:], f[:, :16])
    dirn = x / x.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(theta, (math.pi / 4) * torch.tanh(dirn), rtol=1e-12, atol=1e-12)


def _kernel(q, k, params):
    """w = φq(q)·φk(k) for q: (Nq, d), k: (Nk, d) through the implementation's feature maps."""
    return nala_features(q, query=True, params=params) @ nala_features(k, query=False, params=params).T


@pytest.mark.parametrize("alpha", [1.0, 20.0, 1000.0])
@pytest.mark.parametrize("d", [1, 2, 3, 16, 64])
def test_kernel_is_nonnegative(alpha, d):
    """Random and adversarial pairs: opposite one-hots (θq − θk at its extreme), sign-flipped copies,
    large and small norms. |θq − θk| < π/2 must hold after fp32 rounding too."""
    params = NalaParams(alpha=alpha)
    g = torch.Generator().manual_seed(d)
    eye = torch.eye(d)
    r = torch.randn(32, d, generator=g)
    qs = torch.cat([eye, -eye, r, -r, r.sign(), torch.zeros(1, d)])
    for q_scale in (1e-6, 1.0, 1e4):
        for k_scale in (1e-6, 1.0, 1e5):
            w = _kernel(qs * q_scale, torch.cat([-qs, qs]) * k_scale, params)
            assert torch.isfinite(w).all()
            assert (w >= 0).all(), f"min {w.min().item():.3g} at q×{q_scale}, k×{k_scale}"


def test_feature_shapes_and_dtype():
    x = torch.randn(2, 5, 3, 7, dtype=torch.float16)
    for query in (True, False):
        f = nala_features(x, query=query, params=DEFAULT)
        assert f.shape == (2, 5, 3, 14) and f.dtype == torch.float32


# -------------------------------------------------------------------------------- the norm-awareness


def _relu_linear_attention(q, k, v):
    """Ordinary linear attention with φ = ReLU (positively homogeneous), float64."""
    fq, fk = q.double().relu(), k.double().relu()
    w = torch.einsum("bthd,bjhd->btjh", fq, fk)
    return torch.einsum("btjh,bjhe->bthe", w, v.double()) / w.sum(2)[..., None]


def test_query_scale_changes_nala_but_not_relu_attention():
    q, k, v = _qkv(2, 16, 2, 8, seed=11, dtype=torch.float64)
    q = 0.2 * q / q.norm(dim=-1, keepdim=True)  # ‖q‖ = 0.2: far from tanh saturation
    for c in (2.0, 5.0):
        base, scaled = nala_attention_reference(q, k, v), nala_attention_reference(c * q, k, v)
        assert (scaled - base).abs().max() > 0.02 * v.abs().max()  # a scale-invariant map moves it by ~ε only
        torch.testing.assert_close(_relu_linear_attention(c * q, k, v), _relu_linear_attention(q, k, v),
                                   rtol=1e-12, atol=1e-12)


def _mean_row_entropy(q, k) -> float:
    """Mean entropy of the attention rows the reference implies: with v = one-hot token ids the output row
    t is w_tj / (Σ_j w_tj + Nε), which normalises to the row distribution."""
    b, n, h, _ = q.shape
    v = torch.eye(n).view(1, n, 1, n).expand(b, n, h, n)
    rows = nala_attention_reference(q, k, v).double()
    assert (rows >= 0).all()
    p = rows / rows.sum(-1, keepdim=True)
    return float(-(p * p.clamp_min(1e-300).log()).sum(-1).mean())


def test_larger_query_norm_lowers_row_entropy():
    """Averaged over random inputs, scaling the query up sharpens the rows (DESIGN §2: entropy falls as ‖q‖
    grows, then flattens once tanh saturates)."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(32, 32, 2, 16, generator=g)
    q = q / q.norm(dim=-1, keepdim=True)
    k = torch.randn(32, 32, 2, 16, generator=g)
    ents = [_mean_row_entropy(c * q, k) for c in (0.1, 0.3, 1.0, 3.0)]
    assert all(a > b for a, b in zip(ents, ents[1:])), ents
    assert ents[0] - ents[-1] > 0.15, ents
    # the explicit form agrees on one of those row sets
    v = torch.eye(32).view(1, 32, 1, 32).expand(2, 32, 2, 32)
    torch.testing.assert_close(nala_attention_reference(q[:2], k[:2], v).double(),
                               explicit_nala(q[:2], k[:2], v), rtol=2e-4, atol=1e-6)


# ------------------------------------------------------------------------------------------ numerics


def test_zero_vectors_give_no_nan_in_output_or_gradients():
    q, k, v = _qkv(1, 5, 2, 4, seed=2)
    q[0, 1] = 0  # one zero query (both heads)
    k[0, 3, 1] = 0  # one zero key
    q[0, 2, 0, 1] = 0  # zero components in an otherwise nonzero vector
    k[0, 4, 0, 2] = 0
    zq, zk = torch.zeros_like(q), torch.zeros_like(k)
    for qq, kk in ((q, k), (zq, k), (q, zk), (zq, zk)):
        qq, kk, vv = (t.clone().requires_grad_() for t in (qq, kk, v))
        for rope in (None, (5, 1)):
            o = nala_attention_reference(qq, kk, vv, rope_hw=rope)
            assert torch.isfinite(o).all()
            o.square().sum().backward()
            assert all(torch.isfinite(t.grad).all() for t in (qq, kk, vv))
            qq.grad = kk.grad = vv.grad = None
    # a zero query attends to nothing: its output is 0, not a NaN or an average
    o = nala_attention_reference(q, k, v)
    assert torch.all(o[0, 1] == 0)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 3e-3), (torch.bfloat16, 2e-2)])
def test_half_precision_inputs(dtype, tol):
    q, k, v = _qkv(2, 37, 2, 16, seed=4)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    got = nala_attention_reference(q, k, v)
    assert got.dtype == dtype
    ref = nala_attention_reference(q.float(), k.float(), v.float())
    torch.testing.assert_close(got.float(), ref, rtol=tol, atol=tol)


def test_fp16_does_not_overflow_or_underflow():
    """|k|³ of |k| = 50 is 125000 > fp16 max; |dir q|^4.5 of small components underflows fp16.
    Feature maps and sums are fp32, so fp16 inputs still give the fp32 answer."""
    q, k, v = _qkv(1, 300, 1, 16, seed=6)
    k = 50 * k / k.abs().amax(-1, keepdim=True)
    q = 5 * q
    got = nala_attention_reference(q.half(), k.half(), v.half())
    assert torch.isfinite(got).all()
    ref = nala_attention_reference(q.half().float(), k.half().float(), v.half().float())
    torch.testing.assert_close(got.float(), ref, rtol=3e-3, atol=3e-3)


def test_gradcheck_float64():
    q, k, v = _qkv(1, 3, 1, 3, dtype=torch.float64, seed=8)
    inputs = tuple(t.clone().requires_grad_() for t in (q, k, v))
    params = NalaParams(alpha=2.0, eps=1e-3)
    assert nala_attention_reference(*inputs, params).dtype == torch.float64
    assert torch.autograd.gradcheck(lambda a, b, c: nala_attention_reference(a, b, c, params), inputs)
    assert torch.autograd.gradcheck(lambda a, b, c: nala_attention_reference(a, b, c, params, rope_hw=(3, 1)), inputs)


def test_float64_matches_explicit_tightly():
    q, k, v = _qkv(1, 7, 2, 4, dtype=torch.float64, seed=9)
    torch.testing.assert_close(nala_attention_reference(q, k, v), explicit_nala(q, k, v), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------------------- dispatch


def test_dispatch_on_cpu():
    q, k, v = _qkv(1, 6, 2, 4, seed=10)
    ref = nala_attention_reference(q, k, v, rope_hw=(2, 3))
    for backend in ("auto", "reference"):
        assert torch.equal(nala_attention(q, k, v, rope_hw=(2, 3), backend=backend), ref)
    with pytest.raises(RuntimeError):
        nala_attention(q, k, v, backend="triton")  # CPU tensors: the kernel cannot run, and says so
    with pytest.raises(ValueError):
        nala_attention(q, k, v, backend="fast")  # type: ignore[arg-type]
    assert set(BACKENDS) == {"auto", "triton", "reference"}
