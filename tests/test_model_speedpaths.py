"""The CPU speed paths compute the same numbers as the plain formulation of docs/design.md §2–§3.

The attention reference splits φ into its cos and sin halves, contracts them with batched matmuls, takes
|dir|^p as exp(p·log|dir|) and, where autograd does not record, overwrites its intermediates in place; the
network computes q, k, v, g with four products on CPU, runs its token-major stream channels-last and adds
residuals in place at inference. None of that may change the math: here both are compared with the plain
formulation written out below (concatenated φ, einsum, torch.pow, out-of-place everything), and the
inference path with the autograd path.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from nalasr.model import NaLaSR, create_model
from nalasr.ops import NalaParams, nala_attention_reference
from nalasr.ops.nala import NORM_EPS, THETA_MAX, nonneg_pow, rope_angles
from nalasr.io.weights import load_weights

WEIGHTS = Path(__file__).resolve().parents[1] / "weights"


# ------------------------------------------------------------------------------------- plain formulation


def _plain_features(x, query, p: NalaParams, shift=None):
    x = x.to(torch.promote_types(x.dtype, torch.float32))
    ss = (x * x).sum(-1, keepdim=True)
    inv = torch.rsqrt(ss + NORM_EPS)
    d = x * inv
    mag = d.abs().pow(p.lam * (p.tau + torch.tanh(ss * inv))) if query else x.abs().pow(p.lam)
    theta = ((math.pi / 4) * torch.tanh(p.alpha * d)).clamp(-THETA_MAX, THETA_MAX)
    if shift is not None:
        theta = theta + shift
    return torch.cat([mag * torch.cos(theta), mag * torch.sin(theta)], dim=-1)


def _plain_attention(q, k, v, p: NalaParams = NalaParams(), rope_hw=None, rope_base=100.0):
    """The reference as first written: concatenated φ, einsum contractions."""
    n = q.shape[1]
    fq, fk = _plain_features(q, True, p), _plain_features(k, False, p)
    vf = v.to(fq.dtype)
    z = fk.sum(1) / n
    den = torch.einsum("bnhf,bhf->bnh", fq, z) + p.eps
    if rope_hw is not None:
        ang = rope_angles(rope_hw, q.shape[-1], rope_base, q.device)[None, :, None, :]
        fq, fk = _plain_features(q, True, p, ang), _plain_features(k, False, p, ang)
    s = torch.einsum("bnhf,bnhe->bhfe", fk, vf) / n
    return (torch.einsum("bnhf,bhfe->bnhe", fq, s) / den[..., None]).to(q.dtype)


def _plain_forward(model: NaLaSR, x: torch.Tensor) -> torch.Tensor:
    """NaLaSR.forward written out plainly (the network as first committed), with the model's parameters."""
    cfg = model.cfg

    def dw(t, conv):
        return conv(t.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)

    def mixer(m, t):
        b, h, w, c = t.shape
        q, k, v, g = m.qkvg(t).chunk(4, dim=-1)
        heads = (b, h * w, cfg.heads, cfg.head_dim)
        o = _plain_attention(q.reshape(heads), k.reshape(heads), v.reshape(heads), cfg.nala,
                             rope_hw=(h, w) if cfg.rope else None).reshape(b, h, w, c)
        o = o + dw(v, m.lepe)
        return m.proj(m.norm(o) * F.silu(g))

    def block(bl, t):
        t = t + dw(t, bl.cpe)
        t = t + bl.gamma1 * mixer(bl.mixer, bl.norm1(t))
        return t + bl.gamma2 * bl.ffn.fc2(F.gelu(dw(bl.ffn.fc1(bl.norm2(t)), bl.ffn.dw)))

    trunk = model.trunk
    feat = trunk.head(x)
    t = feat.permute(0, 2, 3, 1)
    for group in trunk.groups:
        s = t
        for bl in group.blocks:
            s = block(bl, s)
        t = t + group.conv(s.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
    deep = feat + trunk.tail(t.permute(0, 3, 1, 2))
    base = F.interpolate(x, scale_factor=cfg.scale, mode="bilinear", align_corners=False)
    return base + model.upsampler(deep)


def _rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).square().mean().sqrt() / b.square().mean().sqrt().clamp_min(1e-300))


