"""The resident worker (nalasr.worker): a command it serves writes what the command alone would, says what it
would, and exits as it would; a command it must not serve runs by itself; the worker survives its commands'
Ctrl-C and hang-ups and goes away when stopped or idle. Real processes on the CPU, the small x2 network."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from importprofile import imported_packages
from PIL import Image

from nalasr.inference.jobs import BatchReport, ItemResult
from nalasr.worker import protocol
from nalasr.worker.server import WorkerState, _refusal

pytestmark = pytest.mark.skipif(not protocol.available(), reason="the worker needs Unix sockets")


def _images(folder: Path, n: int, size: int = 24) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = np.random.default_rng(i)
        Image.fromarray((rng.random((size, size + 8, 3)) * 255).astype(np.uint8)).save(folder / f"p{i:02d}.png")
    return folder


def _nalasr(args: list[str], env: dict, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nalasr", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300, **kw)


@pytest.fixture
def env(tmp_path: Path) -> dict:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    return {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "COLUMNS": "200"}


@pytest.fixture
def worker(env: dict, tmp_path: Path):
    started = _nalasr(["worker", "start", "--device", "cpu", "--variant", "small", "-s", "2", "--idle-minutes", "5"],
                      env, tmp_path)
    assert started.returncode == 0, started.stderr
    info = json.loads(_nalasr(["worker", "status", "--json"], env, tmp_path).stdout)
    yield info
    _nalasr(["worker", "stop"], env, tmp_path)
    with pytest.raises(ProcessLookupError):  # stop waits until the socket is gone; the process follows
        for _ in range(100):
            os.kill(info["pid"], 0)
            time.sleep(0.05)
        os.kill(info["pid"], signal.SIGKILL)
        raise AssertionError("the worker did not exit after stop")


def _status(env: dict, cwd: Path) -> dict | None:
    run = _nalasr(["worker", "status", "--json"], env, cwd)
    return json.loads(run.stdout) if run.returncode == 0 else None


def test_served_job_writes_the_same_files_and_report(worker, env, tmp_path):
    imgs = _images(tmp_path / "imgs", 3)
    common = ["upscale", "imgs", "--scale", "2", "--variant", "small", "--json"]
    served = _nalasr([*common, "-o", "a"], env, tmp_path)
    alone = _nalasr([*common, "-o", "b", "--no-worker"], env, tmp_path)
    assert served.returncode == alone.returncode == 0, served.stderr + alone.stderr
    rep_s, rep_a = json.loads(served.stdout), json.loads(alone.stdout)
    assert rep_s["process"] == f"worker pid {worker['pid']}" and rep_a["process"] is None
    assert [i["output"] for i in rep_s["items"]] == [f"a/p{i:02d}_x2.png" for i in range(3)]
    for i in range(3):
        assert (tmp_path / "a" / f"p{i:02d}_x2.png").read_bytes() == (tmp_path / "b" / f"p{i:02d}_x2.png").read_bytes()
    assert sorted(p.name for p in imgs.iterdir()) == [f"p{i:02d}.png" for i in range(3)]  # inputs untouched
    assert _status(env, tmp_path)["images"] == 3


def test_served_command_imports_no_decoder_torch_or_pydantic(worker, env, tmp_path):
    """A command the worker serves lists its inputs and prints the report without numpy, OpenCV, Pillow, torch or
    pydantic: the decoders were a third of a served command's own time (0.50 -> 0.35 s on a 2-core CPU) and
    typer 0.29's pydantic adapters 30% of what was left (0.27 -> 0.19 s; benchmarks/results/cli_startup.md)."""
    _images(tmp_path / "imgs", 2)
    run = _nalasr(["upscale", "imgs", "-o", "o", "--scale", "2", "--variant", "small", "--json"],
                  {**env, "PYTHONPROFILEIMPORTTIME": "1"}, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["process"] == f"worker pid {worker['pid']}"
    names = imported_packages(run.stderr)
    assert "nalasr" in names and "typer" in names, sorted(names)  # the import profile was written
    heavy = {"numpy", "cv2", "PIL", "torch", "pydantic"}  # pydantic: typer 0.29's option parsing, 30% of the rest
    assert not names & heavy, sorted(names & heavy)


def test_paths_and_globs_are_the_commands(worker, env, tmp_path):
    """Relative paths and globs are resolved in the command's folder, not the worker's."""
    imgs = _images(tmp_path / "deep" / "imgs", 2)
    run = _nalasr(["upscale", "p*.png", "-o", "out", "--scale", "2", "--variant", "small", "--json"], env, imgs)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["process"].startswith("worker pid")
    assert sorted(p.name for p in (imgs / "out").iterdir()) == ["p00_x2.png", "p01_x2.png"]


@pytest.mark.parametrize("args", [["missing.png"], ["imgs", "-o", "imgs/p00.png"], ["imgs", "--weights", "nope.safetensors"]])
def test_errors_and_exit_codes_match_a_command_alone(worker, env, tmp_path, args):
    _images(tmp_path / "imgs", 2)
    common = ["upscale", *args, "--scale", "2"] + ([] if "--weights" in args else ["--variant", "small"])
    served = _nalasr(common, env, tmp_path)
    alone = _nalasr([*common, "--no-worker"], env, tmp_path)
    assert served.returncode == alone.returncode != 0
    last = [line for line in served.stderr.splitlines() if line.strip()][-1]
    assert last == [line for line in alone.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error:")


def test_other_settings_run_in_the_command(worker, env, tmp_path):
    _images(tmp_path / "imgs", 1)
    run = _nalasr(["upscale", "imgs", "-o", "o", "--scale", "2", "--variant", "small", "--json"],
                  {**env, "NALASR_CUDA_GRAPHS": "0"}, tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["process"] is None
    assert "does not serve this command" in run.stderr and "settings" in run.stderr
    assert _status(env, tmp_path)["jobs"] == 0


def test_command_hanging_up_stops_its_job_not_the_worker(worker, env, tmp_path):
    _images(tmp_path / "imgs", 40, size=64)
    identity = _identity(env, tmp_path)
    sock = protocol.connect(Path(env["XDG_RUNTIME_DIR"]) / "nalasr" / "worker.sock")
    assert sock is not None
    with sock, sock.makefile("rwb") as stream:
        options = {"inputs": ["imgs"], "output": "o", "scale": 2, "variant": "small"}
        protocol.send(stream, {"op": "upscale", "identity": identity, "cwd": str(tmp_path), "umask": 0o022,
                               "options": options})
        first = protocol.receive(stream)
        assert first is not None and first["event"] in ("start", "warning", "item")
    for _ in range(200):  # the job is cut short and the worker is free again
        info = _status(env, tmp_path)
        if info and info["jobs"] == 1 and info["busy_s"] is None:
            break
        time.sleep(0.05)
    assert info["jobs"] == 1 and info["images"] < 40
    out = tmp_path / "o"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp file left behind
    again = _nalasr(["upscale", "imgs/p00.png", "-o", "o2", "--scale", "2", "--variant", "small", "--json"], env, tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["process"].startswith("worker pid")


def _identity(env: dict, cwd: Path) -> dict:
    """The identity a command run with ``env`` sends."""
    code = "import json; from nalasr.worker import protocol; print(json.dumps(protocol.identity()))"
    return json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                                     check=True).stdout)


def test_ctrl_c_in_the_command_finishes_files_and_reports(worker, env, tmp_path):
    _images(tmp_path / "imgs", 60, size=64)
    cmd = subprocess.Popen([sys.executable, "-m", "nalasr", "upscale", "imgs", "-o", "o", "--scale", "2",
                            "--variant", "small"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    out = tmp_path / "o"
    for _ in range(600):
        if out.is_dir() and any(p.suffix == ".png" for p in out.iterdir()):
            break
        time.sleep(0.02)
    cmd.send_signal(signal.SIGINT)
    stdout, stderr = cmd.communicate(timeout=120)
    assert cmd.returncode == 130, stderr
    written = sorted(p for p in out.iterdir() if p.suffix == ".png")
    assert 0 < len(written) < 60
    assert f"interrupted: {len(written)} of 60 written" in stderr
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    for p in written:  # every file that is there is whole
        Image.open(p).load()
    assert _status(env, tmp_path)["busy_s"] is None


def test_idle_worker_exits_and_stop_without_worker(env, tmp_path):
    started = _nalasr(["worker", "start", "--device", "cpu", "--variant", "small", "-s", "2",
                       "--idle-minutes", "0.05"], env, tmp_path)
    assert started.returncode == 0, started.stderr
    for _ in range(300):
        if _status(env, tmp_path) is None:
            break
        time.sleep(0.05)
    assert _status(env, tmp_path) is None
    assert not (Path(env["XDG_RUNTIME_DIR"]) / "nalasr" / "worker.sock").exists()
    stop = _nalasr(["worker", "stop"], env, tmp_path)
    assert stop.returncode == 0 and "no worker was running" in stop.stderr


def test_a_folder_others_can_enter_is_refused(env, tmp_path):
    folder = Path(env["XDG_RUNTIME_DIR"]) / "nalasr"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    run = _nalasr(["worker", "start", "--device", "cpu"], env, tmp_path)
    assert run.returncode == 1 and "mode 700" in run.stderr


def test_a_dead_workers_socket_is_not_a_worker(env, tmp_path):
    folder = Path(env["XDG_RUNTIME_DIR"]) / "nalasr"
    folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(folder / "worker.sock"))
    stale.close()  # bound, never listening: what a killed worker leaves
    _images(tmp_path / "imgs", 1)
    run = _nalasr(["upscale", "imgs", "-o", "o", "--scale", "2", "--variant", "small", "--json"], env, tmp_path)
    assert run.returncode == 0 and json.loads(run.stdout)["process"] is None


def test_refusal_names_what_differs():
    state = WorkerState("cpu", 60.0)
    mine = dict(state.identity)
    assert _refusal(mine, state) == ""
    assert "Python" in _refusal({**mine, "python": "/other/python"}, state)
    assert "settings" in _refusal({**mine, "settings": {**mine["settings"], "reference": "True"}}, state)
    assert _refusal(None, state) == "the command sent no identity"


def test_reports_read_back_from_json():
    item = ItemResult("a.png", "a_x2.png", "ok", input_size=(3, 2), output_size=(6, 4), read_ms=1.5, notes=["n"])
    report = BatchReport(2, "cpu", "fp32", "w", items=[item, ItemResult("b.png", error="bad", exit_code=2)],
                         wall_s=0.5, warnings=["w1"], process="worker pid 1")
    back = BatchReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert back == report
    assert back.exit_code() == 1 and back.images_per_s == report.images_per_s
