"""The command's side: hand a job to a running worker, start one, ask how it is, stop it (no torch here)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import NalasrError, Terminated
from . import protocol
from .protocol import WorkerError


class Refused(Exception):
    """The worker is up but will not serve this command (another build or other settings); the reason is the
    message. The command then runs the job itself."""


def status(path: Path | None = None) -> dict[str, Any] | None:
    """The worker's state (pid, device, jobs served, networks loaded, ...), or None when none is running."""
    return _ask("status", path)[1]


def stop(path: Path | None = None, wait_s: float = 30.0) -> dict[str, Any] | None:
    """Ask the worker to exit after the job it runs (if any); its last status, or None when none was running."""
    running, last = _ask("stop", path)
    if not running:
        return None
    deadline = time.monotonic() + wait_s
    while (probe := protocol.connect(path)) is not None:  # until the socket is gone
        probe.close()
        if time.monotonic() > deadline:
            raise WorkerError(f"the worker (pid {last and last.get('pid')}) did not stop in {wait_s:.0f} s; "
                              "kill it, or wait for its job to end")
        time.sleep(0.05)
    return last


def start(args: list[str], log: Path, wait_s: float = 300.0, path: Path | None = None) -> dict[str, Any]:
    """Start ``nalasr worker run ARGS`` in the background (its own session: it outlives this command and a
    Ctrl-C here), its output to ``log``; wait until it answers and return its status."""
    if not protocol.available():
        raise WorkerError("nalasr worker needs Unix sockets, which this system lacks; run commands without it")
    running = status(path)
    if running is not None:
        raise WorkerError(f"a worker is already running (pid {running.get('pid')}); stop it first: nalasr worker stop")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as sink:
        child = subprocess.Popen([sys.executable, "-m", "nalasr", "worker", "run", *args], stdin=subprocess.DEVNULL,
                                 stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise WorkerError(f"the worker exited with code {child.returncode} while starting: "
                              f"{tail[0] if tail else 'no output'} (log: {log})")
        found = status(path)
        if found is not None and found.get("pid") == child.pid and found.get("ready"):
            return found
        time.sleep(0.1)
    raise WorkerError(f"the worker (pid {child.pid}) did not get ready in {wait_s:.0f} s; see {log}")


def run_upscale(
    options: dict[str, Any],
    on_event: Callable[[dict[str, Any]], None],
    path: Path | None = None,
) -> dict[str, Any] | None:
    """Hand an upscale job to the worker; None when no worker is running (the caller runs it itself).

    ``options`` are :func:`nalasr.inference.batch.upscale_paths`'s keyword arguments (JSON values); the paths in
    them are the command's, resolved by the worker in the command's folder. ``on_event`` hears ``start``, ``item``
    and ``warning`` as they happen. Returns the ``done`` message (its ``report``). An ``interrupted`` answer
    raises KeyboardInterrupt (Terminated for a SIGTERM here or there) carrying the report dict as ``e.report_dict``; an ``error`` answer raises the
    NalasrError it names. Ctrl-C here asks the worker to stop the job (it finishes the files in flight) and
    waits for its answer. Raises :class:`Refused` when the worker will not serve this command.
    """
    sock = protocol.connect(path)
    if sock is None:
        return None
    request = {"op": "upscale", "identity": protocol.identity(), "cwd": os.getcwd(), "umask": _umask(),
               "options": options}
    with sock, sock.makefile("rwb") as stream:
        protocol.send(stream, request)
        cancelled = terminated = False
        while True:
            try:
                message = protocol.receive(stream)
            except KeyboardInterrupt as e:
                if cancelled:
                    raise
                cancelled = True  # a second Ctrl-C leaves at once; the worker still finishes its files
                terminated = isinstance(e, Terminated)
                protocol.send(stream, {"op": "cancel"})
                continue
            if message is None:
                raise WorkerError("the worker stopped in the middle of the job; what it finished is written: run "
                                  "the same command with --skip-existing to do the rest (nalasr worker status)")
            kind = message.get("event")
            if kind == "refused":
                raise Refused(message.get("reason", "refused"))
            if kind == "done":
                return message
            if kind == "interrupted":
                stop = Terminated() if terminated or message.get("terminated") else KeyboardInterrupt()
                stop.report_dict = message["report"]  # type: ignore[attr-defined]
                raise stop
            if kind == "error":
                error = NalasrError(message.get("message", "the worker failed"))
                error.exit_code = int(message.get("exit_code", 1))
                raise error
            on_event(message)


def _ask(op: str, path: Path | None) -> tuple[bool, dict[str, Any] | None]:
    """(a worker was listening, its answer to one request; None if it closed without one)."""
    sock = protocol.connect(path)
    if sock is None:
        return False, None
    with sock, sock.makefile("rwb") as stream:
        protocol.send(stream, {"op": op})
        return True, protocol.receive(stream)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
