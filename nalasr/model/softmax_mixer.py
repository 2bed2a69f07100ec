"""The same NaLaSR network with softmax attention as its global token mixer (for side-by-side benchmarks).

Only the attention op differs. q, k, v, g come from the mixer's own Linear; LePE, LayerNorm, the SiLU gate
and the output projection are the mixer's own modules, so parameters and ``state_dict`` keys are the same
and a trained NaLaSR checkpoint loads into either form. Softmax attention here has no RoPE (the NaLa
variant only applies RoPE when ``cfg.rope`` is set; the shipped variants do not).

Two softmax kinds:
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient kernels on
  CUDA, the fused CPU kernel on CPU): O(N²·d) time, O(N·d) memory.
- ``"materialised"``: the explicit softmax(q kᵀ/√d) v that ESRT-style SR transformers write, which holds
  the (B, heads, N, N) scores and their softmax at the same time: 2·B·heads·N² elements.
"""

from __future__ import annotations

from typing import Literal, cast

import torch.nn.functional as F
from torch import Tensor, nn

from .nalasr import NalaMixer

SoftmaxKind = Literal["sdpa", "materialised"]
MixerKind = Literal["nala", "sdpa", "materialised"]
MIXER_KINDS: tuple[str, ...] = ("nala", "sdpa", "materialised")

__all__ = ["MIXER_KINDS", "MixerKind", "SoftmaxKind", "SoftmaxMixer", "materialised_bytes", "mixer_kind",
           "softmax_attention", "swap_attention"]


def softmax_attention(q: Tensor, k: Tensor, v: Tensor, kind: SoftmaxKind) -> Tensor:
    """softmax(q kᵀ/√D) v over all N tokens, per head. q, k, v: (B, N, H, D) → (B, N, H, D), q's dtype."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, N, D) views; the last axis stays contiguous
    if kind == "sdpa":
        o = F.scaled_dot_product_attention(q, k, v)
    elif kind == "materialised":
        # q is scaled before the product (cheap, N·D) rather than the N×N scores; the scores and their
        # softmax still coexist for a moment, as in ESRT-style code: that is the memory being compared.
        scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)  # (B, H, N, N)
        o = scores.softmax(dim=-1) @ v
    else:
        raise ValueError(f"unknown softmax kind {kind!r}; choose sdpa or materialised")
    return o.transpose(1, 2)


def materialised_bytes(batch: int, heads: int, tokens: int, elem_bytes: int) -> int:
    """Lower bound on the memory one materialised-softmax layer needs: scores and softmax, (B, H, N, N) each."""
    return 2 * batch * heads * tokens * tokens * elem_bytes


class SoftmaxMixer(NalaMixer):
    """NalaMixer with softmax attention in place of NaLa attention; x: (B, H, W, C) → (B, H, W, C).

    Only the ``_attend`` hook is overridden: the rest of ``NalaMixer.forward`` (projections, LePE, norm,
    gate, and whatever speed work lands there) is shared, so the comparison stays like for like. Never
    constructed directly: :func:`swap_attention` re-classes existing NalaMixers, which keeps their
    parameters (and any state added to NalaMixer later) without copying.
    """

    kind: SoftmaxKind

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, hw: tuple[int, int]) -> Tensor:
        """(B, N, H, D) × 3 → (B, N, H, D), a head-major view; ``hw`` (the token grid) is unused: no RoPE."""
        return softmax_attention(q, k, v, self.kind)


def swap_attention(model: nn.Module, kind: MixerKind) -> nn.Module:
    """Switch every NalaMixer of ``model`` to ``kind`` ('nala', 'sdpa' or 'materialised'), in place.

    Re-classing (rather than building new modules) keeps the very same parameter tensors, device and
    dtype, and is reversible: ``swap_attention(model, "nala")`` restores the original network.
    Returns ``model``; raises ValueError for an unknown kind or a model without NalaMixers.
    """
    if kind not in MIXER_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; choose one of {', '.join(MIXER_KINDS)}")
    mixers = [m for m in model.modules() if isinstance(m, NalaMixer)]
    if not mixers:
        raise ValueError(f"{type(model).__name__} has no NalaMixer to swap")
    for m in mixers:
        if kind == "nala":
            m.__class__ = NalaMixer
            m.__dict__.pop("kind", None)
        else:
            m.__class__ = SoftmaxMixer
            cast(SoftmaxMixer, m).kind = cast(SoftmaxKind, kind)
    return model


def mixer_kind(model: nn.Module) -> str:
    """The attention kind of ``model``'s mixers ('nala', 'sdpa', 'materialised'), or 'mixed'."""
    kinds = {m.kind if isinstance(m, SoftmaxMixer) else "nala" for m in model.modules() if isinstance(m, NalaMixer)}
    return kinds.pop() if len(kinds) == 1 else "mixed"
