"""`nalasr bench` and the softmax-swapped network: tiny sizes on CPU, no timing assertions."""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import pytest
import torch

from nalasr.bench import sweep as bench
from nalasr.bench import report as bench_report
from nalasr.bench import BenchOptions, BenchRecord, Sweep, run_sweep
from nalasr.cli import run
from nalasr.model import create_model
from nalasr.model.nalasr import NalaMixer
from nalasr.ops import nala_attention
from nalasr.model.softmax_mixer import SoftmaxMixer, mixer_kind, softmax_attention, swap_attention

FAST = BenchOptions(warmup=1, repeats=1)
TINY = Sweep(sizes=((6, 8),), devices=("cpu",), variants=("small",), attentions=("nala", "sdpa", "materialised"))


@pytest.fixture(scope="module")
def records() -> list[BenchRecord]:
    return run_sweep(TINY, FAST)


# ------------------------------------------------------------------------------------------ the swap


def _model(scale: int = 2) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model("small", scale).eval()


@torch.inference_mode()
def test_softmax_model_same_shape_and_parameters() -> None:
    model = _model(3)
    x = torch.rand(1, 3, 5, 7)
    params = {k: v.data_ptr() for k, v in model.state_dict().items()}
    y_nala, trunk_nala = model(x), model.trunk(x)
    for kind in ("sdpa", "materialised"):
        swap_attention(model, kind)
        assert mixer_kind(model) == kind
        assert {k: v.data_ptr() for k, v in model.state_dict().items()} == params  # same tensors, same keys
        y = model(x)
        assert y.shape == y_nala.shape == (1, 3, 15, 21)
        assert torch.isfinite(y).all()
        assert not torch.equal(model.trunk(x), trunk_nala)  # the mixer really changed
    swap_attention(model, "nala")
    assert not any(isinstance(m, SoftmaxMixer) for m in model.modules())
    torch.testing.assert_close(model(x), y_nala, rtol=0, atol=0)


@torch.inference_mode()
def test_sdpa_and_materialised_agree() -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 37, 3, 16, generator=g) for _ in range(3))  # (B, N, H, D), odd N
    a = softmax_attention(q, k, v, "sdpa")
    b = softmax_attention(q, k, v, "materialised")
    assert a.shape == q.shape
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    model = _model()
    x = torch.rand(1, 3, 6, 5)
    ya = swap_attention(model, "sdpa")(x)
    yb = swap_attention(model, "materialised")(x)
    torch.testing.assert_close(ya, yb, rtol=1e-4, atol=1e-5)


@torch.inference_mode()
def test_softmax_mixer_differs_from_nala_mixer_only_in_the_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """With NaLa as its op, a SoftmaxMixer is exactly the NalaMixer it was: nothing else is swapped."""
    model = _model()
    mixer = next(m for m in model.modules() if isinstance(m, NalaMixer))
    x = torch.randn(1, 4, 5, mixer.cfg.dim)
    gamma = torch.rand(mixer.cfg.dim)
    residual = torch.zeros_like(x)  # the mixer returns residual + γ·Mixer(x)
    expected = mixer(x, gamma, residual)
    calls: list[tuple[int, int]] = []

    def nala_op(self, q, k, v, hw):
        calls.append(hw)
        return nala_attention(q, k, v, self.cfg.nala, rope_hw=hw if self.cfg.rope else None, backend=self.backend)

    monkeypatch.setattr(SoftmaxMixer, "_attend", nala_op)
    swap_attention(model, "sdpa")
    torch.testing.assert_close(mixer(x, gamma, residual), expected, rtol=0, atol=0)
    assert calls == [(4, 5)]


def test_swap_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown attention kind"):
        swap_attention(_model(), "linear")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------- the sweep


def test_sweep_records(records: list[BenchRecord]) -> None:
    assert [r.attention for r in records] == ["nala-auto", "softmax-sdpa", "softmax-materialised"]
    for r in records:
        assert r.status == "ok", r.message
        assert (r.lr_h, r.lr_w, r.out_h, r.out_w, r.tokens, r.scale) == (6, 8, 24, 32, 48, 4)
        assert r.device == "cpu" and r.precision == "fp32" and r.variant == "small" and r.params > 0
        assert r.median_ms is not None and r.median_ms > 0 and r.mpix_per_s is not None and r.mpix_per_s > 0
        assert r.peak_gib is not None and r.peak_gib >= 0 and r.memory_kind == "cpu-rss"
        assert r.repeats == len(r.times_ms) == 1 and r.warmup == 1 and r.finite is True
        assert r.weights == "random"
    assert [r.backend for r in records] == ["reference", "sdpa", "materialised"]  # auto on CPU → reference


