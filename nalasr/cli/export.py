"""``nalasr export``: parse the arguments, call :func:`nalasr.interop.onnx.export_model`, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import InputError
from .app import app, out
from .choices import ExportDtype, ExportFormat, Variant, value


def _size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise InputError(f"--size takes HxW, e.g. 540x960; got {text!r}") from None
    if h < 4 or w < 4:
        raise InputError(f"--size must be at least 4x4, got {text!r}")
    return h, w


@app.command("export")
def export_command(
    output: Annotated[Path, typer.Argument(metavar="FILE.onnx", help="Where to write the model (and FILE.onnx.json).")],
    scale: Annotated[int, typer.Option("--scale", "-s", min=2, max=4, help="Upscaling factor: 2, 3 or 4.")] = 4,
    format: Annotated[ExportFormat, typer.Option("--format", help="Model format.")] = ExportFormat.onnx,
    variant: Annotated[Optional[Variant], typer.Option("--variant", show_default=False, help="Shipped variant.")] = None,
    weights: Annotated[Optional[Path], typer.Option("--weights", show_default=False, help="A weights file instead.")] = None,
    dtype: Annotated[ExportDtype, typer.Option("--dtype", help="Weights and activations of the graph.")] = ExportDtype.fp32,
    size: Annotated[Optional[str], typer.Option(
        "--size", show_default=False, help="Fix the input to HxW (LR pixels); default: any height and width.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Export a model for other runtimes (ONNX: onnxruntime, TensorRT, OpenVINO, ncnn, chaiNNer).

    Writes FILE.onnx (input 'lr' (1, 3, H, W), output 'sr' (1, 3, sH, sW), floats in [0, 1]) and FILE.onnx.json
    (config and card), then checks the file with onnxruntime against PyTorch before reporting success.
    `nalasr upscale --runtime onnxruntime --model FILE.onnx` runs it."""
    from ..interop.onnx import export_model

    rep = export_model(output, scale=scale, variant=value(variant), weights=weights, dtype=dtype.value, size=_size(size))
    if as_json:
        out.print_json(json.dumps(rep.to_dict()))
        return
    shape = "dynamic H and W" if rep.dynamic else f"fixed {size}"
    out.print(f"wrote {rep.path} ({rep.size_bytes / 2**20:.1f} MiB, ONNX opset {rep.opset}, {rep.dtype}, {shape}, "
              f"x{rep.scale}) and {rep.sidecar.name}; onnxruntime matches PyTorch to {rep.check_max_abs:.1e}")
