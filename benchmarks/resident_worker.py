"""A `nalasr worker` started for a benchmark's jobs and stopped after them, shared by benchmarks/cli_startup.py
and benchmarks/e2e_upscale.py (benchmarks/ is on sys.path when one of them runs as a script).

The worker goes through the CLI, as a user starts one, in the private XDG_RUNTIME_DIR that ``env`` names, so
only the jobs run with that ``env`` find it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def private_runtime(folder: Path) -> dict[str, str]:
    """The environment entry that gives a benchmark's jobs and worker their own runtime folder (made, mode 0700,
    as the worker requires), so no worker outside the benchmark serves them."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {"XDG_RUNTIME_DIR": str(folder)}


@contextlib.contextmanager
def resident_worker(args: list[str], *, cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """`nalasr worker start ARGS` run in ``cwd`` with ``env`` (its XDG_RUNTIME_DIR from private_runtime);
    `nalasr worker stop` at exit, also when the benchmark fails, so no worker outlives it."""
    subprocess.run([sys.executable, "-m", "nalasr", "worker", "start", *args], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        subprocess.run([sys.executable, "-m", "nalasr", "worker", "stop"], cwd=cwd, env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
