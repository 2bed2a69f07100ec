"""NaLaSR: a lightweight super-resolution network whose global token mixer is NaLa attention.

Reads top to bottom: config, blocks, trunk, upsampler, model, variants, factory (DESIGN.md §3).
Inside the trunk features are kept token-major, (B, H, W, C): Linear layers act on the last axis and a
permute to (B, C, H, W) is a free channels-last view for the depthwise convolutions.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..ops import (BACKENDS, Backend, NalaParams, bias_column_weight, conv2d_bias_add, depthwise_conv,
                   dwconv_gated_norm, dwconv_gelu, dwconv_residual_norm, fused_dwconv_wanted, fused_gate_wanted,
                   fused_residual_wanted, layer_norm, nala_attention)
from ..ops import add_into as _add
from ..ops import reusable as _reusable

SCALES = (2, 3, 4)


@dataclass(frozen=True)
class NaLaSRConfig:
    """Everything needed to rebuild a NaLaSR; stored inside every weights file and checkpoint."""

    scale: int = 4
    dim: int = 64  # C, feature channels
    groups: int = 4  # residual groups
    blocks: int = 4  # NaLa blocks per group
    heads: int = 4  # attention heads, head dim = dim // heads
    ffn_ratio: float = 2.0
    lepe_kernel: int = 5  # depthwise conv on v added to the attention output (local positional info)
    rope: bool = False  # 2-D RoPE on the numerator of the attention
    lam: float = 3.0
    tau: float = 0.5
    alpha: float = 1.0
    eps: float = 1e-6
    layerscale: float = 1.0  # initial value of the per-channel residual scales
    in_chans: int = 3

    def __post_init__(self) -> None:
        # Configs also arrive from file headers: check types and ranges here, once, for every source.
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" and not isinstance(v, bool):
                raise ValueError(f"{f.name}={v!r} is not a bool")
            if f.type == "int" and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{f.name}={v!r} is not a positive int")
            if f.type == "float" and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)):
                raise ValueError(f"{f.name}={v!r} is not a finite number")
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.lepe_kernel % 2 == 0:
            raise ValueError(f"lepe_kernel must be odd, got {self.lepe_kernel}")
        if self.ffn_ratio <= 0 or self.eps <= 0:
            raise ValueError("ffn_ratio and eps must be positive")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def nala(self) -> NalaParams:
        return NalaParams(self.lam, self.tau, self.alpha, self.eps)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "NaLaSRConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(sorted(unknown))}")
        return cls(**d)


# ----------------------------------------------------------------------------------------------- blocks


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm over the last axis (same parameters), routed through :func:`nalasr.ops.layer_norm`."""

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)


def _dwconv(x: Tensor, conv: nn.Conv2d) -> Tensor:
    """Depthwise ``conv`` (padding K // 2) on a token-major map: (B, H, W, C) → (B, H, W, C)."""
    return depthwise_conv(x, conv.weight, conv.bias)


# Inference writes results into intermediates it owns (nalasr.ops.reusable / add_into, imported as _reusable /
# _add); under autograd the plain out-of-place ops run, so training is unchanged.


def _mul(buf: Tensor, other: Tensor) -> Tensor:
    """buf · other."""
    return buf.mul_(other) if _reusable(buf, other) else buf * other


def _folded(lin: nn.Linear, gamma: Tensor) -> tuple[Tensor, Tensor]:
    """lin's (C_out, C_in) weight and (C_out,) bias with the layer scale γ folded in: γ·lin(x) = x·Wᵀ + b of these.
    Folding costs two C_out·C_in products and makes the residual update after it a plain add, which PyTorch
    vectorises on CUDA, where x + γ·y with a broadcast γ runs the slow strided elementwise path
    (benchmarks/fusion_gpu.py)."""
    return lin.weight * gamma[:, None], lin.bias * gamma


def _scaled_linear(x: Tensor, lin: nn.Linear, gamma: Tensor) -> Tensor:
    """γ·lin(x) as one product (:func:`_folded`)."""
    return F.linear(x, *_folded(lin, gamma))


def _project(y: Tensor, lin: nn.Linear, gamma: Tensor, residual: Tensor | None = None) -> Tensor:
    """γ·lin(y); with ``residual`` (a buffer the caller owns, no autograd): residual + γ·lin(y), in that buffer.

    y (..., C_in), or (..., C_in + pad) from a fused kernel asked for the ones column: then the bias is the
    weight of that column and one in-place GEMM (β = 1) does product, bias and residual add: the add pass, a
    read of two maps and a write of one, goes away (nalasr.ops.fused_residual_wanted)."""
    if residual is None:
        return _scaled_linear(y, lin, gamma)
    if y.shape[-1] == lin.in_features or not _reusable(residual, y, lin.weight):
        return _add(residual, _scaled_linear(y[..., :lin.in_features], lin, gamma))
    w = bias_column_weight(*_folded(lin, gamma), pad=y.shape[-1] - lin.in_features)
    residual.view(-1, residual.shape[-1]).addmm_(y.reshape(-1, y.shape[-1]), w.t())
    return residual


