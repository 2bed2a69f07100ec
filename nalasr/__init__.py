"""NaLaSR: whole-image super-resolution with NaLa global linear attention.

    >>> import nalasr
    >>> model = nalasr.load_model(scale=4)            # shipped weights, no network
    >>> out = nalasr.upscale(pil_image, scale=4)      # PIL image or HxW / HxWxC uint8/uint16 numpy array

Importing works without a GPU and without Triton, and costs nothing: the names below are imported on first use
(torch with the model, Pillow/OpenCV with image I/O).

The code reads CLI → library → model → ops → kernels: :mod:`nalasr.cli` (commands), :mod:`nalasr.inference`,
:mod:`nalasr.eval`, :mod:`nalasr.train`, :mod:`nalasr.bench` (what a user does; :mod:`nalasr.worker` runs
upscale jobs in a resident process), :mod:`nalasr.io` (files),
:mod:`nalasr.model` (the network), :mod:`nalasr.ops` (its ops, fast path picked there), ``nalasr_kernels``
(Triton). :mod:`nalasr.settings` reads the environment, :mod:`nalasr.errors` maps errors to exit codes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name → the module that defines it
_EXPORTS = {
    "load_model": ".inference.loading",
    "upscale": ".inference.upscaling",
    "NalasrError": ".errors",
    "ModelSpec": ".model",
    "NaLaSR": ".model",
    "NaLaSRConfig": ".model",
    "create_model": ".model",
    "spec_of": ".model",
}

__all__ = ["ModelSpec", "NaLaSR", "NaLaSRConfig", "NalasrError", "create_model", "load_model", "spec_of", "upscale"]

if TYPE_CHECKING:
    from .errors import NalasrError
    from .inference.loading import load_model
    from .inference.upscaling import upscale
    from .model import ModelSpec, NaLaSR, NaLaSRConfig, create_model, spec_of


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    raise AttributeError(f"module 'nalasr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