def test_reports_written(records: list[BenchRecord], tmp_path) -> None:
    paths = {k: tmp_path / "out" / f"r.{k}" for k in ("json", "md")}
    bench_report.write_reports(records, json_path=paths["json"], markdown_path=paths["md"], command="nalasr bench")
    data = json.loads(paths["json"].read_text())
    assert data["meta"]["cpu_cores"] and data["meta"]["torch"] == torch.__version__
    assert "random weights" in data["meta"]["note"]
    assert len(data["records"]) == 3 and {"median_ms", "peak_gib", "mpix_per_s", "status"} <= set(data["records"][0])
    md = paths["md"].read_text()
    assert "| attention | op |" in md and "softmax-materialised" in md and "random weights" in md
    assert "NaLa against softmax attention" in md
    assert all(r.cuda_graphs is False for r in records) and " graph |" not in md  # CPU: never replayed
    graphed = [dataclasses.replace(records[0], cuda_graphs=True)]
    assert f"| {graphed[0].repeats} graph |" in bench_report.to_markdown(graphed, data["meta"])
    pytest.importorskip("matplotlib")
    bench_report.write_plot(records, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_oom_is_recorded_and_larger_sizes_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = bench._time

    def fake(model, x, *args, **kwargs):
        if x.shape[-2] * x.shape[-1] >= 32:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has ...")
        return real(model, x, *args, **kwargs)

    monkeypatch.setattr(bench, "_time", fake)
    sweep = Sweep(sizes=((4, 8), (4, 4), (8, 8)), devices=("cpu",), variants=("small",), attentions=("nala",))
    recs = run_sweep(sweep, FAST)
    assert [(r.size, r.status) for r in recs] == [("4x4", "ok"), ("4x8", "oom"), ("8x8", "skipped")]
    assert "4x8" in recs[1].message and "2.50 GiB" in recs[1].message
    assert "OOM already at 4x8" in recs[2].message


def test_case_shared_by_two_sweeps_runs_once() -> None:
    a = Sweep(sizes=((4, 4), (4, 6)), devices=("cpu",), variants=("small",), attentions=("nala",))
    b = Sweep(sizes=((4, 6),), devices=("cpu",), variants=("small",), attentions=("nala",))
    recs = bench.run_sweeps([a, b], BenchOptions(warmup=0, repeats=1))
    assert [r.size for r in recs] == ["4x4", "4x6"]


def test_error_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(bench, "_time", broken)
    (rec,) = run_sweep(Sweep(sizes=((4, 4),), devices=("cpu",), variants=("small",), attentions=("sdpa",)), FAST)
    assert rec.status == "error" and rec.message == "RuntimeError: kernel exploded"


def test_materialised_skipped_when_scores_cannot_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "free_bytes", lambda device: 1000)
    sweep = Sweep(sizes=((6, 6),), devices=("cpu",), variants=("small",), attentions=("materialised",))
    (rec,) = run_sweep(sweep, FAST)
    assert rec.status == "skipped" and "N x N" in rec.message and rec.median_ms is None


def test_slow_case_predicted_and_skipped() -> None:
    sweep = Sweep(sizes=((2, 2), (64, 64)), devices=("cpu",), variants=("small",), attentions=("sdpa",))
    small, big = run_sweep(sweep, BenchOptions(warmup=0, repeats=1, max_forward_s=5.0))
    assert small.status == "ok" and big.status == "skipped" and "predicted" in big.message  # 1024² x the 2x2 time


