"""Networks kept loaded between jobs: what makes a resident worker (:mod:`nalasr.worker`) fast after its first job.

A new process pays for its imports, the CUDA start-up, the weights and the first forward of each input size
(kernels loaded from Triton's cache, the CUDA-graph capture of a size seen twice) before its first file. A
worker pays once; each later job finds the network here with its kernels loaded and the CUDA graphs of the
sizes it has seen (they live on the network object: :func:`nalasr.inference.graphs.graphed`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import torch

from ..io.weights import shipped_path

if TYPE_CHECKING:
    from ..model import NaLaSR
    from .batch import ModelChoice
    from .ensemble import SelfEnsemble

KEEP = 3  # x2, x3 and x4 of one variant stay loaded together


class ModelCache:
    """Loaded networks by (choice, device, weights file's identity), least recently used dropped beyond ``keep``.

    The weights file's size and mtime are part of the key, so a file replaced on disk (a new training run) is
    loaded again rather than served stale.
    """

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._nets: OrderedDict[tuple, NaLaSR | SelfEnsemble] = OrderedDict()
        self._lock = threading.Lock()  # the batch loads on a thread while the first images decode

    def get(self, choice: ModelChoice, device: torch.device) -> NaLaSR | SelfEnsemble:
        key = (choice, str(device), _identity(choice))
        with self._lock:
            net = self._nets.get(key)
            if net is None:
                net = self._nets[key] = choice.load(device)
                while len(self._nets) > self.keep:
                    self._nets.popitem(last=False)
            self._nets.move_to_end(key)
            return net

    def describe(self) -> list[str]:
        """One line per loaded network (for ``nalasr worker status``)."""
        with self._lock:
            return [f"x{c.scale} {c.variant or 'default'}{' ' + c.weights if c.weights else ''} on {dev}"
                    for c, dev, _ in self._nets]

    def clear(self) -> None:
        with self._lock:
            self._nets.clear()


def _identity(choice: ModelChoice) -> tuple[str, int, int]:
    path = choice.weights if choice.weights is not None else shipped_path(choice.scale, choice.variant)
    st = os.stat(path)
    return os.path.realpath(path), st.st_size, st.st_mtime_ns
