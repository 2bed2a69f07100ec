"""Shared fixtures: the benchmark data root (env NALASR_DATA) and its decoded HR images."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest


def _data_root_or_skip() -> Path:
    root = os.environ.get("NALASR_DATA")
    if not root:
        pytest.skip("NALASR_DATA is not set (point it at the datasets folder, e.g. ../shared/datasets)")
    if not Path(root).is_dir():
        pytest.skip(f"NALASR_DATA={root} is not a folder")
    return Path(root)


@pytest.fixture
def data_root() -> Path:
    """$NALASR_DATA, or the test is skipped with the reason."""
    return _data_root_or_skip()


@lru_cache(maxsize=4)
def _decode_set(folder: Path) -> tuple[np.ndarray, ...]:
    from nalasr.eval.datasets import read_image

    return tuple(read_image(p) for p in sorted(folder.iterdir()) if p.is_file())


@pytest.fixture
def hr_images() -> Callable[[str], tuple[np.ndarray, ...]]:
    """name → the decoded HR images of <data root>/<name>/HR (cached), skipping when the set is absent."""

    def get(name: str) -> tuple[np.ndarray, ...]:
        folder = _data_root_or_skip() / name / "HR"
        if not folder.is_dir():
            pytest.skip(f"{folder} not found: the {name} HR images are not on this machine")
        return _decode_set(folder)

    return get


@pytest.fixture(autouse=True)
def _nalasr_settings_follow_env():
    """nalasr.settings reads the environment once; a test that changes it calls settings.reload(). After each
    test (its monkeypatch undone first: autouse fixtures are torn down last) the settings are read again."""
    yield
    settings = sys.modules.get("nalasr.settings")
    if settings is not None:
        settings.reload()


@pytest.fixture
def one_torch_thread():
    """Tiny images: one thread is fastest, and on a busy 2-core machine two spinning threads are 30x slower."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
