"""Which image formats NaLaSR reads and writes, and the regular-file check done before a file is opened.

Kept apart from :mod:`.imageio` (numpy, OpenCV, Pillow) because listing a job's inputs and outputs needs only
these: a command that a running ``nalasr worker`` serves imports this module, never the decoders (~150 ms on
a 2-core CPU)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import InputError

# Format name (Pillow's) → the extension written by default.
FORMATS: dict[str, str] = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "TIFF": ".tif", "BMP": ".bmp"}
EXTENSIONS: dict[str, str] = {
    ".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP",
    ".tif": "TIFF", ".tiff": "TIFF", ".bmp": "BMP",
}


def check_regular_file(path: str | os.PathLike) -> None:
    """InputError (one line naming what it is) unless ``path`` is a regular file; nothing is opened, so a FIFO
    cannot block. For callers that list inputs before reading them."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"{path}: broken symbolic link (to {os.readlink(path)}); nothing to read") from None
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    check_regular_mode(Path(path), mode)


def check_regular_mode(path: Path, mode: int) -> None:
    """InputError unless ``mode`` is a regular file's (a folder, FIFO, device or socket is not an image file)."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a folder, not an image file")
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a special file")
    raise InputError(f"{path}: not a regular file ({kind}); give an image file")
