"""The attention's launch plan (nalasr_kernels.nala.plan): which pass and variant runs for which inputs and sizes, the
chunking rule, and the rules the kernels' code keeps (no environment, no private imports across files).

The plan is pure host code: these tests build CPU tensors of the model's layouts and read the plan's choices
(on the CPU the plan takes 2 SMs and no PDL); nothing is launched. The kernels' outputs are tests/test_kernels_parity.py.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels" / "nalasr_kernels"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")


@pytest.fixture(scope="module")
def plan():
    sys.path.insert(0, str(ROOT / "kernels"))
    from nalasr_kernels.nala import plan as module

    return module


def model_views(n: int, h: int = 4, d: int = 16, dtype=torch.float16, b: int = 1):
    """q, k, v as the model makes them: views of one Linear(C → 4C) output (q, k, v, g), heads split off."""
    x = torch.zeros(b, n, 4 * h * d, dtype=dtype)
    return tuple(t.view(b, n, h, d) for t in x.chunk(4, dim=-1)[:3])


def dense(n: int, h: int = 4, d: int = 16, dtype=torch.float16, b: int = 1):
    return tuple(torch.zeros(b, n, h, d, dtype=dtype) for _ in range(3))


def variants(plan, q, k, v, rope=False, lam=3.0, tau=0.5, alpha=1.0):
    o = torch.empty(q.shape, dtype=q.dtype)
    fp = plan.forward_plan(q, k, v, o, lam, tau, alpha, rope)
    grads = [torch.empty(t.shape, dtype=t.dtype) for t in (q, k, v)]
    bp = plan.backward_plan(q, k, v, o, *grads, lam, tau, alpha, rope)
    return (fp.reduce.variant, fp.map.variant, bp.query.variant, bp.key.variant), fp, bp


REGISTER = ("fwd_reduce_rr", "fwd_map_rr", "bwd_query_rr", "bwd_key_rr")


def test_model_heads_run_every_pass_from_registers(plan):
    """float16, 16 dims, the model's views, from 49K tokens of 4 heads (Urban100 ×4's LR): all four register passes,
    tf32/float16 products, approximate math, HALF2, centred backward."""
    got, fp, bp = variants(plan, *model_views(49_152))
    assert got == REGISTER
    assert (fp.prec, fp.approx, fp.half2, fp.f16, fp.fastmag, fp.clamp, fp.pdl) == ("tf32", True, True, True, True,
                                                                                     False, False)
    assert bp.centre and bp.mpow and bp.query_f16 and bp.key_f16 and bp.prec_g == "tf32"


def test_register_map_threshold(plan):
    """Below MAP_RR_MIN_ROWS (token, head pair) rows the one-head HALF2 map stays; the other register passes run at
    every size."""
    rows = plan.MAP_RR_MIN_ROWS
    assert variants(plan, *model_views(rows // 2))[0] == REGISTER
    assert variants(plan, *model_views(rows // 2 - 1))[0] == ("fwd_reduce_rr", "fwd_map_half2", "bwd_query_rr",
                                                              "bwd_key_rr")
    assert variants(plan, *model_views(16))[0][1] == "fwd_map_half2"


def test_pair_map_for_wide_dense_heads(plan):
    """The pair map: HALF2, an even head count, D = Dv a power of two, dense q, from PAIR_MIN_ROWS rows; with 16
    dims the register map takes its place."""
    n = plan.PAIR_MIN_ROWS // 2  # 4 heads: 2 pairs
    assert variants(plan, *dense(n, d=32))[0] == ("fwd_reduce", "fwd_map_pair", "bwd_query", "bwd_key")
    assert variants(plan, *dense(n - 1, d=32))[0][1] == "fwd_map_half2"
    assert variants(plan, *dense(n, h=3, d=32))[0][1] == "fwd_map_half2"  # odd head count
    assert variants(plan, *dense(n, d=16))[0][1] == "fwd_map_rr"


def test_bfloat16_float32_rope_clamp_take_the_dot_passes(plan):
    """bfloat16: the register reduce (16-bit k, v) but the one-head float32-feature map and the tl.dot backward (no
    float16 products); float32: tf32x3 everywhere, exact math, no centring; RoPE: tf32x3 gradient products, no
    register pass; θ's clamp (|α| > 4): the tl.dot backward and no HALF2."""
    got, fp, bp = variants(plan, *model_views(49_152, dtype=torch.bfloat16))
    assert got == ("fwd_reduce_rr", "fwd_map", "bwd_query", "bwd_key") and not fp.half2 and bp.centre
    assert not bp.query_f16 and not bp.key_f16 and bp.eye_query and bp.eye_key
    got, fp, bp = variants(plan, *model_views(4096, dtype=torch.float32))
    assert got == ("fwd_reduce", "fwd_map", "bwd_query", "bwd_key")
    assert fp.prec == "tf32x3" and not fp.approx and not fp.zacc and not bp.centre and not bp.eye_query
    got, fp, bp = variants(plan, *model_views(49_152), rope=True)
    assert got == ("fwd_reduce", "fwd_map", "bwd_query", "bwd_key")
    assert fp.zacc and not fp.zdot and not fp.approx and bp.prec_g == "tf32x3" and not bp.centre
    got, fp, bp = variants(plan, *model_views(49_152), alpha=20.0)
    assert got == ("fwd_reduce_rr", "fwd_map", "bwd_query", "bwd_key") and fp.clamp and bp.clamp


