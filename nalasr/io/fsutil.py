"""Atomic file writes: a reader never sees a half-written output, and a crash leaves the old file intact."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it; done once, at import
    os.umask(mask)
    return mask


_UMASK = _read_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``.

    The temporary file keeps ``path``'s suffix so writers that pick a format by extension still work.
    With ``overwrite=False`` an existing target raises FileExistsError instead of being replaced.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
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
