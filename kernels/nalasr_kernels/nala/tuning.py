"""The autotuner over the tl.dot passes' launch configs: a benchmark tool (benchmarks/kernel_configs.py), never on the
inference path.

The inference path launches each tl.dot pass with the one config its plan names (``Launch.config``, from
:data:`.configs.TABLE`); nothing there imports this module. Inside :func:`autotuning` those launches go to a
``triton.autotune`` wrapper of the same kernel instead (``binding.TUNE``), over :func:`space` (the table's configs
first, then :data:`.configs.TUNING_SPACE`), pruned by the register limit of :data:`.configs.PER_THREAD_LIMIT`, and
every benchmarked launch is recorded as a :class:`Pick` keyed like the table (pass, kind, BD, bucket).
:func:`.configs.table_from_picks` and :func:`.configs.table_literal` turn the picks into the table's rows.

    with tuning.autotuning() as tuner:
        nala_attention_triton(q, k, v).backward(g)   # any calls: each new (pass, shape key) is benchmarked
    table = configs.table_from_picks(tuner.picks.values())
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import triton
import triton.testing

from . import binding, configs
from .bwd import bwd_key_kernel, bwd_query_kernel
from .configs import LaunchConfig
from .fwd import fwd_map_kernel, fwd_reduce_kernel

__all__ = ["KERNELS", "KEY", "Pick", "Tuner", "autotuning", "from_triton", "space", "to_triton"]

KERNELS = {"fwd_reduce": fwd_reduce_kernel, "fwd_map": fwd_map_kernel, "bwd_query": bwd_query_kernel,
           "bwd_key": bwd_key_kernel}
# What makes a shape new to the autotuner (those of a kernel's arguments; Triton appends the tensors' dtypes): the
# token-count bucket, the head dims, RoPE and the compile-time options that change the products (the table's kinds).
KEY = ["N_BUCKET", "D", "DV", "ROPE", "F16", "EYE", "HALF2"]


def to_triton(cfg: LaunchConfig) -> triton.Config:
    kw = {"num_warps": cfg.num_warps, "maxnreg": cfg.maxnreg}
    if cfg.num_stages is not None:
        kw["num_stages"] = cfg.num_stages
    return triton.Config({"BLOCK_N": cfg.block_n}, **kw)


def from_triton(c: triton.Config) -> LaunchConfig:
    return LaunchConfig(int(c.kwargs["BLOCK_N"]), int(c.num_warps), c.num_stages, c.maxnreg)


def space(pass_: str) -> tuple[LaunchConfig, ...]:
    """The configs the autotuner tries for ``pass_``: every config the table can give it, then TUNING_SPACE's."""
    return tuple(dict.fromkeys(configs.table_configs(pass_) + configs.TUNING_SPACE[pass_]))


def _prune(pass_: str):
    # Configs over the pass's elements-a-thread limit are dropped (they spill); if none is left, the leanest runs.
    limit = configs.PER_THREAD_LIMIT[pass_]

    def prune(cfgs, named_args, **kwargs):
        bd = max(kwargs.get("BD", 16), kwargs.get("BDV", 16))
        kept = [c for c in cfgs if configs.per_thread(from_triton(c), bd) <= limit]
        return kept or [min(cfgs, key=lambda c: (configs.per_thread(from_triton(c), bd), -c.num_warps))]

    return prune


@dataclass
class Pick:
    """One benchmarked launch: the table's key, the config the table gives, the autotuner's best and the median
    time (ms) of every config it ran."""

    pass_: str
    kind: str
    bd: int
    bucket: int
    table: LaunchConfig
    best: LaunchConfig
    times_ms: dict[LaunchConfig, float] = field(default_factory=dict)
    shape: str = ""  # the autotuner's own key (dims, options, dtypes): inputs that share a table row differ here

    @property
    def key(self) -> tuple[str, str, int, int, str]:
        return self.pass_, self.kind, self.bd, self.bucket, self.shape

    def as_json(self) -> dict:
        return {"pass": self.pass_, "kind": self.kind, "bd": self.bd, "bucket": self.bucket, "shape": self.shape,
                "table": str(self.table), "best": str(self.best),
                "table_ms": self.times_ms.get(self.table), "best_ms": self.times_ms.get(self.best),
                "times_ms": {str(c): t for c, t in self.times_ms.items()}}


def _kind(pass_: str, meta: dict) -> str:
    if pass_ == "fwd_map":
        return configs.map_kind(bool(meta["F16"]))
    if pass_ == "bwd_query":
        return configs.query_kind(bool(meta["EYE"]))
    return ""


class Tuner:
    """binding.TUNE while :func:`autotuning` runs: one autotuner a pass, the picks of every benchmarked launch."""

    def __init__(self, warmup: int = 10, rep: int = 50, bench: Callable | None = None):
        # bench(fn, quantiles) -> times: triton.testing.do_bench's (ms) by default; the CPU tests pass a fake one
        if bench is None:
            def bench(fn, quantiles):
                return triton.testing.do_bench(fn, warmup=warmup, rep=rep, quantiles=quantiles)

        self.autotuners = {p: triton.autotune(configs=[to_triton(c) for c in space(p)],
                                              key=[a for a in KEY if a in k.arg_names],
                                              prune_configs_by={"early_config_prune": _prune(p)},
                                              do_bench=bench)(k)
                           for p, k in KERNELS.items()}
        self.picks: dict[tuple[str, str, int, int, str], Pick] = {}

    def __call__(self, pass_: str, kernel, cfg: LaunchConfig, bucket: int, grid, args: tuple, meta: dict) -> None:
        tuner = self.autotuners[pass_]
        assert tuner.fn is kernel, f"{pass_}: the autotuner wraps another kernel"
        tuner.configs_timings = None
        tuner[grid](*args, **meta)
        timings = tuner.configs_timings
        if timings is None:  # a key it had benchmarked (or a single config left after pruning): nothing new
            if (pick := self._pick(pass_, cfg, bucket, args, meta, tuner, {})).key not in self.picks:
                self.picks[pick.key] = pick
            return
        times = {from_triton(c): float(t[0] if isinstance(t, (list, tuple)) else t) for c, t in timings.items()}
        pick = self._pick(pass_, cfg, bucket, args, meta, tuner, times)
        self.picks[pick.key] = pick

    @staticmethod
    def _pick(pass_, cfg, bucket, args, meta, tuner, times) -> Pick:
        shape = ",".join(f"{a}={meta[a]}" for a in KEY[1:] if a in meta)
        dtypes = "/".join(str(t.dtype).removeprefix("torch.") for t in args[:2] if hasattr(t, "dtype"))
        return Pick(pass_, _kind(pass_, meta), max(int(meta["BD"]), int(meta["BDV"])), int(bucket), cfg,
                    from_triton(tuner.best_config), times, f"{shape},{dtypes}")


@contextlib.contextmanager
def autotuning(warmup: int = 10, rep: int = 50, bench: Callable | None = None) -> Iterator[Tuner]:
    """Inside, the tl.dot passes run through the autotuner (``binding.TUNE``); the Tuner's picks say what it chose.
    ``warmup``, ``rep``: do_bench's milliseconds a config; ``bench``: another timer (see Tuner)."""
    tuner = Tuner(warmup, rep, bench)
    prev, binding.TUNE = binding.TUNE, tuner
    try:
        yield tuner
    finally:
        binding.TUNE = prev
