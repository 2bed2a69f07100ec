"""Geometric self-ensemble ("x8", as in EDSR+ / SwinIR+): more quality for 8× the compute, weights unchanged.

The network is not exactly equivariant to flips and 90° rotations (its convolutions are learned), so the
average of its outputs over the eight symmetries of the square, each mapped back, is a better estimate than
any one of them: published models gain 0.1-0.2 dB this way. Whole images still: each pass is one forward
over the whole (flipped / rotated) input.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor, nn


def flip_rotate(x: Tensor, k: int) -> Tensor:
    """The k-th of the 8 symmetries (k = 0 the identity): rotate by 90°·(k mod 4) after a flip when k ≥ 4."""
    if k >= 4:
        x = x.flip(-1)
    return torch.rot90(x, k % 4, dims=(-2, -1))


def unflip_rotate(y: Tensor, k: int) -> Tensor:
    y = torch.rot90(y, -(k % 4), dims=(-2, -1))
    return y.flip(-1) if k >= 4 else y


class SelfEnsemble(nn.Module):
    """``model`` averaged over the 8 flips/rotations of its input: (B, C, H, W) → (B, C, s·H, s·W).

    Behaves like the wrapped NaLaSR for the callers (``cfg``, ``set_attention_backend``); the sum is kept in
    fp32 whatever the precision, so eight half-precision outputs do not lose their low bits.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    @property
    def cfg(self) -> Any:
        """The wrapped network's config (its scale, for the callers)."""
        return self.model.cfg

    def forward(self, x: Tensor) -> Tensor:
        channels_last = x.is_cuda  # the network's fast layout on CUDA (see infer._forward)
        total: Tensor | None = None
        for k in range(8):
            t = flip_rotate(x, k)
            t = t.contiguous(memory_format=torch.channels_last) if channels_last else t.contiguous()
            y = unflip_rotate(self.model(t), k).float()
            total = y if total is None else total.add_(y)
        assert total is not None
        return total.div_(8)

    def set_attention_backend(self, backend: str) -> None:
        self.model.set_attention_backend(backend)  # type: ignore[operator]


_WRAPPERS: weakref.WeakKeyDictionary[nn.Module, SelfEnsemble] = weakref.WeakKeyDictionary()


def ensemble_of(model: nn.Module) -> SelfEnsemble:
    """The SelfEnsemble of ``model``, one per model: repeated calls reuse it, and with it the CUDA graphs
    that nalasr.inference.graphs keeps per module (a new wrapper per call would never replay one)."""
    wrapper = _WRAPPERS.get(model)
    if wrapper is None:
        wrapper = _WRAPPERS[model] = SelfEnsemble(model)
    return wrapper
