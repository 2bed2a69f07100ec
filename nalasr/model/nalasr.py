"""NaLaSR: a lightweight super-resolution network whose global token mixer is NaLa attention.

Reads top to bottom: config, blocks, trunk, upsampler, model, variants, factory (docs/design.md).
The blocks are the math; which kernel runs each step (fused on CUDA inference, plain PyTorch elsewhere) is
decided in :mod:`nalasr.ops`.
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

from .. import ops
from ..ops import BACKENDS, Backend, NalaParams

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
        return ops.layer_norm(x, self.weight, self.bias, self.eps)


# Every block takes its residual stream and returns it updated: x + γ·f(x). At inference the ops write into
# the stream's buffer (which the block owns: CPE made it), so no (B, H, W, C) map is allocated per update.


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

    def forward(self, x: Tensor, gamma: Tensor, residual: Tensor) -> Tensor:
        """residual + γ·Mixer(x): x, residual (B, H, W, C), γ (C,) the block's layer scale."""
        b, h, w, c = x.shape
        # Four C-wide products instead of one 4C-wide, the same numbers: q, k, v, g come out contiguous, so the
        # attention, LePE and the gate read them densely (strided views of one (B, H, W, 4C) output put SiLU, the
        # gate product and cuDNN's copy of v on PyTorch's slow strided path): 29.2 against 32.1 ms at 540×960 on
        # the H200, 10-20% of the CPU forward.
        q, k, v, g = (F.linear(x, wt, bs) for wt, bs in zip(self.qkvg.weight.chunk(4), self.qkvg.bias.chunk(4)))
        heads = (b, h * w, self.cfg.heads, self.cfg.head_dim)
        o = self._attend(q.reshape(heads), k.reshape(heads), v.reshape(heads), (h, w))  # may be a head-major view
        y = ops.lepe_gated_norm(v, self.lepe.weight, self.lepe.bias, o, g, self.norm.weight, self.norm.bias,
                                self.norm.eps)  # LayerNorm(o + LePE(v))·SiLU(g)
        return ops.linear_residual(y, self.proj.weight, self.proj.bias, gamma, residual)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, hw: tuple[int, int]) -> Tensor:
        """(B, N, H, D) × 3 → (B, N, H, D) on the (rows, cols) token grid ``hw``."""
        return ops.nala_attention(q, k, v, self.cfg.nala, rope_hw=hw if self.cfg.rope else None, backend=self.backend)


class ConvFFN(nn.Module):
    """Linear → depthwise 3×3 → GELU → Linear: the FFN carries local mixing too."""

    def __init__(self, dim: int, ratio: float) -> None:
        super().__init__()
        hidden = int(dim * ratio)
        self.fc1 = nn.Linear(dim, hidden)
        self.dw = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor, gamma: Tensor, residual: Tensor) -> Tensor:
        """residual + γ·FFN(x): x, residual (B, H, W, C), γ (C,) the block's layer scale."""
        a = ops.conv_gelu(self.fc1(x), self.dw.weight, self.dw.bias)  # GELU(DWConv(fc1 x)), (B, H, W, hidden)
        return ops.linear_residual(a, self.fc2.weight, self.fc2.bias, gamma, residual)


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
        # x + CPE(x) and LN of it; a new tensor: the caller's x is left alone.
        x, h = ops.dwconv_residual_norm(x, self.cpe.weight, self.cpe.bias, self.norm1.weight, self.norm1.bias,
                                        self.norm1.eps)
        x = self.mixer(h, self.gamma1, residual=x)
        return self.ffn(self.norm2(x), self.gamma2, residual=x)


class ResidualGroup(nn.Module):
    """Blocks then a 3×3 conv, with a skip over the whole group."""

    def __init__(self, cfg: NaLaSRConfig) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(NalaBlock(cfg) for _ in range(cfg.blocks)))
        self.conv = nn.Conv2d(cfg.dim, cfg.dim, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.blocks(x).permute(0, 3, 1, 2)
        return ops.conv2d_bias_add(y, self.conv.weight, self.conv.bias, x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


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
        feat = ops.conv2d_bias_add(x.contiguous(memory_format=torch.channels_last), self.head.weight, self.head.bias)
        deep = self.groups(feat.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return ops.conv2d_bias_add(deep, self.tail.weight, self.tail.bias, feat)


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
    return ops.residual_add(base, upsampler(trunk(x)))  # into base's buffer: the output keeps x's (NCHW) layout


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