def _qkv(b, n, h, d, seed=0, dtype=torch.float32, strided=False):
    """q, k, v as the network passes them: optionally views into one (B, N, 4·H·D) buffer."""
    g = torch.Generator().manual_seed(seed)
    if strided:
        buf = torch.randn(b, n, 4 * h * d, generator=g, dtype=dtype)
        return tuple(buf[..., i * h * d:(i + 1) * h * d].reshape(b, n, h, d) for i in range(3))
    return tuple(torch.randn(b, n, h, d, generator=g, dtype=dtype) for _ in range(3))


def _model(variant="small", scale=2, seed=0, **overrides) -> NaLaSR:
    torch.manual_seed(seed)
    model = create_model(variant, scale, **overrides).eval()
    with torch.no_grad():  # every parameter random, the upsampler too (a fresh one is zero)
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


# ------------------------------------------------------------------------------------------ attention

PARAMS = {
    "default": NalaParams(),
    "alpha20": NalaParams(lam=2.0, tau=0.25, alpha=20.0),  # |α| > 4: the θ cap runs
    "tau0": NalaParams(tau=0.0, eps=1e-3),  # p = 0 possible: torch.pow runs
}


@pytest.mark.parametrize("name", list(PARAMS))
@pytest.mark.parametrize("rope", [None, (5, 7)])
@pytest.mark.parametrize("grad", [False, True])
def test_reference_equals_plain_formulation(name, rope, grad):
    params = PARAMS[name]
    q, k, v = _qkv(2, 35, 3, 8, seed=1, strided=True)
    with torch.set_grad_enabled(grad):
        q, k, v = (t.clone().requires_grad_(grad) for t in (q, k, v))
        got = nala_attention_reference(q, k, v, params, rope_hw=rope)
        want = _plain_attention(q, k, v, params, rope_hw=rope)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert _rel_rms(got, want) < 1e-6
    q64, k64, v64 = (t.detach().double() for t in (q, k, v))
    torch.testing.assert_close(nala_attention_reference(q64, k64, v64, params, rope_hw=rope),
                               _plain_attention(q64, k64, v64, params, rope_hw=rope), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("rope", [None, (6, 6)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_inference_path_is_the_autograd_path(rope, dtype):
    """In-place buffers and the no-autograd exp/log give bit-identical outputs to the recorded path."""
    q, k, v = _qkv(1, 36, 4, 16, seed=2, dtype=dtype, strided=True)
    with torch.inference_mode():
        fast = nala_attention_reference(q, k, v, rope_hw=rope)
    recorded = nala_attention_reference(*(t.clone().requires_grad_() for t in (q, k, v)), rope_hw=rope)
    assert torch.equal(fast, recorded.detach())


def test_reference_leaves_its_inputs_alone():
    q, k, v = _qkv(1, 20, 2, 8, seed=3, strided=True)
    before = [t.clone() for t in (q, k, v)]
    with torch.inference_mode():
        nala_attention_reference(q, k, v, rope_hw=(4, 5))
        nala_attention_reference(q, k, v)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v)))


def test_fast_pow_matches_pow():
    base = torch.tensor([0.0, 1e-30, 1e-12, 1e-3, 0.25, 0.5, 1.0, 1.5]).repeat(4, 1)
    power = torch.tensor([1.5, 2.0, 3.3, 4.49])[:, None]
    want = base.pow(power)
    with torch.no_grad():
        got = nonneg_pow(base.clone(), power, positive=True)
    torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-37)
    assert torch.all(got[:, 0] == 0)
    b = base.clone().requires_grad_()
    nonneg_pow(b, power, positive=True).sum().backward()
    assert torch.isfinite(b.grad).all() and torch.all(b.grad[:, 0] == 0)


def test_zero_exponent_keeps_pow():
    """τ = 0 and a zero query: p = 0, and 0^0 = 1 must not become exp(0·log 0) = NaN."""
    q, k, v = _qkv(1, 6, 1, 4, seed=4)
    q[0, 2] = 0
    with torch.inference_mode():
        got = nala_attention_reference(q, k, v, PARAMS["tau0"])
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, _plain_attention(q, k, v, PARAMS["tau0"]), rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------------------------------- network


