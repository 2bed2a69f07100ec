"""DistributedDataParallel on CPU: 2 processes (gloo) follow the single-process loss curve at the same global batch.

The processes are started the way torchrun starts them (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK) and run the same `nalasr train` command. Each rank runs in its own working directory with a
relative --out, so anything rank 1 wrote would show up in its own folder: only rank 0 may write.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import torch
from PIL import Image

from nalasr.train.checkpoint import list_checkpoints, load_checkpoint
from nalasr.train.config import to_toml
from imagegen import smooth_image

TINY = {"dim": 8, "groups": 1, "blocks": 1, "heads": 2}
STEPS = 8
RTOL = 1e-4  # per logged step, relative: only the order of the floating-point sums differs
TIMEOUT_S = 120

LAUNCH = "import sys; from nalasr.cli import run; sys.exit(run(sys.argv[1:]))"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args: list[str], cwd: Path, env: dict[str, str], code: str = LAUNCH) -> subprocess.Popen:
    """``python -c code *args`` in ``cwd``, its output to cwd/output.txt (``code``: the nalasr CLI by default)."""
    cwd.mkdir(parents=True, exist_ok=True)
    log = open(cwd / "output.txt", "w")
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env=env, stdout=log, stderr=log,
                            start_new_session=True)


def two_rank_env() -> dict[str, str]:
    """The environment of a 2-process CPU run, less each process's MASTER_PORT, RANK and LOCAL_RANK."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    return env | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
                  "MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "2"}


def finish(procs: list[subprocess.Popen]) -> list[int]:
    try:
        return [p.wait(timeout=TIMEOUT_S) for p in procs]
    finally:
        for p in procs:  # a hung collective must not outlive the test
            if p.poll() is None:
                p.kill()
                p.wait()


def write_images(folder: Path, n: int) -> Path:
    """``n`` small training images (40×48) in a new ``folder``."""
    folder.mkdir()
    for i in range(n):
        Image.fromarray(smooth_image(40, 48, i)).save(folder / f"{i}.png")
    return folder


def losses(run: Path) -> dict[int, float]:
    recs = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in recs if "step" in r]
    assert steps == sorted(set(steps)), "a step logged twice: more than one process wrote the log"
    return {r["step"]: r["loss"] for r in recs if "step" in r}


def test_two_gloo_processes_match_one_process(tmp_path):
    data = write_images(tmp_path / "data", 4)
    cfg = tmp_path / "cfg.toml"
    # two scales: each step leaves one upsampler without gradients, which DDP must be told about
    cfg.write_text(to_toml({
        "scales": [2, 3], "data": [str(data)], "model_overrides": TINY, "steps": STEPS, "batch": 4, "patch": 6,
        "warmup": 2, "ema": 0.9, "ckpt_every": 4, "log_every": 1, "val_set": "", "device": "cpu", "seed": 1,
        "loss_fft": 0.05,
    }))
    args = ["train", "--config", str(cfg), "--out", "run"]
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    base |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}

    port = str(free_port())
    torchrun = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2"}
    ranks = [launch(args, tmp_path / f"rank{r}", base | torchrun | {"RANK": str(r), "LOCAL_RANK": str(r)})
             for r in range(2)]
    single = launch(args, tmp_path / "single", base)
    codes = finish([*ranks, single])
    outputs = {d: (tmp_path / d / "output.txt").read_text()[-3000:] for d in ("rank0", "rank1", "single")}
    assert codes == [0, 0, 0], outputs

    # only rank 0 wrote: rank 1's working directory holds nothing but its console output
    assert sorted(p.name for p in (tmp_path / "rank1").iterdir()) == ["output.txt"]
    ddp_run, one_run = tmp_path / "rank0" / "run", tmp_path / "single" / "run"
    assert sorted(p.name for p in ddp_run.iterdir()) == sorted(p.name for p in one_run.iterdir())

    # the loss curve of the global batch (all-reduced over the ranks) matches one process's
    ddp, one = losses(ddp_run), losses(one_run)
    assert list(ddp) == list(one) == list(range(1, STEPS + 1))
    rel = max(abs(ddp[s] - one[s]) / abs(one[s]) for s in one)
    assert rel <= RTOL, (rel, ddp, one)

    # and so do the weights: same data order, gradients averaged over the ranks
    assert [s for s, _ in list_checkpoints(ddp_run / "checkpoints")] == [4, 8]
    a, b = (load_checkpoint(r / "checkpoints" / f"ckpt_{STEPS:08d}.pt") for r in (ddp_run, one_run))
    assert a["step"] == b["step"] == STEPS
    assert torch.equal(a["sampler"]["generator"], b["sampler"]["generator"])
    for key in ("model", "ema"):
        for name, t in a[key].items():
            torch.testing.assert_close(t, b[key][name], rtol=1e-4, atol=1e-6, msg=f"{key}.{name}")
    print(f"max relative loss difference over {STEPS} steps: {rel:.2e}")