def test_other_head_dims_and_lambda(plan):
    """Head dims other than 16 take the tl.dot passes; a non-integer λ keeps the key pass off float16 products, and
    λτ < 1.5 the map off HALF2."""
    assert variants(plan, *model_views(4096, d=24))[0] == ("fwd_reduce", "fwd_map_half2", "bwd_query", "bwd_key")
    got, fp, bp = variants(plan, *model_views(49_152), lam=2.5, tau=0.5)
    assert got == ("fwd_reduce_rr", "fwd_map", "bwd_query_rr", "bwd_key") and not fp.half2 and not bp.key_f16


def test_strided_and_chunks(plan):
    """Each pass's chunks: PROGRAMS_PER_SM programs an SM, at least MIN_CHUNK tokens, a multiple of QUANTUM, covering
    the tokens once; tile-strided where STRIDED says (all but the one-head map)."""
    dev = torch.device("cpu")
    for variant in plan.PROGRAMS_PER_SM:
        for n in (1, 37, 1000, 100_000, 518_400):
            for bh in (1, 4, 128):
                chunk, n_chunks = plan.chunks(n, bh, dev, variant)
                assert chunk % plan.QUANTUM[variant] == 0 and chunk >= plan.MIN_CHUNK[variant], (variant, n, bh)
                assert (n_chunks - 1) * chunk < n <= n_chunks * chunk, (variant, n, bh)
    _, fp, bp = variants(plan, *model_views(49_152))
    assert fp.reduce.strided and fp.map.strided and bp.query.strided and bp.key.strided
    _, fp, _ = variants(plan, *model_views(4096))
    assert not fp.map.strided  # the one-head map: contiguous chunks
    # 518K tokens of 4 heads on 132 SMs (H200): the register reduce's 992-token chunks, 2,092 programs
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "sms", lambda device: 132)
        assert plan.chunks(518_400, 4, dev, "fwd_reduce_rr") == (992, 523)


def test_offsets_past_int32_leave_the_register_passes(plan):
    """64-bit offsets (as TEST_CONFIG's OFFS64 forces them) take the tl.dot passes, which have an OFFS64 path."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "TEST_CONFIG", {"BLOCK_N": 16, "CHUNK": 32, "OFFS64": True})
        assert variants(plan, *model_views(49_152))[0] == ("fwd_reduce", "fwd_map_half2", "bwd_query", "bwd_key")


def test_small_rules(plan):
    assert [plan.clamp(a) for a in (1.0, 4.0, -4.0, 4.01, -20.0, 0.0)] == [False, False, False, True, True, False]
    ok = [plan.fastmag(True, 3.0, 0.5, a) for a in (1.0, -20.0, 2.0**-20, 2.0**20, 0.0, 2.0**-21, 2.0**21)]
    assert ok == [True, True, True, True, False, False, False]
    assert not plan.fastmag(False, 3.0, 0.5, 1.0) and not plan.fastmag(True, 2.0, 0.5, 1.0)
    assert plan.bwd_mpow(True, 3.0, 0.5) and not plan.bwd_mpow(True, 2.0, 0.5) and not plan.bwd_mpow(False, 3.0, 0.5)
    assert [plan.lam_int(x) for x in (1.0, 3.0, 4.0, 2.5, 5.0)] == [1, 3, 4, 0, 0]
    assert not plan.pdl(torch.device("cpu"))


def test_half2_angle_polynomials():
    """HALF2's angle polynomials (half2.F_POLY, G_POLY, their float16 bits in F_HEX, G_HEX) evaluated in float16 with
    a rounding a step, as the kernel's HFMA2s do, over every float16 x in [−1, 1]: cos / sin((π/4)·tanh x) within
    3.4e-4 / 5.4e-4 at most and an RMS of 1e-4 / 6e-5 (any one coefficient 0.4% off fails)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "kernels"))
    from nalasr_kernels.nala import half2

    assert [int(h, 16) for h in half2.F_HEX + half2.G_HEX] == [
        int(np.float16(c).view(np.uint16)) for c in half2.F_POLY + half2.G_POLY]
    bits = np.arange(0, 0x3C01, dtype=np.uint16).view(np.float16).astype(np.float64)
    x = np.concatenate([-bits[::-1], bits])
    theta = np.pi / 4 * np.tanh(x)

    def r16(v):
        return v.astype(np.float16).astype(np.float64)

    q = r16(x * x)
    c = np.full_like(x, half2.F_POLY[4])
    for k in (3, 2, 1, 0):
        c = r16(c * q + half2.F_POLY[k])
    t = np.full_like(x, half2.G_POLY[3])
    for k in (2, 1, 0):
        t = r16(t * q + half2.G_POLY[k])
    s = r16(t * x)
    ec, es = c - np.cos(theta), s - np.sin(theta)
    assert np.abs(ec).max() < 3.4e-4 and np.abs(es).max() < 5.4e-4
    assert np.sqrt((ec ** 2).mean()) < 1e-4 and np.sqrt((es ** 2).mean()) < 6e-5


