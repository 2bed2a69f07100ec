"""Where the worker listens, how it and a command talk, and which commands it may serve (standard library only).

The socket is a Unix socket in a folder only its user can enter (``$XDG_RUNTIME_DIR/nalasr/``, else
``/tmp/nalasr-UID/``): the worker runs every job with its user's rights, so no one else may reach it.
Messages are JSON objects, one per line. A command asks with ``{"op": "upscale", "identity": ..., ...}``; the
worker answers with events (``start``, ``item``, ``warning``) and one last message (``done``, ``interrupted`` or
``error``). A worker serves only commands of its own identity (:func:`identity`): the same Python, the same
nalasr code (its files' sizes and times) and the same job-affecting settings; anything else runs in its own
process, so a worker left from an older checkout can never write what the new code would not.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from .. import __version__, settings
from ..errors import NalasrError

PROTOCOL = 1


class WorkerError(NalasrError):
    """The worker could not be reached, started or stopped, or stopped in the middle of a job (exit 1)."""


def available() -> bool:
    return hasattr(socket, "AF_UNIX") and hasattr(os, "getuid")


def socket_path() -> Path:
    base = settings.get().runtime_dir
    folder = base / "nalasr" if base is not None else Path(tempfile.gettempdir()) / f"nalasr-{os.getuid()}"
    return folder / "worker.sock"


def private_folder(path: Path, create: bool) -> bool:
    """The socket's folder exists (made when ``create``), belongs to this user and admits no one else.

    WorkerError for a folder someone else owns or can enter: a socket there could be another user's."""
    folder = path.parent
    if create:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise WorkerError(f"{folder}: the worker's folder must be a folder of yours that only you can enter "
                          f"(mode 700); remove it or fix its mode")
    return True


def identity() -> dict[str, Any]:
    """Who may be served by whom: the Python, the nalasr code and the settings that change a job."""
    python = f"{os.path.realpath(sys.executable)} ({sys.prefix})"  # the interpreter and its environment (venv)
    return {"protocol": PROTOCOL, "version": __version__, "python": python, "code": code_digest(),
            "settings": settings.get().job_affecting()}


def code_digest() -> str:
    """A digest of the names, sizes and modification times of nalasr's and nalasr_kernels' Python files."""
    roots = [Path(__file__).resolve().parents[1]]
    spec = importlib.util.find_spec("nalasr_kernels")  # found without importing it (it would import triton)
    if spec is not None and spec.submodule_search_locations:
        roots += [Path(p) for p in spec.submodule_search_locations]
    h = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def connect(path: Path | None = None, timeout: float | None = 5.0) -> socket.socket | None:
    """A connection to the worker, or None when none listens there."""
    if not available():
        return None
    path = path or socket_path()
    try:
        if not private_folder(path, create=False) or not path.is_socket():
            return None
    except WorkerError:  # a folder others can enter: never trusted (`nalasr worker start` says why)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:  # refused (a socket left by a killed worker) or gone in between
        sock.close()
        return None
    sock.settimeout(None)
    return sock


def send(stream: IO[bytes], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    stream.flush()


def receive(stream: IO[bytes]) -> dict[str, Any] | None:
    """The next message; None at the end of the stream."""
    line = stream.readline()
    if not line:
        return None
    message = json.loads(line)
    if not isinstance(message, dict):
        raise WorkerError("the worker sent something that is not a message; restart it: nalasr worker stop")
    return message