def test_batch_must_split_over_processes(tmp_path):
    """A global batch that does not divide by the world size is refused, on every rank, with one line."""
    data = write_images(tmp_path / "data", 1)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(to_toml({"scales": [2], "data": [str(data)], "model_overrides": TINY, "steps": 2, "batch": 3,
                            "patch": 6, "val_set": "", "device": "cpu"}))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": ""}
    procs = [launch(["train", "--config", str(cfg), "--out", "run"], tmp_path / f"rank{r}",
                    env | {"RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(2)]
    assert finish(procs) == [2, 2]
    for r in range(2):
        text = (tmp_path / f"rank{r}" / "output.txt").read_text()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        assert len(lines) == 1 and "does not split over 2 processes" in lines[0], text


def test_ddp_resume_is_exact(tmp_path):
    """Both ranks resume from rank 0's checkpoint and continue as if never stopped (log mean included)."""
    data = write_images(tmp_path / "data", 3)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(to_toml({
        "scales": [2, 3], "data": [str(data)], "model_overrides": TINY, "steps": 8, "batch": 4, "patch": 6,
        "warmup": 2, "ema": 0.9, "ckpt_every": 1, "keep_last": 20, "log_every": 3, "val_set": "", "device": "cpu",
    }))
    base = two_rank_env()

    def ddp(out: Path, *extra: str) -> None:
        port = str(free_port())
        procs = [launch(["train", "--config", str(cfg), "--out", str(out), *extra], tmp_path / f"{out.name}{r}",
                        base | {"MASTER_PORT": port, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(2)]
        assert finish(procs) == [0, 0], [(tmp_path / f"{out.name}{r}" / "output.txt").read_text()[-2000:]
                                         for r in range(2)]

    a, b = tmp_path / "a", tmp_path / "b"
    ddp(a)
    # "killed" after step 5's checkpoint, between the log lines of steps 3 and 6
    shutil.copytree(a, b)
    for step, path in list_checkpoints(b / "checkpoints"):
        if step > 5:
            path.unlink()
    ddp(b, "--resume")
    assert losses(b) == losses(a) and list(losses(a)) == [3, 6, 8]
    x, y = (load_checkpoint(r / "checkpoints" / "ckpt_00000008.pt") for r in (a, b))
    for key in ("model", "ema"):
        for name, t in x[key].items():
            assert torch.equal(t, y[key][name]), f"{key}.{name}"


SYNC_PROBE = """
import sys, types
import torch, torch.distributed as dist
from nalasr.errors import NalasrError
from nalasr.train.loop import Dist, Trainer
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
if rank == 1 and sys.argv[1] == "drift":
    with torch.no_grad():
        model[1].bias[0] += 1e-6  # one weight, one ulp-sized step: the fingerprint must still see it
try:
    Trainer._check_in_sync(types.SimpleNamespace(model=model, dist=Dist(rank, 2, rank), step=7))
    print("in sync")
except NalasrError as e:
    print(e)
dist.destroy_process_group()
"""


def test_check_in_sync_catches_a_drifted_rank(tmp_path):
    """The trainer's checkpoint-time check: equal weights pass on both ranks, one changed weight fails on both."""
    for case in ("same", "drift"):
        port = str(free_port())
        procs = [launch([case], tmp_path / f"{case}{r}", two_rank_env() | {
            "MASTER_PORT": port, "RANK": str(r), "LOCAL_RANK": str(r)}, code=SYNC_PROBE) for r in range(2)]
        finish(procs)
        outs = [(tmp_path / f"{case}{r}" / "output.txt").read_text().strip() for r in range(2)]
        if case == "same":
            assert outs == ["in sync", "in sync"], outs
        else:
            assert all("weights differ at step 7" in o for o in outs), outs