# ------------------------------------------------------------------------------------- rules of the kernels' code


def _sources():
    return sorted(KERNELS.rglob("*.py"))


def test_kernels_read_no_environment():
    """The kernels' configuration is code: no module reads os.environ / os.getenv (device.py asks Triton whether it
    interprets, reading TRITON_INTERPRET itself only on a Triton without triton.knobs)."""
    for path in _sources():
        text = path.read_text()
        hits = [line for line in text.splitlines() if "environ" in line or "getenv" in line]
        if path.name == "device.py" and path.parent.name == "nala":
            hits = [h for h in hits if "TRITON_INTERPRET" not in h]
        assert not hits, (path, hits)
        assert "NALASR_" not in text, path


def test_no_private_imports_across_files():
    """No module imports another module's _private name, nor reaches one as module._name."""
    modules = {p.stem for p in _sources()}
    for path in _sources():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                assert not [a.name for a in node.names if a.name.startswith("_")], (path, node.module)
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in modules):
                raise AssertionError(f"{path}: {node.value.id}.{node.attr}")


# -------------------------------------------------------------------------------- launch configs (no autotuning)

DOT_PASSES = {"fwd_reduce": "fwd_reduce", "fwd_map": "fwd_map", "fwd_map_half2": "fwd_map", "bwd_query": "bwd_query",
              "bwd_key": "bwd_key"}  # tl.dot variant → its pass in configs.PASSES / TABLE


def _config_cases():
    """(name, q, k, v, rope) over dtypes, head dims (odd ones, Dv ≠ D), layouts and token counts (odd ones); meta
    tensors (shapes, strides and dtypes without memory: the plan reads nothing else, and 2 SMs as on the CPU)."""
    meta = torch.device("meta")

    def views(n, h=4, d=16, dtype=torch.float16, b=1):
        x = torch.empty(b, n, 4 * h * d, dtype=dtype, device=meta)
        return tuple(t.view(b, n, h, d) for t in x.chunk(4, dim=-1)[:3])

    def dense_(n, h=4, d=16, dv=None, dtype=torch.float16):
        return tuple(torch.empty(1, n, h, e, dtype=dtype, device=meta) for e in (d, d, dv or d))

    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for n in (1, 37, 4097, 49_152, 518_400):
            for d in (8, 16, 17, 24, 32, 64):
                for rope in (False, True):
                    yield (f"{dtype}-N{n}-D{d}-rope{int(rope)}", *views(n, d=d, dtype=dtype), rope)
    yield ("dv-differs", *dense_(1001, h=3, d=16, dv=40), False)
    yield ("batch5-h3", *views(999, h=3, d=16, dtype=torch.bfloat16, b=5), False)
    yield ("pair-map", *dense_(400_000, d=32), False)
    yield ("pair-map-rope", *dense_(400_000, d=32), True)


def _plans(plan, q, k, v, rope):
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    fp = plan.forward_plan(q, k, v, o, 3.0, 0.5, 1.0, rope)
    grads = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v)]
    return fp, plan.backward_plan(q, k, v, o, *grads, 3.0, 0.5, 1.0, rope)


