"""The worker: one process that keeps networks loaded (:class:`nalasr.inference.warm.ModelCache`) and runs the
upscale jobs commands hand it, one at a time, in the order they come.

Each job runs :func:`nalasr.inference.batch.upscale_paths` in the main thread, in the command's folder and with
its umask, so paths, globs and the files written are those the command would have made itself. A command's
Ctrl-C (a ``cancel`` message) or its going away interrupts the job as Ctrl-C does in a command: the files in
flight are finished and the report says what was done. The worker exits on ``nalasr worker stop``, after
``idle_s`` seconds without a job, on Ctrl-C or SIGTERM (the job in hand is stopped the same way first), and
when its code changes on disk (the next command would be refused by it anyway).
"""

from __future__ import annotations

import _thread
import os
import queue
import signal
import socket
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import NalasrError, Terminated
from . import protocol
from .protocol import WorkerError

POLL_S = 0.5  # how often the idle clock and the code on disk are looked at between jobs


@dataclass
class WorkerState:
    device: str
    idle_s: float
    started: float = field(default_factory=time.time)
    identity: dict[str, Any] = field(default_factory=protocol.identity)
    jobs: int = 0
    images: int = 0
    busy_since: float | None = None
    last_job: float = field(default_factory=time.monotonic)
    ready: bool = False
    stopping: bool = False
    cancel: _Cancel | None = None  # the latest job's


class _Cancel:
    """A command's request to stop its job, turned into a KeyboardInterrupt in the main thread (where the job
    runs) by :func:`_on_sigint`. Only while the job runs: one that arrives after it is dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.armed = False  # the job is running
        self.requested = False  # the command asked (or went away)
        self.consumed = False  # the main thread has seen it

    def fire(self) -> None:
        with self._lock:
            if self.armed and not self.requested:
                self.requested = True
                _thread.interrupt_main(signal.SIGINT)

    def disarm(self) -> None:
        with self._lock:
            self.armed = False


def serve(device: str = "auto", idle_s: float = 900.0, warm: tuple[int, ...] = (4,), variant: str | None = None,
          path: Path | None = None) -> None:
    """Listen on the worker's socket until stopped (see the module). ``warm``: scales whose network is loaded,
    and run once at a small size (kernels loaded, CUDA started) before the worker says it is ready."""
    from ..inference.warm import ModelCache  # torch: the worker's side only

    path = path or protocol.socket_path()
    if not protocol.available():
        raise WorkerError("nalasr worker needs Unix sockets, which this system lacks")
    protocol.private_folder(path, create=True)
    if protocol.connect(path) is not None:
        raise WorkerError(f"a worker is already listening on {path}; stop it first: nalasr worker stop")
    with suppress(FileNotFoundError):
        path.unlink()  # a socket a killed worker left: nothing listens on it (just checked)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    state = WorkerState(device, idle_s)
    try:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(8)  # a command that comes while the networks warm up waits for them
        listener.settimeout(POLL_S)
        cache = ModelCache()
        _warm_up(cache, device, warm, variant)
        state.ready = True
        print(f"nalasr worker pid {os.getpid()} ready on {path} ({device}, exits after {idle_s:.0f} s idle)",
              flush=True)
        previous = signal.signal(signal.SIGINT, lambda signum, frame: _on_sigint(state))
        try:
            _loop(listener, state, cache)
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        listener.close()
        with suppress(FileNotFoundError):
            if path.is_socket():
                path.unlink()
        print(f"nalasr worker pid {os.getpid()} stopped after {state.jobs} job(s), {state.images} image(s)",
              flush=True)


def _on_sigint(state: WorkerState) -> None:
    """SIGINT in the main thread: a command's cancel (raised into its job, dropped if the job has ended) or the
    worker's own Ctrl-C (raised: the worker stops)."""
    c = state.cancel
    if c is not None and c.requested and not c.consumed:
        c.consumed = True
        if c.armed:
            raise KeyboardInterrupt
        return
    raise KeyboardInterrupt


