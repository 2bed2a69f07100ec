"""Model loading for Python users and for every command."""

from __future__ import annotations

import os

import torch

from ..model import NaLaSR
from .runtime import check_scale, resolve_device
from ..io.weights import load_weights, shipped_path


def load_model(
    scale: int = 4,
    variant: str | None = None,
    weights: str | os.PathLike | None = None,
    device: str | torch.device = "auto",
) -> NaLaSR:
    """A NaLaSR in eval mode on ``device``: the shipped weights for ``scale`` (and ``variant``), or ``weights``.

    With ``weights`` given, ``variant`` is ignored (the file carries its own config) and the file's scale
    must equal ``scale``.
    """
    check_scale(scale)
    path = weights if weights is not None else shipped_path(scale, variant)
    return load_weights(path, scale=scale, device=resolve_device(device))