def test_launch_configs_from_the_table(plan):
    """Every pass of every plan names its launch config, chosen by rule and never benchmarked: the tl.dot passes
    configs.launch_config's for their products, padded head width and token-count bucket, the pair map PAIR_TILE,
    the register passes none (their tiles are fixed in their modules). Within the register limit the autotuner's
    pruning kept, a power of two of at least 16 tokens that tiles every chunk; the same plan twice."""
    from nalasr_kernels.nala import configs

    seen = set()
    for name, q, k, v, rope in _config_cases():
        fp, bp = _plans(plan, q, k, v, rope)
        assert (fp, bp) == _plans(plan, q, k, v, rope), name  # deterministic: frozen plans compare by value
        b, n, h, _, _, bd, bdv = plan.dims(q, v)
        bucket = plan.n_bucket(b, n, h)
        kinds = {"fwd_map": configs.map_kind(fp.f16), "bwd_query": configs.query_kind(bp.eye_query)}
        for launch in (fp.reduce, fp.map, bp.query, bp.key):
            variant, cfg = launch.variant, launch.config
            if variant in DOT_PASSES:
                pass_ = DOT_PASSES[variant]
                kind = kinds.get(pass_, "")
                assert cfg == configs.launch_config(pass_, kind, max(bd, bdv), bucket), (name, variant)
                assert configs.per_thread(cfg, max(bd, bdv)) <= configs.PER_THREAD_LIMIT[pass_], (name, variant)
                seen.add((pass_, kind))
            elif variant == "fwd_map_pair":
                assert cfg == plan.PAIR_TILE, name
                seen.add((variant, ""))
            else:
                assert variant.endswith("_rr") and cfg is None, (name, variant, cfg)
                continue
            assert isinstance(cfg, configs.LaunchConfig), (name, variant)
            assert 16 <= cfg.block_n <= plan.MAX_BLOCK_N and cfg.block_n & (cfg.block_n - 1) == 0, (name, cfg)
            assert cfg.num_warps in (1, 2, 4, 8) and cfg.num_stages in (None, 1, 2, 3), (name, cfg)
            assert launch.chunk % cfg.block_n == 0, (name, variant, launch.chunk, cfg)
    # every tl.dot pass and kind of the table, and the pair map, ran in some case
    assert seen == {(p, k) for p in configs.PASSES for k in configs.kinds(p)} | {("fwd_map_pair", "")}, seen


def test_config_table_is_complete_and_sound():
    """configs.launch_config answers every pass, kind, head width and bucket (2^0 … 2^34), within the register
    limits, the same each time; the table's rows start at bucket 0 and ascend; a width without its own row keeps the
    BD = 16 pick's elements a thread; unknown passes, kinds and widths are refused."""
    sys.path.insert(0, str(ROOT / "kernels"))
    from nalasr_kernels.nala import configs

    for (pass_, kind, bd), rows in configs.TABLE.items():
        assert pass_ in configs.PASSES and kind in configs.kinds(pass_) and bd in configs.WIDTHS
        starts = [s for s, _ in rows]
        assert starts[0] == 0 and starts == sorted(set(starts)), (pass_, kind, bd)
    for pass_ in configs.PASSES:
        for kind in configs.kinds(pass_):
            assert (pass_, kind, 16) in configs.TABLE
            for bd in configs.WIDTHS:
                for e in range(35):
                    cfg = configs.launch_config(pass_, kind, bd, 1 << e)
                    assert cfg == configs.launch_config(pass_, kind, bd, 1 << e)
                    assert configs.per_thread(cfg, bd) <= configs.PER_THREAD_LIMIT[pass_], (pass_, kind, bd, cfg)
                    assert cfg in configs.table_configs(pass_)
                    if (pass_, kind, bd) not in configs.TABLE:
                        base = configs.launch_config(pass_, kind, 16, 1 << e)
                        assert configs.per_thread(cfg, bd) == configs.per_thread(base, 16), (pass_, kind, bd)
    # the table as the autotuner picked it on the H200 (docs in configs.py), at the model's 2^21 bucket
    got = {(p, k): str(configs.launch_config(p, k, 16, 1 << 21)) for p in configs.PASSES for k in configs.kinds(p)}
    assert got == {("fwd_reduce", ""): "32x1x2", ("fwd_map", "f16"): "64x2x2", ("fwd_map", "tf32"): "64x4x2",
                   ("bwd_query", "eye"): "16x1x2", ("bwd_query", "f32"): "32x2x2", ("bwd_key", ""): "64x4x2"}
    for bad in (("fwd_map_rr", "", 16), ("fwd_map", "eye", 16), ("bwd_key", "", 128)):
        with pytest.raises(KeyError):
            configs.launch_config(*bad, 1 << 20)


