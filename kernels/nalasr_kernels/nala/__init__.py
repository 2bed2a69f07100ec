"""Fused NaLa attention (Triton), one subpackage: import it only where Triton is installed.

- :mod:`.binding`: ``nala_attention_triton`` (the public entry, the signature of the PyTorch reference), the
  autograd function and torch custom ops, and the host side that launches what the plan says.
- :mod:`.plan`: the typed launch plan (``forward_plan``, ``backward_plan``: frozen dataclasses naming each pass's
  kernel variant, chunks, launch config and compile-time options), chosen by rule from the inputs.
- :mod:`.configs`: the tl.dot passes' launch configs (BLOCK_N, warps, stages), a committed table by size; nothing is
  autotuned at inference. :mod:`.tuning`: the autotuner over them, a benchmark tool only (benchmarks/kernel_configs.py).
- :mod:`.reference`: ``nala_attention_naive``, the same attention in plain PyTorch.
- kernels: :mod:`.fwd` (reduce, combine, one-head and pair maps), :mod:`.bwd` (query and key passes), the register
  passes :mod:`.fwd_reduce_rr`, :mod:`.fwd_map_rr`, :mod:`.bwd_query_rr`, :mod:`.bwd_key_rr`, with the shared device
  math :mod:`.device`, register/lane helpers :mod:`.lanes` and float16-pair math :mod:`.half2`.

Which pass runs when, and why: docs/kernels.md.
"""

from __future__ import annotations

from .binding import NalaAttentionFunction, nala_attention_triton, nala_backward, nala_forward
from .plan import BackwardPlan, ForwardPlan, Launch, backward_plan, forward_plan
from .reference import nala_attention_naive

__all__ = ["BackwardPlan", "ForwardPlan", "Launch", "NalaAttentionFunction", "backward_plan", "forward_plan",
           "nala_attention_naive", "nala_attention_triton", "nala_backward", "nala_forward"]
