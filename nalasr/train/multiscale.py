"""One trunk, one upsampler per scale: the training-time model from which per-scale NaLaSRs are exported."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from torch import Tensor, nn

from ..model import NaLaSR, NaLaSRConfig, Trunk, Upsampler, reconstruct


class MultiScaleNaLaSR(nn.Module):
    """Shared trunk (B, 3, H, W) → (B, C, H, W) and an upsampler for each scale (MDSR-style).

    With one scale this is exactly a NaLaSR; with several, every step trains the trunk whatever the
    scale, which is how x2, x3 and x4 weights come out of one run on a small GPU budget.
    """

    def __init__(self, cfg: NaLaSRConfig, scales: list[int]) -> None:
        super().__init__()
        self.cfg = cfg
        self.scales = list(scales)
        self.trunk = Trunk(cfg)
        self.upsamplers = nn.ModuleDict({str(s): Upsampler(cfg.dim, s, cfg.in_chans) for s in scales})

    def forward(self, x: Tensor, scale: int, trunk: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        """``trunk``: what to run in place of ``self.trunk`` with the same parameters (the trainer's CUDA-graphed
        replay of it); None for the module itself."""
        return reconstruct(x, trunk or self.trunk, self.upsamplers[str(scale)], scale)

    def export(self, scale: int) -> NaLaSR:
        """A standalone NaLaSR for ``scale`` holding copies of this model's weights (on CPU, fp32)."""
        model = NaLaSR(dataclasses.replace(self.cfg, scale=scale))
        model.trunk.load_state_dict(self.trunk.state_dict())
        model.upsampler.load_state_dict(self.upsamplers[str(scale)].state_dict())
        return model.float().cpu().eval()

    def init_from(self, model: NaLaSR) -> list[int]:
        """Copy a NaLaSR's trunk (and its upsampler where the scale matches); returns the scales initialised."""
        self.trunk.load_state_dict(model.trunk.state_dict())
        done = [model.cfg.scale] if str(model.cfg.scale) in self.upsamplers else []
        for s in done:
            self.upsamplers[str(s)].load_state_dict(model.upsampler.state_dict())
        return done
