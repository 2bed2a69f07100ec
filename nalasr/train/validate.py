"""Validation during training: the evaluation protocol on a small held-out set, on the training device."""

from __future__ import annotations

import torch

from ..eval.datasets import BadFile
from ..eval.evaluate import PreparedSet, prepare_set, quick_score
from .multiscale import MultiScaleNaLaSR


class Validator:
    """Decodes the set and makes each scale's LR once; ``run`` scores a model with the protocol.

    ``bad``: the set's files that cannot be scored (at some scale), which every validation leaves out."""

    def __init__(self, val_set: str, scales: list[int], data_root: str | None, device: torch.device) -> None:
        self.sets: dict[int, PreparedSet] = {
            s: prepare_set(val_set, s, data_root=data_root, device=device) for s in scales
        }
        by_name = {b.name: b for p in reversed(self.sets.values()) for b in p.bad}  # the first scale's reason wins
        self.bad: list[BadFile] = [by_name[k] for k in sorted(by_name)]

    @torch.no_grad()
    def run(self, model: MultiScaleNaLaSR, scale: int) -> tuple[float, float]:
        """Mean (PSNR, SSIM) of ``model(x, scale)`` over the set, fp32 forward."""
        was_training = model.training
        model.eval()
        try:
            return quick_score(lambda x: model(x, scale), self.sets[scale])
        finally:
            model.train(was_training)
