"""Launch configs of the tl.dot passes, by table: one config per shape, so a first call compiles one kernel a pass and
benchmarks nothing (inference and training alike). Autotuning is a benchmark tool (:mod:`.tuning`,
``benchmarks/kernel_configs.py``), never the default.

``launch_config(pass_, kind, bd, bucket)`` is the rule: the row of :data:`TABLE` for the pass, the kind of its
products (:func:`map_kind`, :func:`query_kind`: what the plan's compile-time options make of the inputs' dtypes and
RoPE), the padded head width BD = max(16, pow2(D), pow2(Dv)) and the token-count bucket pow2(B·N·H), the row's
first entry whose bucket is reached last. A width without a row of its own takes the BD = 16 row through
:func:`widen`: the tile keeps the elements a thread of the measured pick holds (BLOCK_N halves for each doubling of the
width, down to tl.dot's 16 tokens, then the warps double), so a wide head never exceeds the register limits the
autotuner's pruning kept (:data:`PER_THREAD_LIMIT`, :func:`per_thread`).

Where the numbers come from (one H200, Triton 3.6, 4 heads × 16 dims, float16 inputs: the autotuner's picks at the
buckets of 518,400 and 1,048,576 tokens (2^21, 2^22), which agreed, as the session logs recorded them; those records
are in git history, benchmarks/results/h200/ at commit 46d34d0; docs/kernels.md "Launch configs"):

- ``fwd_reduce``: 32 tokens on 1 warp, 2 stages (sessions 13-17: one warp a program, 70.9 against 103.8 µs for 4).
- ``fwd_map``, float16 products (F16, and HALF2 on top): 64 tokens on 2 warps, 2 stages (sessions 15-17; with HALF2
  session 25: "64 tokens on 2 warps stays best"); tf32 / tf32x3 products (float32 inputs, RoPE): 64 tokens on 4
  warps, 2 stages (the pick with tf32 products, sessions 13-14, before F16).
- ``bwd_query``, 16-bit tiles (EYE): 16 tokens on 1 warp, 2 stages (sessions 14-22; session 22 re-swept it with the
  float16 gradient products); float32 tiles: 32 tokens on 2 warps, 2 stages (sessions 7-13, before EYE).
- ``bwd_key``: 64 tokens on 4 warps, 2 stages (sessions 8-22 with and without EYE; 1 stage ties it: 119.4 against
  120.8 µs, the backward's graph 270.5 against 270.2, session 22).

BD = 32 and 64 follow widen(). One ``benchmarks/kernel_configs.py --dims 16,32 --grids 256x256,540x960`` run on the
H200 (Triton 3.6, float16 inputs with RoPE, buckets 2^18 and 2^21) found faster picks for paths the shipped models do
not take (they have 16-wide heads and infer in float16): float32 ``bwd_query`` 16 tokens on 1 warp (53.0 / 347.3 µs
against 83.3 / 536.0), BD = 32 ``fwd_reduce`` 16 on 2 warps (38.9 / 244.6 against 49.4 / 332.2), ``fwd_map`` (tf32)
64 on 4 (37.3 / 227.4 against 45.4 / 289.6), ``bwd_key`` 16 on 4 (112.7 / 790.4 against 166.0 / 1198.6). They are
not in the table: full-size GPU parity has not run with them, and no user-visible job spends 10% of its time there.

The other passes are not in the table: the register passes fix their tiles in their modules, the pair map takes
plan.PAIR_TILE.

Plain Python (no torch, no Triton, no process settings). ``benchmarks/kernel_configs.py`` runs the autotuner on a GPU
for representative sizes and prints :data:`TABLE` rows from its picks (:func:`table_from_picks`,
:func:`table_literal`: the literal below, to paste over it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LaunchConfig", "PASSES", "PER_THREAD_LIMIT", "TABLE", "TUNING_SPACE", "WIDTHS", "best_overall",
           "kinds", "launch_config", "map_kind", "per_thread", "query_kind", "table_configs", "table_from_picks",
           "table_literal", "widen"]


@dataclass(frozen=True, order=True)
class LaunchConfig:
    """A tl.dot pass's launch: tokens a tile, warps, pipeline stages (None: Triton's default) and a register cap."""

    block_n: int
    num_warps: int
    num_stages: int | None = 2
    maxnreg: int | None = None

    def kwargs(self, compiled: bool = True) -> dict:
        """The launch's keyword arguments (the cap only where ptxas runs: not under the interpreter)."""
        kw: dict = {"BLOCK_N": self.block_n, "num_warps": self.num_warps}
        if self.num_stages is not None:
            kw["num_stages"] = self.num_stages
        if self.maxnreg is not None and compiled:
            kw["maxnreg"] = self.maxnreg
        return kw

    def __str__(self) -> str:
        s = f"{self.block_n}x{self.num_warps}x{self.num_stages if self.num_stages is not None else '-'}"
        return s + (f" maxnreg={self.maxnreg}" if self.maxnreg else "")


