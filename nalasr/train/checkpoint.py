"""Checkpoints: written atomically (temp file, fsync, rename), the last N kept, read without pickle."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..io.fsutil import atomic_path

_NAME = re.compile(r"^ckpt_(\d{8})\.pt$")


def ckpt_path(folder: Path, step: int) -> Path:
    return folder / f"ckpt_{step:08d}.pt"


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of the finished checkpoints in ``folder``, oldest first (temp files never match)."""
    if not os.path.isdir(folder):  # os.path: False, not PermissionError, below a folder without access
        return []
    try:
        names = os.listdir(folder)
    except OSError as e:
        raise InputError(f"{folder}: cannot read ({e.strerror or e}); give a run folder this user can read") from None
    return sorted((int(m.group(1)), folder / n) for n in names if (m := _NAME.match(n)))


def save_checkpoint(folder: Path, step: int, state: dict[str, Any], keep_last: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = ckpt_path(folder, step)
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
    for _, old in list_checkpoints(folder)[:-keep_last]:
        old.unlink(missing_ok=True)
    return path


def save_best(folder: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` as ``best.pt`` (atomically): for a validation step that is not a checkpoint step."""
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "best.pt") as tmp:
        torch.save(state, tmp)
    return folder / "best.pt"


def mark_best(folder: Path, path: Path) -> None:
    with atomic_path(folder / "best.pt") as tmp:
        shutil.copyfile(path, tmp)


def load_checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


def load_latest(folder: Path) -> tuple[dict[str, Any], Path] | None:
    """The newest checkpoint that reads back whole, or None. A damaged newest file is skipped, not trusted."""
    for _, path in reversed(list_checkpoints(folder)):
        try:
            return load_checkpoint(path), path
        except Exception:  # noqa: BLE001 - any unreadable file means: fall back to the one before
            continue
    return None