def _loop(listener: socket.socket, state: WorkerState, cache: Any) -> None:
    """Jobs in the main thread, in the order they came; :func:`_accept` answers everything else meanwhile."""
    jobs: queue.Queue[tuple[socket.socket, IO[bytes], dict[str, Any]]] = queue.Queue()
    threading.Thread(target=_accept, args=(listener, state, cache, jobs), daemon=True, name="nalasr-worker-accept"
                     ).start()
    try:
        while not state.stopping:
            try:
                conn, stream, request = jobs.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() - state.last_job > state.idle_s and jobs.empty():
                    print(f"idle for {state.idle_s:.0f} s: exiting", flush=True)
                    return
                if protocol.code_digest() != state.identity["code"]:
                    print("nalasr's code changed on disk: exiting (a new worker serves the new code)", flush=True)
                    return
                continue
            try:
                _job(request, stream, state, cache)
            except (OSError, ValueError) as e:  # the command went away, or sent something unreadable
                print(f"a job's connection ended badly: {type(e).__name__}: {e}", flush=True)
            finally:
                _close(conn, stream)
    finally:
        state.stopping = True
        while not jobs.empty():  # commands still waiting run their jobs themselves
            conn, stream, _ = jobs.get()
            with suppress(OSError, ValueError):
                protocol.send(stream, {"event": "refused", "reason": "the worker is stopping"})
            _close(conn, stream)


def _accept(listener: socket.socket, state: WorkerState, cache: Any, jobs: queue.Queue) -> None:
    """Take connections: status and stop are answered at once, upscale jobs queued for the main thread."""
    while not state.stopping:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:  # the listener closed: the worker is exiting
            return
        stream = conn.makefile("rwb")
        try:
            conn.settimeout(10.0)  # a connection that says nothing must not hold up the others
            request = protocol.receive(stream)
            conn.settimeout(None)
            if request is not None and _answer(request, stream, state, cache):
                jobs.put((conn, stream, request))
                continue
        except (OSError, ValueError) as e:
            print(f"a connection ended badly: {type(e).__name__}: {e}", flush=True)
        _close(conn, stream)


def _answer(request: dict[str, Any], stream: IO[bytes], state: WorkerState, cache: Any) -> bool:
    """Answer ``request``; True when it is a job to queue."""
    op = request.get("op")
    if op == "status":
        protocol.send(stream, _status(state, cache))
    elif op == "stop":
        state.stopping = True
        protocol.send(stream, _status(state, cache))
    elif op == "upscale":
        theirs = request.get("identity")
        reason = _refusal(theirs, state) or ("the worker is stopping" if state.stopping else "")
        if not reason:
            return True
        protocol.send(stream, {"event": "refused", "reason": reason})
        if isinstance(theirs, dict) and theirs.get("code") != state.identity["code"]:
            state.stopping = True  # a command of newer code: this worker is stale, make way for a new one
    else:
        protocol.send(stream, {"event": "error", "message": f"unknown request {op!r}", "exit_code": 1})
    return False


def _close(conn: socket.socket, stream: IO[bytes]) -> None:
    with suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)  # wakes a job's watcher thread, blocked reading
    with suppress(OSError, ValueError):
        stream.close()  # flushing into a closed connection raises: the command is gone, nothing to tell
    conn.close()


def _refusal(theirs: Any, state: WorkerState) -> str:
    mine = state.identity
    if not isinstance(theirs, dict):
        return "the command sent no identity"
    for key, what in (("protocol", "protocol"), ("version", "nalasr version"), ("python", "Python"),
                      ("code", "nalasr code"), ("settings", "NALASR_* / CUDA_VISIBLE_DEVICES settings")):
        if theirs.get(key) != mine.get(key):
            return f"the worker was started with another {what}"
    return ""