C = LaunchConfig
PASSES = ("fwd_reduce", "fwd_map", "bwd_query", "bwd_key")
WIDTHS = (16, 32, 64)  # BD = max(16, pow2(D), pow2(Dv)) for the 1..64 head dims the op takes
# Elements of one (BLOCK_N, BD) tile a thread may hold: from ptxas on sm_90 (D = 16), the forward kernels stay at
# 70-190 registers without spills up to 16, the backward query kernel reaches 255 registers at 8 and spills beyond.
PER_THREAD_LIMIT = {"fwd_reduce": 16, "fwd_map": 16, "bwd_query": 8, "bwd_key": 8}

# (pass, kind, BD) → ((from bucket, config), ...), buckets ascending: the entry whose bucket the call's reaches last.
TABLE: dict[tuple[str, str, int], tuple[tuple[int, LaunchConfig], ...]] = {
    ("fwd_reduce", "", 16): ((0, C(32, 1, 2)),),        # sessions 13-17
    ("fwd_map", "f16", 16): ((0, C(64, 2, 2)),),        # sessions 15-17, 25 (HALF2)
    ("fwd_map", "tf32", 16): ((0, C(64, 4, 2)),),       # sessions 13-14 (tf32 products, before F16)
    ("bwd_query", "eye", 16): ((0, C(16, 1, 2)),),      # sessions 14-22
    ("bwd_query", "f32", 16): ((0, C(32, 2, 2)),),      # sessions 7-13 (before EYE)
    ("bwd_key", "", 16): ((0, C(64, 4, 2)),),           # sessions 8-22
}

# What the autotuner tries (benchmarks only; see binding.autotune), besides every config of the table.
TUNING_SPACE: dict[str, tuple[LaunchConfig, ...]] = {
    # fwd_reduce: one warp a program. Its S product has 16 rows (the φ halves), so a multi-warp tl.dot splits only the
    # columns and every warp reads the whole φ operand from shared memory; one warp (and more programs) halves that
    # traffic. The multi-warp configs stay for wide heads (BD = 64: 32 tokens are 64 elements a thread on one warp).
    "fwd_reduce": (C(32, 1, 2), C(16, 1, 2), C(32, 2, 2), C(64, 4, 2)),
    "fwd_map": (C(64, 4, 2), C(128, 4, 2), C(64, 8, 2), C(128, 8, 2), C(256, 8, 2),
                C(128, 4, 3),   # more loads in flight per program
                C(128, 4, 1),   # the manual prefetch alone
                C(256, 8, 1),
                C(64, 2, 2)),   # the pick with the float16 product at 518K
    # ~30 live (BLOCK_N, BD) float32 tiles in the backward: fewer tokens per thread
    "bwd_query": (C(32, 4, 2), C(64, 4, 2), C(64, 8, 2), C(128, 8, 2), C(64, 4, 1), C(32, 2, 2),
                  C(16, 1, 2),  # bwd_query's pick at 518K with EYE
                  # capped: a config spills some to L1 but more blocks fit an SM
                  C(64, 4, 2, 168), C(32, 4, 2, 128)),
}
TUNING_SPACE["bwd_key"] = TUNING_SPACE["bwd_query"]


def map_kind(f16: bool) -> str:
    """fwd_map's kind: "f16" for its float16 product (plan (f16): 16-bit inputs without RoPE), else "tf32"."""
    return "f16" if f16 else "tf32"


def query_kind(eye: bool) -> str:
    """bwd_query's kind: "eye" for 16-bit q and ∂L/∂o tiles (plan (eye_query)), else "f32"."""
    return "eye" if eye else "f32"


def kinds(pass_: str) -> tuple[str, ...]:
    """The kinds a pass's rows are keyed by."""
    return {"fwd_map": ("f16", "tf32"), "bwd_query": ("eye", "f32")}.get(pass_, ("",))


def per_thread(cfg: LaunchConfig, bd: int) -> int:
    """Elements of one (BLOCK_N, BD) tile a thread holds."""
    return cfg.block_n * bd // (32 * cfg.num_warps)


def widen(cfg: LaunchConfig, bd: int) -> LaunchConfig:
    """``cfg`` (a BD = 16 config) for heads BD wide at the same elements a thread: BLOCK_N halves per doubling, down to
    16 tokens, then the warps double."""
    block_n, warps = cfg.block_n, cfg.num_warps
    width = 16
    while width < bd:
        width *= 2
        if block_n > 16:
            block_n //= 2
        else:
            warps *= 2
    return LaunchConfig(block_n, warps, cfg.num_stages, cfg.maxnreg)


