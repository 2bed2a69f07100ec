"""Atomic file writes: a reader never sees a half-written output, and a crash leaves the old file intact.

The temporary file sits beside the target and is named as this tool's, with the host and process that made it:
``.{stem}.nalasr-{pid}-{host}-{random}.tmp{suffix}``. A process killed while writing (SIGKILL, or SIGTERM
during the fsync) leaves it behind; :func:`remove_stale_temps` deletes such files once their writer is gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# A temp whose writer cannot be checked (another host on a shared filesystem, a pid that may have been reused)
# is removed only when it is older than this: no write of one output takes a day.
STALE_TEMP_AGE_S = 24 * 3600.0
_NAME_MAX = 255  # bytes in one file name on Linux/macOS filesystems


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it; done once, at import
    os.umask(mask)
    return mask


def _host_tag() -> str:
    """8 hex digits naming this host (and PID namespace), so a pid is only judged where it belongs.

    Containers on one machine can share a hostname and a mounted folder but not their pids: the PID
    namespace (Linux) is part of the tag, so another container's live writer never looks dead here.
    """
    ident = socket.gethostname()
    with contextlib.suppress(OSError):
        ident += "\0" + os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    return hashlib.sha1(ident.encode("utf-8", "surrogateescape")).hexdigest()[:8]


_UMASK = _read_umask()
_HOST = _host_tag()
# mkstemp's random part: 8 characters of [a-z0-9_]. The suffix is the target's (may be empty).
_TEMP_NAME = re.compile(
    r"^\.(?P<stem>.*)\.nalasr-(?P<pid>[1-9][0-9]{0,9})-(?P<host>[0-9a-f]{8})-[a-z0-9_]{8}\.tmp(?P<suffix>\.[^.]*)?$",
    re.DOTALL,
)


def temp_prefix(path: Path) -> str:
    """The start of this process's temp-file names for ``path`` (the stem shortened if the name would not fit)."""
    tail = f".nalasr-{os.getpid()}-{_HOST}-"
    rest = len(os.fsencode(tail)) + 8 + len(os.fsencode(f".tmp{path.suffix}")) + 1  # + random part + leading "."
    stem = path.stem
    while stem and len(os.fsencode(stem)) + rest > _NAME_MAX:
        stem = stem[:-1]
    return f".{stem}{tail}"


def is_temp_name(name: str) -> bool:
    """``name`` is one of this tool's atomic-write temp files (made by any process, on any host)."""
    return _TEMP_NAME.match(name) is not None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``.

    The temporary file keeps ``path``'s suffix so writers that pick a format by extension still work.
    With ``overwrite=False`` an existing target raises FileExistsError instead of being replaced.
    On any exception (KeyboardInterrupt included) the temporary file is removed.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=f".tmp{path.suffix}", dir=path.parent)
    tmp_path = Path(tmp)
    try:
        os.close(fd)
        yield tmp_path
        # mkstemp creates 0600 files: give the result the mode a plain open() would (or the replaced file's)
        os.chmod(tmp_path, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_UMASK)
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp_path, path)
        else:
            os.link(tmp_path, path)  # fails if path exists: no race with another writer
            tmp_path.unlink()
        _fsync_dir(path.parent)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def remove_stale_temps(folder: str | os.PathLike, *, min_age_s: float = STALE_TEMP_AGE_S) -> list[Path]:
    """Delete this tool's temp files in ``folder`` (not below it) that no running write can still own.

    A temp made on this host goes when the process in its name is gone (``os.kill(pid, 0)`` raises
    ProcessLookupError); any of our temps, from any host, goes once it is older than ``min_age_s`` seconds
    (by its modification time). Nothing else is touched: not other programs' files, not a temp whose writer
    is alive, not a symlink or folder with our pattern. Files that cannot be removed are left. Returns the
    paths removed.
    """
    folder = Path(folder)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:  # missing, not a folder, unreadable: nothing to clean
        return removed
    now = time.time()
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        old = now - st.st_mtime > min_age_s
        if not old and not (m["host"] == _HOST and not _process_alive(int(m["pid"]))):
            continue
        try:
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(folder / entry.name)
    return sorted(removed)


def _process_alive(pid: int) -> bool:
    """True unless process ``pid`` surely does not exist on this host (unknown counts as alive)."""
    if os.name != "posix" or pid <= 0:  # on Windows os.kill(pid, 0) would terminate the process
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, OSError):  # another user's process, or cannot tell
        return True
    return True


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_with(path: str | os.PathLike, writer: Callable[[Path], None]) -> None:
    with atomic_path(path) as tmp:
        writer(tmp)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be opened
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def writable_folder(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a folder this process can write in, created if missing; a one-line InputError otherwise.

    Checked before a long job starts, so a bad output place fails in a second, not after the work."""
    from ..errors import InputError

    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{what} {folder} is an existing file: give a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise InputError(f"{what} {folder}: cannot write there ({e.strerror or e}); give a writable folder") from None
    return folder
