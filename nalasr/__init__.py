"""NaLaSR: whole-image super-resolution with NaLa global linear attention.

    >>> import nalasr
    >>> model = nalasr.load_model(scale=4)            # shipped weights, no network
    >>> out = nalasr.upscale(pil_image, scale=4)      # PIL image or HxW / HxWxC uint8/uint16 numpy array

Importing works without a GPU and without Triton.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from .api import load_model
from .errors import NalasrError
from .model import ModelSpec, NaLaSR, NaLaSRConfig, create_model, spec_of

__all__ = ["ModelSpec", "NaLaSR", "NaLaSRConfig", "NalasrError", "create_model", "load_model", "spec_of", "upscale"]


def __getattr__(name: str) -> Any:  # image I/O pulls in Pillow/OpenCV: only when asked for
    if name == "upscale":
        from .upscaling import upscale

        return upscale
    raise AttributeError(f"module 'nalasr' has no attribute {name!r}")
