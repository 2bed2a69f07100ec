"""The "ones column" layout.

A GEMM over [y | 1 | 0…] with the bias as the matching weight column adds the bias as it multiplies, so a
residual update ``r += y·Wᵀ + b`` is one in-place ``addmm_`` (β = 1) instead of a product and an add pass.
The fused depthwise-conv kernels write their output in this layout when asked (``ones_pad=ONES_PAD``).
"""

from __future__ import annotations

import torch
from torch import Tensor

# Columns appended to the C channels: a 1, then zeros, so the row stride stays a multiple of 16 bytes in every
# dtype (cuBLAS needs that for its fast kernels).
ONES_PAD = 8


def with_ones_column(y: Tensor, pad: int = ONES_PAD) -> Tensor:
    """y (..., C) → (..., C + pad): y, then a column of ones, then zeros."""
    cols = y.new_zeros((*y.shape[:-1], pad))
    cols[..., 0] = 1
    return torch.cat([y, cols], dim=-1)


def bias_column_weight(weight: Tensor, bias: Tensor, pad: int = ONES_PAD) -> Tensor:
    """(C_out, C_in) weight and (C_out,) bias → (C_out, C_in + pad) [W | b | 0…], the weight for a GEMM over
    :func:`with_ones_column` inputs: with_ones_column(y, pad) @ result.T == y @ W.T + b."""
    return torch.cat([weight, bias[:, None], weight.new_zeros(weight.shape[0], pad - 1)], dim=1)
