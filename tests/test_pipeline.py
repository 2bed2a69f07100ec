"""The folder pipeline (decode ahead, forward, encode on a pool), sharding over worker processes, and the
host/device conversions it relies on being bit-exact."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nalasr.errors import InputError, WeightsError
from nalasr.inference import pipeline
from nalasr.inference.batch import upscale_paths
from nalasr.inference.jobs import BatchReport, ItemResult, Job, Outputs, collect
from nalasr.inference.pipeline import Stages, WriteOptions, run_jobs
from nalasr.inference.staging import Deferred, HostStaging
from nalasr.inference.upscaling import device_lr_tensor, lr_tensor, quantise, upscale_deferred, upscale_pixels
from nalasr.io.weights import save_weights
from nalasr.model import create_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_x2():
    torch.manual_seed(0)
    model = create_model("small", 2).eval()
    with torch.no_grad():  # the upsampler starts at zero; give the residual something to do
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model




def _pngs(folder: Path, n: int, sizes=((9, 11), (13, 7), (8, 8), (15, 10))) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        h, w = sizes[i % len(sizes)]
        p = folder / f"img{i:02d}.png"
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def _ctrl_c_at_forward(monkeypatch, n: int) -> None:
    """The n-th forward raises KeyboardInterrupt, as Ctrl-C during it would."""
    real_forward = pipeline.upscale_deferred
    calls = []

    def forward(pixels, net, dtype, staging):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real_forward(pixels, net, dtype, staging)

    monkeypatch.setattr(pipeline, "upscale_deferred", forward)



def _run(folder: Path, out: Path, model, stages: Stages, **kw) -> list[ItemResult]:
    entries, _ = collect([folder], out, False, None)
    jobs = [e for e in entries if not isinstance(e, ItemResult)]
    return run_jobs(entries, Outputs(jobs, 2, None, "fail"), model, torch.float32, WriteOptions(95, 6, False),
                    max_pixels=10**8, stages=stages, **kw)


# --------------------------------------------------------------------------------- bit-exact conversions


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_device_lr_tensor_equals_the_host_conversion(dtype, channels):
    top = np.iinfo(dtype).max
    pixels = np.random.default_rng(channels).integers(0, top + 1, (5, 7, channels), dtype=dtype)
    pixels.flat[:2] = (0, top)
    host, m1 = lr_tensor(pixels)
    dev, m2 = device_lr_tensor(pixels, torch.device("cpu"))
    assert m1 == m2 and host.dtype == dev.dtype == torch.float32
    assert torch.equal(host, dev)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_quantise_rounds_as_np_rint_does(dtype):
    maxval = float(np.iinfo(dtype).max)
    rng = np.random.default_rng(1)
    x = rng.random((3, 6, 9), dtype=np.float32)
    halves = (np.arange(18, dtype=np.float32) + 0.5) / np.float32(maxval)  # ties: half to even
    x[0, 0, :9], x[0, 1, :9] = halves[:9], halves[9:]
    x[1, 0, :2] = (0.0, 1.0)
    expect = np.rint(x.transpose(1, 2, 0) * maxval).astype(dtype)
    got = quantise(torch.from_numpy(x), maxval, np.dtype(dtype))
    assert got.dtype == dtype and got.shape == (6, 9, 3)
    np.testing.assert_array_equal(got, expect)


# --------------------------------------------------------------------------------------------- pipeline


def test_pipelined_outputs_are_the_serial_ones_in_input_order(tmp_path, tiny_x2, monkeypatch):
    src = _pngs(tmp_path / "in", 7)
    serial = _run(tmp_path / "in", tmp_path / "serial", tiny_x2, Stages(1, 1, 1))
    # the writers finish out of order: the first image's write is the slowest
    real_write = pipeline.write_image

    def slow_first(out, picture, **kw):
        if out.name.startswith("img00"):
            time.sleep(0.3)
        return real_write(out, picture, **kw)

    monkeypatch.setattr(pipeline, "write_image", slow_first)
    finished: list[int] = []
    piped = _run(tmp_path / "in", tmp_path / "piped", tiny_x2, Stages(2, 3, 3), on_item=lambda i, _: finished.append(i))
    assert [r.input for r in piped] == [str(p) for p in src] == [r.input for r in serial]
    assert all(r.status == "ok" for r in piped) and finished[-1] == 0  # reported in input order all the same
    for a, b in zip(serial, piped):
        assert Path(a.output).read_bytes() == Path(b.output).read_bytes()
        assert b.read_ms is not None and b.device_ms is not None and b.write_ms is not None
        assert b.total_ms >= b.write_ms


def test_decoding_stays_within_the_lookahead(tmp_path, tiny_x2, monkeypatch):
    _pngs(tmp_path / "in", 9)
    started = []
    forwards = []
    real_read, real_forward = pipeline.read_image, pipeline.upscale_deferred
    lock = threading.Lock()

    def read(path, **kw):
        with lock:
            started.append(path)
        return real_read(path, **kw)

    def forward(pixels, net, dtype, staging):
        time.sleep(0.02)  # a slow device: readers would run ahead if nothing held them
        forwards.append(len(started))
        return real_forward(pixels, net, dtype, staging)

    monkeypatch.setattr(pipeline, "read_image", read)
    monkeypatch.setattr(pipeline, "upscale_deferred", forward)
    _run(tmp_path / "in", tmp_path / "out", tiny_x2, Stages(readers=2, writers=1, lookahead=3))
    for k, reads_started in enumerate(forwards):  # at the k-th forward at most k + lookahead reads began
        assert reads_started <= k + 3


def test_a_model_still_loading_is_waited_for_and_its_error_ends_the_run(tmp_path, tiny_x2):
    from concurrent.futures import Future

    _pngs(tmp_path / "in", 2)
    later: Future = Future()
    threading.Timer(0.2, lambda: later.set_result(tiny_x2)).start()
    assert [r.status for r in _run(tmp_path / "in", tmp_path / "a", later, Stages(1, 1, 2))] \
        == ["ok", "ok"]
    broken: Future = Future()
    broken.set_exception(InputError("weights.safetensors: not a NaLaSR weights file"))
    with pytest.raises(InputError, match="not a NaLaSR"):
        _run(tmp_path / "in", tmp_path / "b", broken, Stages(1, 1, 2))


def test_ctrl_c_finishes_the_files_in_flight_and_marks_the_rest(tmp_path, tiny_x2, monkeypatch):
    src = _pngs(tmp_path / "in", 6)
    _ctrl_c_at_forward(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt) as info:
        _run(tmp_path / "in", tmp_path / "out", tiny_x2, Stages(1, 2, 3))
    results = info.value.partial_results
    assert [r.status for r in results] == ["ok"] * 3 + ["interrupted"] * 3
    assert [r.input for r in results] == [str(p) for p in src]
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["img00_x2.png", "img01_x2.png", "img02_x2.png"]  # whole files only, no temp left
    for name in written:
        Image.open(tmp_path / "out" / name).load()


def test_ctrl_c_report_reaches_the_caller(tmp_path, tiny_x2, monkeypatch):
    _pngs(tmp_path / "in", 3)
    _ctrl_c_at_forward(monkeypatch, 2)
    seen: list[BatchReport] = []
    with pytest.raises(KeyboardInterrupt):
        upscale_paths([tmp_path / "in"], tmp_path / "out", scale=2, model=tiny_x2, on_interrupt=seen.append)
    (report,) = seen
    assert report.interrupted and report.count("ok") == 1 and report.count("interrupted") == 2


def test_a_failed_write_releases_its_name_and_the_batch_goes_on(tmp_path, tiny_x2, monkeypatch):
    _pngs(tmp_path / "in", 3)
    real_write = pipeline.write_image

    def flaky(out, picture, **kw):
        if out.name.startswith("img01"):
            raise OSError(28, "No space left on device")
        return real_write(out, picture, **kw)

    monkeypatch.setattr(pipeline, "write_image", flaky)
    results = _run(tmp_path / "in", tmp_path / "out", tiny_x2, Stages(1, 2, 2))
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert "No space left" in results[1].error and results[1].exit_code == InputError.exit_code


def test_every_output_frees_its_staging_slot_written_or_not(tmp_path, tiny_x2, monkeypatch):
    """A slot not given back would stall the next image's copy for good: written, failed in mkdir, failed in
    the encoder or never read, each output frees its slot exactly once."""
    _pngs(tmp_path / "in", 4)
    real_forward, real_write = pipeline.upscale_deferred, pipeline.write_image
    freed: list[str] = []
    sent: list[int] = []

    def forward(pixels, net, dtype, staging):
        sent.append(1)
        out, stats = real_forward(pixels, net, dtype, staging)
        held = out.result()
        return Deferred(held, release=lambda: freed.append(f"{held.shape}")), stats  # a ready output with a slot

    def flaky(out, picture, **kw):
        if out.name.startswith("img02"):
            raise OSError(28, "No space left on device")
        return real_write(out, picture, **kw)

    real_mkdir = Path.mkdir

    def mkdir(self, *a, **kw):
        if self.name == "sub":
            raise PermissionError(13, "Permission denied")
        return real_mkdir(self, *a, **kw)

    monkeypatch.setattr(pipeline, "upscale_deferred", forward)
    monkeypatch.setattr(pipeline, "write_image", flaky)
    entries, _ = collect([tmp_path / "in"], tmp_path / "out", False, None)
    jobs = [e for e in entries if not isinstance(e, ItemResult)]
    jobs[1] = Job(jobs[1].source, tmp_path / "out" / "sub")  # its folder cannot be made
    monkeypatch.setattr(Path, "mkdir", mkdir)
    results = run_jobs(jobs, Outputs(jobs, 2, None, "fail"), tiny_x2, torch.float32, WriteOptions(95, 6, False),
                       max_pixels=10**8, stages=Stages(1, 2, 2))
    assert [r.status for r in results] == ["ok", "failed", "failed", "ok"]
    assert "cannot create the output folder" in results[1].error and "No space" in results[2].error
    assert len(freed) == len(sent) == 4


def test_a_deferred_output_is_read_once_and_frees_once():
    freed = []
    d = Deferred(np.zeros((2, 3, 3), np.uint8), release=lambda: freed.append(1))
    assert d.shape == (2, 3, 3) and d.result() is d.result()
    d.discard()
    assert freed == [1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the staging copies run there)")
@pytest.mark.parametrize("size", [(17, 23, 3), (64, 48, 1), (5, 130, 3)])
def test_staged_outputs_equal_the_direct_ones_on_cuda(size):
    """Bit for bit, through more images than slots, the buffers freed while later copies are in flight."""
    torch.manual_seed(0)
    model = create_model("small", 2).eval().cuda()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    staging = HostStaging(torch.device("cuda"), slots=2)
    rng = np.random.default_rng(size[0])
    images = [rng.integers(0, 256, size, dtype=np.uint8) for _ in range(5)]
    # Both paths must run the same kernels: the first forward of a size is eager and later ones replay a CUDA
    # graph (without this warm-up the eager first image differed from its replay by 1 in ~4% of its fp16
    # pixels on an H100). Three calls leave the graph captured, so every forward below replays it and a
    # difference can only come from the staging.
    for _ in range(3):
        upscale_pixels(images[0], model, torch.float16)
    pending = []
    for i, pixels in enumerate(images):
        pending.append(upscale_deferred(pixels, model, torch.float16, staging)[0])
        if i >= 1:  # two in flight at most: the oldest is read before a third is sent
            pending[i - 1].result()
    for pixels, d in zip(images, pending):
        direct, _ = upscale_pixels(pixels, model, torch.float16)
        np.testing.assert_array_equal(d.result(), direct)
        assert d.result().flags.c_contiguous and d.result().shape == (size[0] * 2, size[1] * 2, size[2])


def test_stages_leave_the_cores_to_the_cpu_forward():
    assert Stages.for_device(torch.device("cpu"), cores=16) == Stages(1, 1, 2)
    cuda = Stages.for_device(torch.device("cuda"), cores=16)
    assert cuda.writers == 12 and cuda.readers == 2
    assert Stages.for_device(torch.device("cuda"), cores=2).writers == 1


def test_report_exit_code_rule():
    def item(status, code=None):
        return ItemResult("x", status=status, exit_code=code)

    def report(*items):
        return BatchReport(2, "cpu", "fp32", None, items=list(items))

    assert report(item("ok"), item("skipped")).exit_code() == 0
    assert report(item("failed", 2), item("failed", 2)).exit_code() == 2
    assert report(item("failed", 2), item("failed", 3)).exit_code() == 1
    assert report(item("ok"), item("failed", 2)).exit_code() == 1


# --------------------------------------------------------------------------------------------- sharding


def test_two_cpu_workers_give_the_single_device_outputs_and_report(tmp_path, tiny_x2):
    weights = save_weights(tiny_x2, tmp_path / "w.safetensors")
    src = _pngs(tmp_path / "in", 5)
    (tmp_path / "in" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    one = upscale_paths([tmp_path / "in"], tmp_path / "one", scale=2, weights=weights, device="cpu")
    two = upscale_paths([tmp_path / "in"], tmp_path / "two", scale=2, weights=weights, device="cpu,cpu")
    assert [i.input for i in two.items] == [i.input for i in one.items] == sorted(
        [str(p) for p in src] + [str(tmp_path / "in" / "broken.png")])
    assert [i.status for i in two.items] == [i.status for i in one.items] == ["failed"] + ["ok"] * 5
    assert {i.worker for i in two.items if i.status == "ok"} == {"cpu"} and two.device == "cpu,cpu"
    assert two.items[0].error == one.items[0].error
    for a, b in zip(one.items[1:], two.items[1:]):
        assert Path(a.output).read_bytes() == Path(b.output).read_bytes()
    assert two.exit_code() == one.exit_code() == 1


def test_worker_that_cannot_load_the_weights_fails_the_run(tmp_path):
    bad = tmp_path / "w.safetensors"
    bad.write_bytes(b"not safetensors")
    _pngs(tmp_path / "in", 2)
    with pytest.raises(WeightsError, match="w.safetensors"):
        upscale_paths([tmp_path / "in"], tmp_path / "out", scale=2, weights=bad, device="cpu,cpu")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_cli_ctrl_c_prints_the_report_and_one_line_and_exits_130(tmp_path, tiny_x2, monkeypatch, capsys):
    import json

    from nalasr.cli import run

    weights = save_weights(tiny_x2, tmp_path / "w.safetensors")
    _pngs(tmp_path / "in", 3)
    _ctrl_c_at_forward(monkeypatch, 2)
    code = run(["upscale", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "-s", "2", "--weights", str(weights),
                "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    assert code == 130
    report = json.loads(out)
    assert report["interrupted"] and [i["status"] for i in report["items"]] == ["ok", "interrupted", "interrupted"]
    assert err.strip().splitlines() == ["interrupted: 1 of 3 written, the files in flight finished; run the same "
                                        "command with --skip-existing to do the rest"]


def test_stale_temps_of_a_killed_run_are_removed_and_nothing_else(tmp_path, tiny_x2):
    import os
    import subprocess
    import sys

    from nalasr.io import fsutil

    _pngs(tmp_path / "in", 1)
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    ours = fsutil.temp_prefix(out / "img00_x2.png")  # this process's temp name, with a dead writer's pid
    stale = out / (ours.replace(f"-{os.getpid()}-", f"-{dead}-") + "abcd1234.tmp.png")
    stale.write_bytes(b"half a png")
    theirs = out / ".img00_x2.tmp.png"  # another program's temp: not ours to remove
    theirs.write_bytes(b"x")
    report = upscale_paths([tmp_path / "in"], out, scale=2, model=tiny_x2)
    assert report.count("ok") == 1 and not stale.exists() and theirs.exists()
    assert any("removed 1 temp file" in w for w in report.warnings)
