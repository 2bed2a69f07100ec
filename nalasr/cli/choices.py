"""The CLI's fixed choices as Enum classes: Typer lists them in --help and rejects anything else (exit 2).

Enums rather than Literal: choices in --help with every Typer version the project allows. Values are the
library's own strings (``choice.value`` is what a command passes on). Devices stay free text (cuda:N), checked
by :func:`nalasr.inference.runtime.resolve_device`; scales are checked once, by
:func:`nalasr.inference.runtime.check_scale`.
"""

from __future__ import annotations

from enum import Enum


class Precision(str, Enum):
    auto = "auto"
    fp32 = "fp32"
    fp16 = "fp16"
    bf16 = "bf16"


class AttentionBackend(str, Enum):  # nalasr.ops.BACKENDS
    auto = "auto"
    triton = "triton"
    reference = "reference"


class Variant(str, Enum):  # nalasr.model.VARIANTS
    small = "small"
    default = "default"


class Ext(str, Enum):  # nalasr.io.imageio.EXTENSIONS, without the dot
    png = "png"
    jpg = "jpg"
    jpeg = "jpeg"
    webp = "webp"
    tif = "tif"
    tiff = "tiff"
    bmp = "bmp"


class ModelKind(str, Enum):
    nalasr = "nalasr"
    bicubic = "bicubic"


class Runtime(str, Enum):
    torch = "torch"
    onnxruntime = "onnxruntime"


class ExportFormat(str, Enum):
    onnx = "onnx"


class ExportDtype(str, Enum):  # nalasr.interop.onnx.DTYPES
    fp32 = "fp32"
    fp16 = "fp16"


def value(choice: Enum | None) -> str | None:
    """The library string of an optional choice."""
    return None if choice is None else choice.value
