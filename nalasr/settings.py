"""The one place that reads the environment: read once, at import, into a frozen :class:`Settings`.

User-facing variables (the only ``NALASR_*`` names the library reads):

    NALASR_DATA              data root for evaluation sets (else the project's datasets/ folder)
    NALASR_WEIGHTS           folder of shipped weights (else the checkout's weights/, else the installed copy)
    NALASR_DATASETS_MIRROR   base URL replacing the download URLs' directory (the digests still hold)
    NALASR_CUDA_GRAPHS=0     no CUDA-graph replay of repeated input sizes
    NALASR_REFERENCE=1       the plain PyTorch path everywhere: no Triton kernel, no fused inference op

and torchrun's WORLD_SIZE / RANK / LOCAL_RANK for multi-process training, XDG_RUNTIME_DIR (where
``nalasr worker`` keeps its socket; else /tmp/nalasr-UID) and CUDA_VISIBLE_DEVICES (a resident worker serves only
commands that see the same GPUs).

Code asks :func:`get`; a process that changes ``os.environ`` after import (tests) calls :func:`reload`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "get", "reload"]


@dataclass(frozen=True)
class Settings:
    data: Path | None = None
    weights: Path | None = None
    datasets_mirror: str | None = None
    cuda_graphs: bool = True
    reference: bool = False  # force the PyTorch reference of every op (attention, norms, convs)
    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    runtime_dir: Path | None = None
    visible_gpus: str | None = None  # CUDA_VISIBLE_DEVICES as set (None: unset)

    def job_affecting(self) -> dict[str, str | None]:
        """What a resident worker and the command it serves must agree on: the settings that change a job's
        result or its devices (not the training or data ones)."""
        return {"weights": None if self.weights is None else str(self.weights), "cuda_graphs": str(self.cuda_graphs),
                "reference": str(self.reference), "visible_gpus": self.visible_gpus}

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        def path(name: str) -> Path | None:
            # An empty value means unset, as a shell's `NALASR_DATA= cmd` intends.
            return Path(env[name]) if env.get(name) else None

        return cls(
            data=path("NALASR_DATA"),
            weights=Path(env["NALASR_WEIGHTS"]) if "NALASR_WEIGHTS" in env else None,
            datasets_mirror=env.get("NALASR_DATASETS_MIRROR") or None,
            cuda_graphs=env.get("NALASR_CUDA_GRAPHS", "1") != "0",
            reference=env.get("NALASR_REFERENCE", "0") not in ("", "0"),
            world_size=int(env.get("WORLD_SIZE", "1")),
            rank=int(env.get("RANK", "0")),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            runtime_dir=path("XDG_RUNTIME_DIR"),
            visible_gpus=env.get("CUDA_VISIBLE_DEVICES"),
        )


_current: Settings = Settings.from_env()


def get() -> Settings:
    """The settings read at import (or at the last :func:`reload`)."""
    return _current


def reload(env: Mapping[str, str] | None = None) -> Settings:
    """Read the environment (or ``env``) again and make that the current settings."""
    global _current
    _current = Settings.from_env(os.environ if env is None else env)
    return _current
