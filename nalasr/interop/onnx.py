"""ONNX export of a NaLaSR model, and an onnxruntime model that the upscale pipeline runs like a torch one.

ONNX is what chaiNNer, ncnn, TensorRT, OpenVINO and onnxruntime all load. The export traces the plain
PyTorch path (the Triton kernels are not ONNX operators) with torch's dynamo exporter, dynamic height and
width by default, and writes beside the model a JSON sidecar with the network's config and the weights'
card, so a runtime that loads the file knows its scale and provenance without our code. Every export is
checked with onnxruntime against PyTorch on a random input before it is reported done.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..errors import InputError, WeightsError
from ..model import NaLaSR, NaLaSRConfig

OPSET = 18  # the dynamo exporter's own opset in torch 2.5-2.14; every op the network uses is in it
INPUT, OUTPUT = "lr", "sr"  # (1, 3, H, W) and (1, 3, sH, sW), float in [0, 1]
CHECK_SIZE = (37, 53)  # odd on purpose: nothing in the graph may assume even or square sizes
# Max |onnxruntime − torch| accepted by the check; fp16 rounds each of ~70 layers at 2^-11.
CHECK_TOL = {"fp32": 1e-4, "fp16": 2e-2}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


@dataclass(frozen=True)
class ExportReport:
    path: Path
    sidecar: Path
    scale: int
    dtype: str
    opset: int
    dynamic: bool
    size_bytes: int
    export_s: float
    check_max_abs: float  # onnxruntime against PyTorch on a CHECK_SIZE input

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def sidecar_path(onnx_path: str | os.PathLike) -> Path:
    p = Path(onnx_path)
    return p.with_name(p.name + ".json")


def export_onnx(
    model: NaLaSR,
    path: str | os.PathLike,
    *,
    dtype: str = "fp32",
    dynamic: bool = True,
    size: tuple[int, int] | None = None,
    card: dict[str, Any] | None = None,
) -> ExportReport:
    """Write ``model`` as ONNX to ``path`` (and ``path.json``), then check it with onnxruntime.

    ``dynamic``: any H, W at run time; otherwise the graph is fixed to ``size`` (H, W). The check input is
    CHECK_SIZE when dynamic, ``size`` otherwise."""
    if dtype not in DTYPES:
        raise InputError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if not dynamic and size is None:
        raise InputError("a fixed-size export needs --size HxW")
    _require("onnx", "onnxscript", "onnxruntime")
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{out} is a folder; give the .onnx file to write")
    out.parent.mkdir(parents=True, exist_ok=True)

    net = _exportable(model, DTYPES[dtype])
    h, w = size if size is not None else CHECK_SIZE
    example = torch.rand(1, 3, h, w, generator=torch.Generator().manual_seed(0)).to(DTYPES[dtype])
    shapes = {"x": {2: torch.export.Dim("height", min=4, max=8192), 3: torch.export.Dim("width", min=4, max=8192)}}
    t0 = time.perf_counter()
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with _quiet():
            program = torch.onnx.export(net, (example,), dynamo=True, opset_version=OPSET, input_names=[INPUT],
                                        output_names=[OUTPUT], dynamic_shapes=shapes if dynamic else None,
                                        external_data=False, verbose=False)
            program.save(str(tmp))
        export_s = time.perf_counter() - t0
        err = check_onnx(tmp, net, example)
        if err > CHECK_TOL[dtype]:
            raise WeightsError(f"the exported model differs from PyTorch by {err:.2e} (more than {CHECK_TOL[dtype]:.0e}) "
                               f"on a {w}x{h} input; the file was not written")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    meta = {"format": "nalasr-onnx/1", "opset": OPSET, "dtype": dtype, "dynamic": dynamic,
            "input": {"name": INPUT, "shape": [1, 3, "H", "W"], "range": [0, 1]},
            "output": {"name": OUTPUT, "shape": [1, 3, f"{model.cfg.scale}H", f"{model.cfg.scale}W"]},
            "config": model.cfg.to_dict(), "card": card or getattr(model, "card", {})}
    side = sidecar_path(out)
    side.write_text(json.dumps(meta, indent=1, sort_keys=True, default=str))
    return ExportReport(out, side, model.cfg.scale, dtype, OPSET, dynamic, out.stat().st_size, round(export_s, 2), err)


def check_onnx(path: str | os.PathLike, net: nn.Module, x: Tensor) -> float:
    """Max |onnxruntime(x) − net(x)| (the net in the export's dtype, on the CPU)."""
    with torch.inference_mode():
        ref = net(x).float().numpy()
    got = _session(path, ("CPUExecutionProvider",)).run(None, {INPUT: x.numpy()})[0].astype(np.float32)
    if got.shape != ref.shape:
        raise WeightsError(f"the exported model gives {got.shape}, PyTorch {ref.shape}")
    return float(np.abs(got - ref).max())


class OnnxModel(nn.Module):
    """An exported NaLaSR run by onnxruntime, shaped like the torch model for the upscale pipeline.

    It has ``cfg`` (from the sidecar) and one parameter, which tells the pipeline where inputs go (the CPU:
    onnxruntime takes host arrays, whatever its provider) and in which dtype; ``forward`` takes and returns
    (1, 3, H, W) tensors like NaLaSR's."""

    def __init__(self, path: str | os.PathLike, device: str = "auto") -> None:
        super().__init__()
        _require("onnxruntime")
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such ONNX file (make one with `nalasr export`)")
        side = sidecar_path(self.path)
        if not side.is_file():
            raise WeightsError(f"{side} is missing: `nalasr export` writes it beside the model; it holds the scale")
        meta = json.loads(side.read_text())
        self.cfg = NaLaSRConfig.from_dict(meta["config"])
        self.card = meta.get("card", {})
        self.session = _session(self.path, _providers(device))
        dtype = DTYPES[meta.get("dtype", "fp32")]
        self._anchor = nn.Parameter(torch.zeros(1, dtype=dtype), requires_grad=False)

    @property
    def providers(self) -> list[str]:
        return list(self.session.get_providers())

    def set_attention_backend(self, backend: str) -> None:
        if backend != "auto":
            raise InputError("--attention-backend is a PyTorch choice; an ONNX model runs what it was exported with")

    def to(self, *args: Any, **kwargs: Any) -> "OnnxModel":  # the dtype is the exported one: nothing to move
        return self

    def forward(self, x: Tensor) -> Tensor:
        """(B, 3, H, W) → (B, 3, sH, sW), one image at a time (the export's batch is 1)."""
        xs = x.detach().to("cpu", self._anchor.dtype).contiguous().numpy()
        outs = [self.session.run(None, {INPUT: xs[i:i + 1]})[0] for i in range(xs.shape[0])]
        return torch.from_numpy(np.concatenate(outs)).to(x.dtype)


def _exportable(model: NaLaSR, dtype: torch.dtype) -> nn.Module:
    """A CPU copy of ``model`` in ``dtype`` on the plain PyTorch path (what ONNX can express)."""
    import copy

    net = copy.deepcopy(model).to("cpu", dtype).eval()
    net.set_attention_backend("reference")
    return net


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter logs every skipped constant fold and missing torchvision op: noise to a user."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "onnxscript", "onnx_ir", "torch._export")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _providers(device: str) -> tuple[str, ...]:
    """onnxruntime's providers for a --device: CUDA first where asked for (or auto) and installed, else CPU."""
    if device == "cpu":
        return ("CPUExecutionProvider",)
    if device.startswith("cuda"):
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise InputError("--device cuda with --runtime onnxruntime needs onnxruntime-gpu; use --device cpu")
    return ("CUDAExecutionProvider", "CPUExecutionProvider")


def _session(path: str | os.PathLike, providers: tuple[str, ...] | None) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # onnxruntime's warnings about unused initialisers are not the user's business
    available = ort.get_available_providers()
    chosen = [p for p in (providers or available) if p in available] or ["CPUExecutionProvider"]
    return ort.InferenceSession(str(path), sess_options=opts, providers=chosen)


def _require(*modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"{', '.join(missing)} not installed: pip install 'nalasr[onnx]'")


def export_model(
    path: str | os.PathLike,
    *,
    scale: int = 4,
    variant: str | None = None,
    weights: str | os.PathLike | None = None,
    dtype: str = "fp32",
    size: tuple[int, int] | None = None,
) -> ExportReport:
    """``nalasr export``: the shipped weights (or ``weights``) for ``scale`` as ONNX at ``path``; a fixed
    (H, W) graph when ``size`` is given, dynamic H and W otherwise."""
    from .. import load_model

    model = load_model(scale, variant=variant, weights=weights, device="cpu")
    return export_onnx(model, path, dtype=dtype, dynamic=size is None, size=size)