def _row(rows: tuple[tuple[int, LaunchConfig], ...], bucket: int) -> LaunchConfig:
    cfg = rows[0][1]
    for start, c in rows:
        if bucket >= start:
            cfg = c
    return cfg


def launch_config(pass_: str, kind: str, bd: int, bucket: int) -> LaunchConfig:
    """The launch config of tl.dot pass ``pass_`` (one of PASSES) for products of ``kind`` (see kinds), padded head
    width ``bd`` (16, 32 or 64) and token-count bucket ``bucket`` (pow2(B·N·H))."""
    if (pass_, kind, bd) in TABLE:
        return _row(TABLE[pass_, kind, bd], bucket)
    if bd not in WIDTHS or (pass_, kind, 16) not in TABLE:
        raise KeyError(f"no launch config for {pass_} ({kind!r}) at BD = {bd}")
    return widen(_row(TABLE[pass_, kind, 16], bucket), bd)


def table_configs(pass_: str) -> tuple[LaunchConfig, ...]:
    """Every config the table can give ``pass_`` (at any kind, width and bucket), in a fixed order."""
    out: dict[LaunchConfig, None] = {}
    for kind in kinds(pass_):
        for bd in WIDTHS:
            starts = {s for (p, k, w), rows in TABLE.items() if p == pass_ and k == kind for s, _ in rows}
            for bucket in sorted(starts | {0}):
                out[launch_config(pass_, kind, bd, bucket)] = None
    return tuple(out)


def table_from_picks(picks, table: dict | None = None) -> dict:
    """TABLE rows from autotuner picks (objects with pass_, kind, bd, bucket, best and optionally times_ms, as
    tuning.Pick): per (pass, kind, BD) its picks by bucket, runs of one config merged, the first row from bucket 0
    (smaller sizes take the smallest measured bucket's pick). Several picks of one row and bucket (inputs the table
    does not tell apart, as float32 and float16 with RoPE) take :func:`best_overall` of them. A BD > 16 row that
    widen() of the BD = 16 row already gives is left out. Rows of ``table`` (default: none) no pick touches stay."""
    groups: dict[tuple[str, str, int], dict[int, list]] = {}
    for p in picks:
        groups.setdefault((p.pass_, p.kind, int(p.bd)), {}).setdefault(int(p.bucket), []).append(p)
    by_key = {key: {b: best_overall(ps) for b, ps in rows.items()} for key, rows in groups.items()}
    out: dict = dict(table or {})
    for key in sorted(by_key):
        rows: list[tuple[int, LaunchConfig]] = []
        for bucket in sorted(by_key[key]):
            cfg = by_key[key][bucket]
            if not rows or rows[-1][1] != cfg:
                rows.append((0 if not rows else bucket, cfg))
        out[key] = tuple(rows)
    for (pass_, kind, bd) in sorted(k for k in out if k[2] != 16):
        base = out.get((pass_, kind, 16))
        rows = out[pass_, kind, bd]
        if base and all(widen(_row(base, s), bd) == c for s, c in rows) and \
                all(widen(c, bd) == _row(rows, s) for s, c in base):
            del out[pass_, kind, bd]
    return out


def best_overall(picks) -> LaunchConfig:
    """The config of least summed slowdown (time over each pick's best time) among those every pick timed; the
    first pick's best where they timed none in common (or one pick only)."""
    if len(picks) == 1:
        return picks[0].best
    times = [getattr(p, "times_ms", None) or {} for p in picks]
    common = [c for c in times[0] if all(c in t for t in times[1:])]
    if not common or not all(t for t in times):
        return picks[0].best
    return min(common, key=lambda c: sum(t[c] / min(t.values()) for t in times))


def _literal(cfg: LaunchConfig) -> str:
    args = [cfg.block_n, cfg.num_warps, cfg.num_stages] + ([cfg.maxnreg] if cfg.maxnreg is not None else [])
    return f"C({', '.join(str(a) for a in args)})"


def table_literal(table: dict) -> str:
    """``table`` as the Python literal of :data:`TABLE` (what benchmarks/kernel_configs.py prints to paste)."""
    order = {p: i for i, p in enumerate(PASSES)}
    lines = ["TABLE: dict[tuple[str, str, int], tuple[tuple[int, LaunchConfig], ...]] = {"]
    for pass_, kind, bd in sorted(table, key=lambda k: (order.get(k[0], len(order)), k[0], k[1], k[2])):
        rows = ", ".join(f"({s}, {_literal(c)})" for s, c in table[pass_, kind, bd])
        lines.append(f"    ({pass_!r}, {kind!r}, {bd}): ({rows},),")
    lines.append("}")
    return "\n".join(lines).replace("'", '"')

