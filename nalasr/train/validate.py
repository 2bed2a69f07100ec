"""Validation during training: the evaluation protocol on a small held-out set, on the training device."""

from __future__ import annotations

import torch

from ..eval.evaluate import PreparedSet, prepare_set, quick_score
from .multiscale import MultiScaleNaLaSR


class Validator:
    """Decodes the set and makes each scale's LR once; ``run`` scores a model with the protocol."""

    def __init__(self, val_set: str, scales: list[int], data_root: str | None, device: torch.device) -> None:
        self.sets: dict[int, PreparedSet] = {
            s: prepare_set(val_set, s, data_root=data_root, device=device) for s in scales
        }

    @torch.no_grad()
    def run(self, model: MultiScaleNaLaSR, scale: int) -> tuple[float, float]:
        """Mean (PSNR, SSIM) of ``model(x, scale)`` over the set, fp32 forward."""
        was_training = model.training
        model.eval()
        try:
            return quick_score(lambda x: model(x, scale), self.sets[scale])
        finally:
            model.train(was_training)
