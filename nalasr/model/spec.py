"""Typed model metadata (what a caller needs to know before feeding a model an image)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .nalasr import NaLaSR, count_params, variant_of


@dataclass(frozen=True)
class ModelSpec:
    architecture: str
    variant: str | None  # None for a custom config
    scale: int
    in_channels: int
    out_channels: int
    params: int
    size_multiple: int  # input H and W must be multiples of this (1: any size)
    min_size: int
    dtypes: tuple[torch.dtype, ...]  # dtypes the forward supports; attention sums are fp32 regardless


def spec_of(model: NaLaSR) -> ModelSpec:
    cfg = model.cfg
    return ModelSpec(
        architecture="NaLaSR",
        variant=variant_of(cfg),
        scale=cfg.scale,
        in_channels=cfg.in_chans,
        out_channels=cfg.in_chans,
        params=count_params(model),
        size_multiple=1,
        min_size=1,
        dtypes=(torch.float32, torch.float16, torch.bfloat16),
    )
