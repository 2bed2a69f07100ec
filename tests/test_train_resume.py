"""Kill a CPU training process (SIGKILL) at random moments, during saves too, and resume it until it ends:
nothing is corrupted, and the result equals, bit for bit, a run that was never interrupted.

Bit-exact means the checkpoint restores everything that decides the next step: model, EMA, optimiser, step,
data order (the sampler's generator), RNG states, validation history/best and the log's running mean.
The kill times come from a seeded RNG (the schedule is reproducible; where a kill lands depends on the
machine's speed, which is the point). Processes run single-threaded, so CPU results are deterministic.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from nalasr.train.checkpoint import list_checkpoints, load_checkpoint, load_latest
from nalasr.train.config import to_toml
from nalasr.io.weights import load_weights
from imagegen import smooth_image

STEPS = 36
TINY = {"dim": 8, "groups": 1, "blocks": 1, "heads": 2}
DEADLINE_S = 100  # the whole kill-and-resume loop; the test fails rather than run on

# A `nalasr train` process, optionally killing itself at one exact point of a checkpoint save:
#   KILL_AT=write:K   SIGKILL while the K-th save of this process is half written (a truncated temp file)
#   KILL_AT=rename:K  SIGKILL right after the K-th save's rename, before the directory fsync and the pruning
LAUNCH = r"""
import os, signal, sys
import torch
where, _, k = os.environ.get("KILL_AT", "").partition(":")
if where:
    import nalasr.io.fsutil as fsutil
    import nalasr.train.checkpoint as ck
    count = {"n": 0}
    real_save, real_fsync_dir = torch.save, fsutil._fsync_dir
    def save(obj, f, *a, **kw):
        real_save(obj, f, *a, **kw)
        if str(f).endswith(".tmp.pt") and ".ckpt_" in str(f):
            count["n"] += 1
            if where == "write" and count["n"] == int(k):
                os.truncate(f, os.path.getsize(f) // 2)
                os.kill(os.getpid(), signal.SIGKILL)
    def fsync_dir(folder):
        if where == "rename" and count["n"] == int(k):
            os.kill(os.getpid(), signal.SIGKILL)
        real_fsync_dir(folder)
    ck.torch.save = save
    fsutil._fsync_dir = fsync_dir
from nalasr.cli import run
sys.exit(run(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("resume")
    for folder, n, (h, w), seed in ((root / "train", 4, (40, 48), 0), (root / "val", 1, (24, 24), 50)):
        folder.mkdir()
        for i in range(n):
            Image.fromarray(smooth_image(h, w, seed + i)).save(folder / f"{i}.png")
    cfg = root / "cfg.toml"
    cfg.write_text(to_toml({
        "scales": [2, 3], "data": [str(root / "train")], "model_overrides": TINY, "steps": STEPS, "batch": 2,
        "patch": 6, "warmup": 4, "ema": 0.9, "ckpt_every": 1, "keep_last": 2, "log_every": 1,
        "val_set": str(root / "val"), "val_every": 5, "device": "cpu", "seed": 5, "loss_fft": 0.1,
    }))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    return {"root": root, "cfg": cfg, "env": env}


def start(setup: dict, out: Path, *, resume: bool, kill_at: str = "") -> subprocess.Popen:
    args = ["train", "--config", str(setup["cfg"]), "--out", str(out)] + (["--resume"] if resume else [])
    log = open(out.parent / f"{out.name}.stderr", "a")
    return subprocess.Popen([sys.executable, "-c", LAUNCH, *args], env={**setup["env"], "KILL_AT": kill_at},
                            stdout=log, stderr=log, start_new_session=True)


def wait(proc: subprocess.Popen, timeout: float = 90) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def ckpt_dir(out: Path) -> Path:
    return out / "checkpoints"


def check_folder(out: Path) -> tuple[int, int]:
    """Every checkpoint the resume logic would consider loads whole with weights_only=True.
    Returns (newest step, stray temp files)."""
    ckpts = list_checkpoints(ckpt_dir(out))
    for step, path in ckpts:
        state = torch.load(path, map_location="cpu", weights_only=True)
        assert state["step"] == step and state["format"] == "nalasr-checkpoint/1"
    temps = [p for p in ckpt_dir(out).iterdir() if p.name.startswith(".")] if ckpt_dir(out).is_dir() else []
    assert all(re.fullmatch(r"\.(ckpt_\d{8}|best)\..*\.tmp\.pt", p.name) for p in temps), temps
    return (ckpts[-1][0] if ckpts else 0), len(temps)


def resumed_from(out: Path) -> list[str]:
    return re.findall(r"resumed from (ckpt_\d{8}\.pt)", (out.parent / f"{out.name}.stderr").read_text())


def log_records(out: Path) -> tuple[list[tuple[int, float, float]], list[dict]]:
    train, val = [], []
    for line in (out / "log.jsonl").read_text().splitlines():
        rec = json.loads(line)  # a line cut by a kill must not survive a resume
        if "val" in rec:
            val.append(rec["val"])
        else:
            train.append((rec["step"], rec["loss"], rec["lr"]))
    return train, val


def assert_same_tensors(a, b, where: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same_tensors(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_sigkill_anywhere_then_resume_is_bit_exact(setup):
    root, t0 = setup["root"], time.monotonic()
    ref, out = root / "ref", root / "killed"

    # the run nobody interrupts
    assert wait(start(setup, ref, resume=False)) == 0, (root / "ref.stderr").read_text()

    # 1. killed while the 3rd checkpoint is half written: a truncated temp file, never a checkpoint
    assert wait(start(setup, out, resume=True, kill_at="write:3")) == -signal.SIGKILL
    newest, temps = check_folder(out)
    assert newest == 2 and temps == 1
    # 2. killed right after a checkpoint's rename, before the directory fsync and the pruning
    assert wait(start(setup, out, resume=True, kill_at="rename:2")) == -signal.SIGKILL
    newest, temps = check_folder(out)
    assert newest == 4 and temps == 0  # the stale temp was cleared by the next save
    assert resumed_from(out) == ["ckpt_00000002.pt"]

    # 3. SIGKILL at random moments (seeded), a few steps into each resumed process
    rng, kills, during_save = random.Random(20240611), 0, 0
    while kills < 6 and time.monotonic() - t0 < DEADLINE_S * 0.7:
        before, _ = check_folder(out)
        proc = start(setup, out, resume=True)
        while proc.poll() is None and max((s for s, _ in list_checkpoints(ckpt_dir(out))), default=0) <= before:
            time.sleep(0.005)
        if proc.poll() is not None:
            break  # it finished before being killed
        time.sleep(rng.uniform(0.0, 0.12))
        proc.send_signal(signal.SIGKILL)
        assert wait(proc) in (-signal.SIGKILL, 0)
        kills += 1
        newest, temps = check_folder(out)
        during_save += temps > 0
        if newest == STEPS:
            break  # killed after the last checkpoint (while exporting): the resume below only exports
    assert kills >= 3, "the machine was too slow to kill the run a few times within the time limit"

    # 4. the newest checkpoint damaged after the fact (e.g. a disk fault): resume falls back to the one before
    ckpts = list_checkpoints(ckpt_dir(out))
    if ckpts and ckpts[-1][0] < STEPS and len(ckpts) >= 2:
        os.truncate(ckpts[-1][1], ckpts[-1][1].stat().st_size // 3)
        state, path = load_latest(ckpt_dir(out))
        assert path == ckpts[-2][1] and state["step"] == ckpts[-2][0]

    # 5. resume to the end, uninterrupted
    assert wait(start(setup, out, resume=True)) == 0, (root / "killed.stderr").read_text()[-3000:]
    assert time.monotonic() - t0 < DEADLINE_S
    newest, temps = check_folder(out)
    assert newest == STEPS and temps == 0
    assert len(resumed_from(out)) >= kills + 2

    # the same run, bit for bit: model, EMA, optimiser, data order, RNG, validation history
    a = load_checkpoint(ckpt_dir(ref) / f"ckpt_{STEPS:08d}.pt")
    b = load_checkpoint(ckpt_dir(out) / f"ckpt_{STEPS:08d}.pt")
    for key in ("step", "model", "ema", "optimizer", "sampler", "torch_rng", "best", "history", "log_acc"):
        assert_same_tensors(a[key], b[key], key)
    assert {**a["config"], "out": ""} == {**b["config"], "out": ""}
    assert_same_tensors(torch.load(ckpt_dir(ref) / "best.pt", weights_only=True)["model"],
                        torch.load(ckpt_dir(out) / "best.pt", weights_only=True)["model"], "best")
    # the log reads as one uninterrupted run with the same loss at every step
    train_ref, val_ref = log_records(ref)
    train_out, val_out = log_records(out)
    assert [s for s, _, _ in train_ref] == list(range(1, STEPS + 1))
    assert train_out == train_ref
    assert val_out == val_ref and [v["step"] for v in val_ref] == [5, 10, 15, 20, 25, 30, 35, 36]
    for name in ("nalasr_default_x2.safetensors", "nalasr_default_x3.safetensors"):
        x, y = load_weights(out / "weights" / name), load_weights(ref / "weights" / name)
        assert x.card == y.card
        assert_same_tensors(x.state_dict(), y.state_dict(), name)
    print(f"random kills: {kills} ({during_save} left a temp file: killed during a save); "
          f"resumes: {len(resumed_from(out))}; {time.monotonic() - t0:.1f} s")


def test_log_running_mean_survives_a_resume(tmp_path):
    """log_every > 1 with a checkpoint between two log lines: the resumed log line averages the same steps."""
    from nalasr.train.config import TrainConfig
    from nalasr.train.loop import train

    data = tmp_path / "train"
    data.mkdir()
    for i in range(2):
        Image.fromarray(smooth_image(32, 32, i)).save(data / f"{i}.png")
    cfg = dict(scales=[2], data=[str(data)], model_overrides=TINY, steps=6, batch=2, patch=6, log_every=3,
               ckpt_every=1, keep_last=10, val_set="", device="cpu")
    a, b = tmp_path / "a", tmp_path / "b"
    train(TrainConfig(**cfg, out=str(a)), log=lambda m: None)
    # "killed" after step 4's checkpoint: mid-way between the log lines of steps 3 and 6
    shutil.copytree(a, b)
    for step, path in list_checkpoints(ckpt_dir(b)):
        if step > 4:
            path.unlink()
    train(TrainConfig(**cfg, out=str(b)), resume=True, log=lambda m: None)
    assert [s for s, _, _ in log_records(b)[0]] == [3, 6]
    assert log_records(b)[0] == log_records(a)[0]