def test_find_max_grows_and_bisects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The growth logic, with the device faked: a case 'fits' below 5,000 tokens."""
    def fake_measure(case, options, cfg, *, warmup=None, repeats=None):
        rec = bench._blank(case, cfg, options, "ok" if case.tokens < 5000 else "oom")
        if rec.status == "ok":
            rec.median_ms, rec.peak_gib = 1.0, case.tokens / 1e6
        return rec

    monkeypatch.setattr(bench, "measure_case", fake_measure)
    case = bench.expand(Sweep(sizes=((10, 20),), devices=("cpu",), variants=("small",), attentions=("nala",)))[0]
    runner = bench._Runner(BenchOptions(), None, bench.Progress())
    runner.record(case)
    runner.find_max([case])
    top = runner.records[-1]
    assert top.find_max and top.status == "ok"
    assert 5000 / 1.1 < top.tokens < 5000 and top.lr_w == pytest.approx(2 * top.lr_h, abs=1)
    assert "OOM" in top.message


def test_targets() -> None:
    def rec(attention: str, size: tuple[int, int], ms: float, gib: float, status: str = "ok") -> BenchRecord:
        h, w = size
        return BenchRecord(attention=attention, backend="x", variant="default", params=1, scale=4, precision="fp16",
                           device="cuda:0", lr_h=h, lr_w=w, out_h=4 * h, out_w=4 * w, tokens=h * w, status=status,
                           median_ms=ms, peak_gib=gib)

    checks = {c.target: c for c in bench_report.check_targets([
        rec("nala-auto", (192, 256), 8.0, 0.2), rec("softmax-materialised", (192, 256), 300.0, 40.0),
        rec("softmax-sdpa", (192, 256), 100.0, 0.3), rec("nala-auto", (540, 960), 50.0, 1.0),
    ])}
    assert checks["192x256 LR, fp16/bf16: <= 10 ms"].passed
    assert checks["192x256 LR, fp16/bf16: <= 0.25 GiB peak"].passed
    assert checks["540x960 LR, fp16/bf16: <= 40 ms"].passed is False
    assert checks["540x960 LR, fp16/bf16: <= 1.5 GiB peak"].passed
    assert checks["192x256 fp16: >= 90% less peak memory than materialised softmax"].passed
    assert checks["fp16: faster than SDPA softmax from ~50K tokens (192x256) up"].passed


# -------------------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("argv", [
    ["bench", "--sizes", "12by3"],
    ["bench", "--sizes", "0x4"],
    ["bench", "--attention", "linear"],
    ["bench", "--precisions", "fp8", "--devices", "cpu"],
    ["bench", "--scales", "5", "--devices", "cpu"],
    ["bench", "--variants", "huge", "--devices", "cpu"],
    ["bench", "--preset", "gpu9000"],
    ["bench", "--preset", "cpu", "--sizes", "8x8"],
    ["bench", "--repeats", "0"],
    ["bench", "--find-max", "--devices", "cpu", "--sizes", "8x8"],
    ["bench", "--devices", "tpu"],
])
def test_cli_bad_args(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1, err


def test_cli_cuda_without_gpu(capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert run(["bench", "--preset", "h200"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_cli_plot_without_matplotlib(monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    assert run(["bench", "--devices", "cpu", "--sizes", "4x4", "--plot", str(tmp_path / "p.png")]) == 1
    err = capsys.readouterr().err.strip()
    assert "matplotlib" in err and len(err.splitlines()) == 1


def test_cli_runs(tmp_path, capsys: pytest.CaptureFixture) -> None:
    j, m = tmp_path / "b.json", tmp_path / "b.md"
    code = run(["bench", "--devices", "cpu", "--sizes", "4x6", "--variants", "small", "--attention", "nala,sdpa",
                "--warmup", "0", "--repeats", "1", "--json", str(j), "--markdown", str(m)])
    assert code == 0
    assert [r["attention"] for r in json.loads(j.read_text())["records"]] == ["nala-auto", "softmax-sdpa"]
    assert "nalasr bench --sizes 4x6" in m.read_text()
    text = capsys.readouterr().out
    assert "random weights" in text and "4x6" in text


def test_cli_error_case_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(bench, "_time", broken)
    assert run(["bench", "--devices", "cpu", "--sizes", "4x4", "--variants", "small", "--attention", "nala"]) == 1
    assert "failed with an error" in capsys.readouterr().err


def test_warmup_outlasts_a_slow_first_forward() -> None:
    """A first forward that pays compilation (here: sleeps) must not end warm-up, or the timed repeats would
    include what the second call does (a CUDA graph's capture): two warm-ups when two or more are asked for."""
    calls: list[float] = []

    def model(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.3 if not calls else 0.0)
        calls.append(1.0)
        return x

    x = torch.zeros(1, 3, 4, 4)
    times, used, finite, *_ = bench._time(model, x, torch.device("cpu"), warmup=3, repeats=2, max_case_s=0.4)
    assert used == 2 and finite is True and len(times) >= 1
    calls.clear()
    _, used, *_ = bench._time(model, x, torch.device("cpu"), warmup=1, repeats=1, max_case_s=0.4)
    assert used == 1  # one asked for, one run