def test_table_from_autotuner_picks_round_trips():
    """benchmarks/kernel_configs.py's table: picks → TABLE rows (runs merged, the first from bucket 0, widened rows
    left out) → the literal, which reads back as the same table; the committed TABLE prints as itself."""
    from types import SimpleNamespace as Pick

    sys.path.insert(0, str(ROOT / "kernels"))
    from nalasr_kernels.nala import configs

    C = configs.LaunchConfig
    ns = {"C": C, "LaunchConfig": C}
    exec(configs.table_literal(configs.TABLE), ns)
    assert ns["TABLE"] == configs.TABLE
    picks = [Pick(pass_="bwd_key", kind="", bd=16, bucket=1 << e, best=C(64, 4, 2) if e < 20 else C(32, 4, 2, 128))
             for e in (16, 18, 20, 21, 22)]
    picks += [Pick(pass_="bwd_key", kind="", bd=32, bucket=1 << e, best=C(32, 4, 2) if e < 20 else C(16, 4, 2, 128))
              for e in (16, 20, 22)]  # what widen() gives: no row of its own
    picks += [Pick(pass_="fwd_map", kind="tf32", bd=64, bucket=1 << 21, best=C(32, 8, 1))]
    table = configs.table_from_picks(picks, configs.TABLE)
    assert table["bwd_key", "", 16] == ((0, C(64, 4, 2)), (1 << 20, C(32, 4, 2, 128)))
    assert ("bwd_key", "", 32) not in table
    assert table["fwd_map", "tf32", 64] == ((0, C(32, 8, 1)),)
    assert table["fwd_reduce", "", 16] == configs.TABLE["fwd_reduce", "", 16]  # untouched rows kept
    ns = {"C": C, "LaunchConfig": C}
    exec(configs.table_literal(table), ns)
    assert ns["TABLE"] == table
    # two inputs sharing a row and bucket (float32, float16 with RoPE): the config of least summed slowdown
    a, b, c = C(16, 1, 2), C(32, 2, 2), C(64, 4, 2)
    two = [Pick(pass_="fwd_reduce", kind="", bd=16, bucket=1 << 18, best=a, times_ms={a: 1.0, b: 1.1, c: 3.0}),
           Pick(pass_="fwd_reduce", kind="", bd=16, bucket=1 << 18, best=c, times_ms={a: 2.0, b: 1.2, c: 1.0})]
    assert configs.best_overall(two) == b
    assert configs.table_from_picks(two)["fwd_reduce", "", 16] == ((0, b),)


def test_no_autotuner_on_the_inference_path(plan):
    """No triton.autotune wrapper (nor heuristics) anywhere in nalasr_kernels but the opt-in nala.tuning, which no
    other module imports; every kernel is a plain @triton.jit function; binding launches the plan's config, routing
    to an autotuner only while a benchmark sets binding.TUNE (None otherwise)."""
    import importlib

    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from nalasr_kernels.nala import binding, configs

    kernels = 0
    for path in _sources():
        rel = path.relative_to(KERNELS.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = path.read_text()
        if name == "nalasr_kernels.nala.tuning":
            continue
        assert "triton.autotune" not in text and "triton.heuristics" not in text, path
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert "tuning" not in (node.module or "") and "tuning" not in [a.name for a in node.names], path
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            assert not isinstance(obj, (Autotuner, Heuristics)), f"{name}.{attr}"
            # a plain @triton.jit kernel (the interpreter's stand-in under TRITON_INTERPRET=1)
            kernels += isinstance(obj, (JITFunction, InterpretedFunction)) and obj.fn.__module__ == name
    assert kernels >= 10
    assert binding.TUNE is None

    launched = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kw: launched.append((grid, args, kw))

    cfg = configs.LaunchConfig(32, 2, 2, 168)
    binding._launch("fwd_map", Kernel(), cfg, 1 << 20, (1, 2, 3), "a", 7, D=16, BD=16)
    grid, args, kw = launched.pop()
    compiled = not binding.INTERPRET
    assert (grid, args) == ((1, 2, 3), ("a", 7))
    assert kw == {"D": 16, "BD": 16, "BLOCK_N": 32, "num_warps": 2, "num_stages": 2,
                  **({"maxnreg": 168} if compiled else {})}