class NalaMixer(nn.Module):
    """Global token mixing: q, k, v, g from one Linear; NaLa attention + LePE; LayerNorm; SiLU gate."""

    def __init__(self, cfg: NaLaSRConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkvg = nn.Linear(cfg.dim, 4 * cfg.dim)
        self.lepe = nn.Conv2d(cfg.dim, cfg.dim, cfg.lepe_kernel, padding=cfg.lepe_kernel // 2, groups=cfg.dim)
        self.norm = LayerNorm(cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.backend: Backend = "auto"

    def forward(self, x: Tensor, out_scale: Tensor, residual: Tensor | None = None) -> Tensor:
        """x: (B, H, W, C) → out_scale·Mixer(x), (B, H, W, C); out_scale (C,) is the block's layer scale. With
        ``residual`` (inference, a buffer the caller owns): residual + out_scale·Mixer(x), in that buffer."""
        b, h, w, c = x.shape
        # Four C-wide products instead of one 4C-wide, the same numbers: q, k, v, g come out contiguous, so the
        # attention, LePE and the gate read them densely (strided views of one (B, H, W, 4C) output put SiLU, the
        # gate product and cuDNN's copy of v on PyTorch's slow strided path): 29.2 against 32.1 ms at 540×960 on
        # the H200, 10-20% of the CPU forward.
        q, k, v, g = (F.linear(x, wt, bs) for wt, bs in zip(self.qkvg.weight.chunk(4), self.qkvg.bias.chunk(4)))
        heads = (b, h * w, self.cfg.heads, self.cfg.head_dim)
        o = self._attend(q.reshape(heads), k.reshape(heads), v.reshape(heads), (h, w))  # may be a head-major view
        if fused_gate_wanted(x):  # norm(o + LePE)·SiLU(g) in one pass (with LePE's conv too unless NALASR_FUSED_DWCONV=0)
            gated = dwconv_gated_norm(v, self.lepe.weight, self.lepe.bias, o.reshape(b, h, w, c), g,
                                      self.norm.weight, self.norm.bias, self.norm.eps, ones_column=residual is not None)
            return _project(gated, self.proj, out_scale, residual)
        # LePE(v) + o, summed in the conv's token-major output (o itself is never copied to token-major).
        o = _add(_dwconv(v, self.lepe).reshape(heads), o).reshape(b, h, w, c)
        gate = F.silu(g, inplace=_reusable(g))
        return _project(_mul(self.norm(o), gate), self.proj, out_scale, residual)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, hw: tuple[int, int]) -> Tensor:
        """(B, N, H, D) × 3 → (B, N, H, D) on the (rows, cols) token grid ``hw``."""
        return nala_attention(q, k, v, self.cfg.nala, rope_hw=hw if self.cfg.rope else None, backend=self.backend)


class ConvFFN(nn.Module):
    """Linear → depthwise 3×3 → GELU → Linear: the FFN carries local mixing too."""

    def __init__(self, dim: int, ratio: float) -> None:
        super().__init__()
        hidden = int(dim * ratio)
        self.fc1 = nn.Linear(dim, hidden)
        self.dw = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor, out_scale: Tensor, residual: Tensor | None = None) -> Tensor:
        """x: (B, H, W, C) → out_scale·FFN(x); out_scale (C,) is the block's layer scale. With ``residual``
        (inference, a buffer the caller owns): residual + out_scale·FFN(x), in that buffer."""
        h = self.fc1(x)
        if fused_dwconv_wanted(h):  # conv, bias and GELU in one pass
            a = dwconv_gelu(h, self.dw.weight, self.dw.bias, ones_column=residual is not None)
            return _project(a, self.fc2, out_scale, residual)
        h = _dwconv(h, self.dw)
        return _project(torch.ops.aten.gelu_(h) if _reusable(h) else F.gelu(h), self.fc2, out_scale, residual)


class NalaBlock(nn.Module):
    """x + CPE(x); x + γ1·Mixer(LN x); x + γ2·FFN(LN x), on (B, H, W, C)."""

    def __init__(self, cfg: NaLaSRConfig) -> None:
        super().__init__()
        self.cpe = nn.Conv2d(cfg.dim, cfg.dim, 3, padding=1, groups=cfg.dim)
        self.norm1 = LayerNorm(cfg.dim)
        self.mixer = NalaMixer(cfg)
        self.norm2 = LayerNorm(cfg.dim)
        self.ffn = ConvFFN(cfg.dim, cfg.ffn_ratio)
        self.gamma1 = nn.Parameter(torch.full((cfg.dim,), cfg.layerscale))
        self.gamma2 = nn.Parameter(torch.full((cfg.dim,), cfg.layerscale))

    def forward(self, x: Tensor) -> Tensor:
        if fused_dwconv_wanted(x):  # x + CPE(x) and its LayerNorm in one pass
            x, h = dwconv_residual_norm(x, self.cpe.weight, self.cpe.bias, self.norm1.weight, self.norm1.bias,
                                        self.norm1.eps)
        else:
            x = _add(_dwconv(x, self.cpe), x)  # x + CPE(x): a new tensor, the caller's x is left alone
            h = self.norm1(x)
        if fused_residual_wanted(x):  # x is a fresh buffer here: both residual updates go into it, in place
            x = self.mixer(h, self.gamma1, residual=x)
            return self.ffn(self.norm2(x), self.gamma2, residual=x)
        x = _add(x, self.mixer(h, self.gamma1))
        return _add(x, self.ffn(self.norm2(x), self.gamma2))


class ResidualGroup(nn.Module):
    """Blocks then a 3×3 conv, with a skip over the whole group."""

    def __init__(self, cfg: NaLaSRConfig) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(NalaBlock(cfg) for _ in range(cfg.blocks)))
        self.conv = nn.Conv2d(cfg.dim, cfg.dim, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.blocks(x).permute(0, 3, 1, 2)
        return conv2d_bias_add(y, self.conv.weight, self.conv.bias, x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


# ------------------------------------------------------------------------------------------------ model


class Trunk(nn.Module):
    """Shallow conv, residual groups, conv; the part shared by every scale. (B, 3, H, W) → (B, C, H, W)."""

    def __init__(self, cfg: NaLaSRConfig) -> None:
        super().__init__()
        self.head = nn.Conv2d(cfg.in_chans, cfg.dim, 3, padding=1)
        self.groups = nn.Sequential(*(ResidualGroup(cfg) for _ in range(cfg.groups)))
        self.tail = nn.Conv2d(cfg.dim, cfg.dim, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        # A channels-last image (3 channels: a cheap copy) makes the head conv's output channels-last, so
        # the token-major stream below is contiguous. From an NCHW feature map every block would work on a
        # transposed view: LayerNorm copies it, and each residual update reads/writes across the layout.
        feat = conv2d_bias_add(x.contiguous(memory_format=torch.channels_last), self.head.weight, self.head.bias)
        deep = self.groups(feat.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return conv2d_bias_add(deep, self.tail.weight, self.tail.bias, feat)


class Upsampler(nn.Sequential):
    """One conv to out·s² channels, then pixel shuffle: (B, C, H, W) → (B, out, sH, sW)."""

    def __init__(self, dim: int, scale: int, out_chans: int = 3) -> None:
        super().__init__(nn.Conv2d(dim, out_chans * scale * scale, 3, padding=1), nn.PixelShuffle(scale))
        # Start as plain bilinear upscaling (the residual is zero): training begins from a sane image.
        nn.init.zeros_(self[0].weight)
        nn.init.zeros_(self[0].bias)


def reconstruct(x: Tensor, trunk: Trunk, upsampler: Upsampler, scale: int) -> Tensor:
    """Bilinear upsampling of x plus the learned detail: (B, 3, H, W) → (B, 3, sH, sW)."""
    base = F.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)
    return _add(base, upsampler(trunk(x)))  # into base's buffer: the output keeps x's (NCHW) layout


class NaLaSR(nn.Module):
    """NaLaSR super-resolution network.

    Input (B, 3, H, W) in [0, 1], any H, W ≥ 1 (attention is global, nothing is windowed, so no padding is
    needed); output (B, 3, s·H, s·W), not clamped. A bilinear upsampling of the input is added, so the
    network learns the missing detail only.
    """

    def __init__(self, cfg: NaLaSRConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.trunk = Trunk(cfg)
        self.upsampler = Upsampler(cfg.dim, cfg.scale, cfg.in_chans)

    def forward(self, x: Tensor) -> Tensor:
        return reconstruct(x, self.trunk, self.upsampler, self.cfg.scale)

    def set_attention_backend(self, backend: Backend) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown attention backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        for m in self.modules():
            if isinstance(m, NalaMixer):
                m.backend = backend


# --------------------------------------------------------------------------------------------- variants

VARIANTS: dict[str, dict] = {
    "small": dict(dim=48, groups=2, blocks=3, heads=3),
    "default": dict(dim=64, groups=4, blocks=4, heads=4),
}
DEFAULT_VARIANT = "default"


# ---------------------------------------------------------------------------------------------- factory


def config_for(variant: str = DEFAULT_VARIANT, scale: int = 4, **overrides) -> NaLaSRConfig:
    """The config of a named variant at a scale; ``overrides`` replace single fields."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    return NaLaSRConfig(scale=scale, **{**VARIANTS[variant], **overrides})


def variant_of(cfg: NaLaSRConfig) -> str | None:
    """The variant name ``cfg`` is (at any scale), or None for a custom config."""
    for name, fields in VARIANTS.items():
        if NaLaSRConfig(scale=cfg.scale, **fields) == cfg:
            return name
    return None


def create_model(variant: str = DEFAULT_VARIANT, scale: int = 4, **overrides) -> NaLaSR:
    return NaLaSR(config_for(variant, scale, **overrides))


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