def _job(request: dict[str, Any], stream: IO[bytes], state: WorkerState, cache: Any) -> None:
    """Run one upscale job for the command at the other end of ``stream``, sending its events."""
    from ..inference.batch import upscale_paths
    from ..inference.runtime import set_threads

    lock = threading.Lock()  # items are reported from the pipeline's threads
    gone = threading.Event()
    cancel = state.cancel = _Cancel()

    def tell(message: dict[str, Any]) -> None:
        if gone.is_set():
            return
        try:
            with lock:
                protocol.send(stream, message)
        except OSError:  # the command is gone: stop the job as its Ctrl-C would have
            gone.set()
            cancel.fire()

    options = dict(request["options"])
    threads = options.pop("threads", None)
    here, mask = os.getcwd(), os.umask(int(request.get("umask", 0o022)))
    state.busy_since = time.time()
    watcher = threading.Thread(target=_watch, args=(stream, cancel), daemon=True, name="nalasr-worker-watch")
    def finished(report: Any, **message: Any) -> None:
        report.process = f"worker pid {os.getpid()}"
        state.images += report.count("ok")
        tell({**message, "report": report.to_dict()})

    try:
        os.chdir(request["cwd"])
        if threads:
            set_threads(int(threads))
        cancel.armed = True
        watcher.start()
        try:
            report = upscale_paths(
                **options, cache=cache,
                on_start=lambda n: tell({"event": "start", "n": n}),
                on_item=lambda item: tell({"event": "item", "item": item.to_dict()}),
                on_warning=lambda text: tell({"event": "warning", "text": text}),
            )
        finally:
            cancel.disarm()  # before anything is sent: a cancel from now on has no job to stop
        finished(report, event="done")
    except KeyboardInterrupt as e:
        report = getattr(e, "report", None)
        if report is not None:
            finished(report, event="interrupted", terminated=isinstance(e, Terminated))
        else:
            tell({"event": "error", "message": "interrupted before the job started", "exit_code": 130})
        if isinstance(e, Terminated) or not cancel.requested:  # the worker's own Ctrl-C or SIGTERM: it stops
            raise
    except NalasrError as e:
        tell({"event": "error", "message": str(e), "exit_code": e.exit_code})
    except Exception as e:  # a bug: the command hears it in one line, the worker's log keeps the traceback
        import traceback

        traceback.print_exc()
        tell({"event": "error", "message": f"the worker failed: {type(e).__name__}: {e} (nalasr worker status)",
              "exit_code": 1})
    finally:
        cancel.disarm()  # the job may have failed before it started (chdir, threads)
        os.chdir(here)
        os.umask(mask)
        state.jobs += 1
        state.busy_since = None
        state.last_job = time.monotonic()


def _watch(stream: IO[bytes], cancel: _Cancel) -> None:
    """Wait for the command's ``cancel`` or its hanging up (the job's events go the other way meanwhile)."""
    with suppress(OSError, ValueError):
        while True:
            message = protocol.receive(stream)
            if message is None or message.get("op") == "cancel":
                cancel.fire()
                return


def _status(state: WorkerState, cache: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "pid": os.getpid(), "ready": state.ready, "device": state.device, "started": state.started,
        "uptime_s": round(time.time() - state.started, 1), "idle_exit_s": state.idle_s, "jobs": state.jobs,
        "images": state.images, "busy_s": None if state.busy_since is None else round(time.time() - state.busy_since, 1),
        "networks": cache.describe(), "stopping": state.stopping, "version": state.identity["version"],
    }
    import torch

    if torch.cuda.is_initialized():
        info["cuda_reserved_bytes"] = sum(torch.cuda.memory_reserved(i) for i in range(torch.cuda.device_count()))
    return info


def _warm_up(cache: Any, device: str, scales: tuple[int, ...], variant: str | None) -> None:
    """Load the networks of ``scales`` and run each once at 64×64 (first use of the kernels, CUDA, cuDNN)."""
    import torch

    from ..inference import pipeline  # noqa: F401 (the job's modules, imported before the first job)
    from ..inference.batch import ModelChoice, resolve_devices
    from ..inference.infer import run_model
    from ..inference.runtime import resolve_dtype

    dev = resolve_devices(device)[0]
    dtype = resolve_dtype("auto", dev)
    for scale in scales:
        net = cache.get(ModelChoice(scale, variant, None, "auto", "auto", False), dev)
        run_model(net, torch.rand(1, 3, 64, 64), dtype)