@pytest.mark.parametrize("variant,scale,overrides", [
    ("small", 2, {}), ("small", 3, {"rope": True}), ("default", 4, {}), ("default", 2, {"alpha": 6.0}),
])
def test_network_equals_plain_forward(variant, scale, overrides):
    model = _model(variant, scale, **overrides)
    x = torch.rand(1, 3, 11, 9, generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        fast = model(x)
        plain = _plain_forward(model, x)
    assert fast.shape == plain.shape and fast.is_contiguous()
    assert _rel_rms(fast, plain) < 1e-5
    assert torch.equal(model(x).detach(), fast)  # with autograd recording: the same bits


@pytest.mark.parametrize("name", ["nalasr_default_x2", "nalasr_default_x3", "nalasr_default_x4"])
def test_shipped_weights_give_the_same_images(name):
    model = load_weights(WEIGHTS / f"{name}.safetensors")
    x = torch.rand(1, 3, 20, 24, generator=torch.Generator().manual_seed(6))
    with torch.inference_mode():
        assert _rel_rms(model(x), _plain_forward(model, x)) < 1e-5


def test_network_leaves_its_input_alone_and_keeps_layouts():
    model = _model()
    x = torch.rand(2, 3, 7, 10, generator=torch.Generator().manual_seed(7))
    before = x.clone()
    with torch.inference_mode():
        y = model(x)
        y_cl = model(x.contiguous(memory_format=torch.channels_last))
    assert torch.equal(x, before)
    assert y.is_contiguous()
    assert _rel_rms(y_cl, y) < 1e-6


def test_gradients_equal_plain_forward():
    model = _model(seed=8)
    x = torch.rand(1, 3, 6, 5, generator=torch.Generator().manual_seed(8))
    grads = []
    for fwd in (model, lambda t: _plain_forward(model, t)):
        model.zero_grad()
        fwd(x).square().mean().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for n, g in grads[0].items():
        assert _rel_rms(g, grads[1][n]) < 1e-4, n


def test_cpu_autocast_bf16_runs_the_same_with_and_without_autograd():
    """Under autocast intermediates change dtype: the in-place paths must step aside, not mix dtypes."""
    model = _model(rope=True)
    x = torch.rand(1, 3, 6, 8, generator=torch.Generator().manual_seed(9))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.no_grad():
            a = model(x)
        b = model(x)
        b.float().square().mean().backward()
    assert torch.isfinite(a).all() and torch.equal(a, b.detach())
    assert _rel_rms(a, model(x).detach()) < 0.05


@pytest.mark.parametrize("gate", [True, False])
def test_ones_column_paths_equal_plain_forward(monkeypatch, gate):
    """The CUDA inference layout of the blocks, run on CPU: the FFN's conv (and with gate=True the mixer's gate)
    hand the next Linear the ones-column layout, as the fused kernels do, so the residual updates go through
    the in-place GEMM with the bias in the ones column (nalasr.ops.linear_residual)."""
    import nalasr.ops as ops

    def ones(f):
        return lambda *a: ops.with_ones_column(f(*a))

    monkeypatch.setattr(ops, "conv_gelu", ones(ops.conv_gelu))
    if gate:
        monkeypatch.setattr(ops, "lepe_gated_norm", ones(ops.lepe_gated_norm))
    model = _model("default", 4, seed=3)
    x = torch.rand(1, 3, 9, 13, generator=torch.Generator().manual_seed(10))
    with torch.inference_mode():
        fast = model(x)
        plain = _plain_forward(model, x)
    assert _rel_rms(fast, plain) < 1e-5


def test_linear_residual_puts_bias_and_residual_into_one_gemm():
    from nalasr.ops import linear_residual, scaled_linear, with_ones_column

    g = torch.Generator().manual_seed(11)
    lin = torch.nn.Linear(24, 16)
    gamma, y, r = torch.rand(16, generator=g), torch.randn(2, 3, 5, 24, generator=g), torch.randn(2, 3, 5, 16, generator=g)
    want = r + scaled_linear(y, lin.weight, lin.bias, gamma)
    with torch.no_grad():
        buf = r.clone()
        got = linear_residual(with_ones_column(y), lin.weight, lin.bias, gamma, buf)
    assert got.data_ptr() == buf.data_ptr()  # in place
    torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-5)
