"""Upscaling: images in memory (:func:`upscale`) and files in batches (:func:`upscale_paths`, the CLI's engine).

Always the whole image in one forward pass: the attention is global, so there are no tiles and no seams.
Alpha is not shown to the network (it was trained on colour): it is upscaled separately, bicubic, and
re-attached.
"""

from __future__ import annotations

import functools
import glob
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from torch import Tensor
from PIL import Image

from .loading import load_model
from ..errors import InputError, NalasrError
from ..io.imageio import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_QUALITY,
    EXTENSIONS,
    FORMATS,
    Picture,
    array_to_pil,
    icc_fits,
    normalise_ext,
    pil_to_array,
    read_image,
    write_image,
)
from .ensemble import SelfEnsemble, ensemble_of
from .infer import ForwardStats, run_model
from ..model import NaLaSR
from ..ops import BACKENDS, triton_available
from .runtime import check_scale, dtype_name, resolve_device, resolve_dtype
from ..io.weights import shipped_path

Existing = Literal["fail", "skip", "overwrite"]
Status = Literal["ok", "skipped", "failed"]
ImageT = TypeVar("ImageT", Image.Image, np.ndarray)


# ---------------------------------------------------------------------------------------------- in memory


def upscale(
    image: ImageT,
    scale: int | None = None,
    model: NaLaSR | None = None,
    *,
    device: str | torch.device = "auto",
    precision: str = "auto",
    self_ensemble: bool = False,
) -> ImageT:
    """Super-resolve a PIL image or an HxW / HxWxC (C = 1..4) uint8 or uint16 numpy array; same kind back.

    ``scale`` defaults to the model's scale, or 4 when no model is given (then the shipped weights for
    ``scale`` are loaded on ``device`` and kept for the next call). A given ``model`` runs on its own device.
    ``precision``: auto (fp16 on CUDA, fp32 on CPU), fp32, fp16 or bf16; a non-finite half-precision
    output is recomputed in fp32. Numpy arrays keep their shape layout and dtype; PIL images come back as
    L, LA, RGB, RGBA or I;16 (palette and 1-bit images become RGB(A) / L), with the ICC profile kept.
    In-memory images are taken as they are: EXIF orientation is applied when reading files, not here.
    ``self_ensemble``: average the network over the 8 flips/rotations of the image (8× the time).
    """
    net: NaLaSR | SelfEnsemble = _model_for(scale, model, device)
    dtype = resolve_dtype(precision, next(net.parameters()).device)
    if self_ensemble:
        net = ensemble_of(net)
    if isinstance(image, Image.Image):
        pixels, _ = pil_to_array(image)
        _check_pixels(pixels)
        sr, _ = upscale_pixels(pixels, net, dtype)
        result = array_to_pil(sr)
        icc = image.info.get("icc_profile")
        if icc and icc_fits(icc, sr.shape[2]):
            result.info["icc_profile"] = icc
        return result  # type: ignore[return-value]
    if isinstance(image, np.ndarray):
        if image.dtype not in (np.uint8, np.uint16):
            raise InputError(f"numpy images must be uint8 or uint16, not {image.dtype}; "
                             "e.g. convert with (x * 255).round().astype(np.uint8)")
        if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 2, 3, 4)):
            raise InputError(f"expected an HxW or HxWxC array with C in 1..4, got shape {image.shape}")
        pixels = image[..., None] if image.ndim == 2 else image
        _check_pixels(pixels)
        sr, _ = upscale_pixels(pixels, net, dtype)
        return sr[..., 0] if image.ndim == 2 else sr  # type: ignore[return-value]
    raise InputError(f"upscale() takes a PIL image or a numpy array, not {type(image).__name__}")


def lr_tensor(pixels: np.ndarray) -> tuple[Tensor, float]:
    """(H, W, C) uint8/uint16 → its colour (or gray) channels as (1, 3 or 1, H, W) float32 in [0, 1], and the
    maximum value they were divided by. An alpha channel is left out."""
    maxval = 65535.0 if pixels.dtype == np.uint16 else 255.0
    colour = pixels[..., :3] if pixels.shape[2] >= 3 else pixels[..., :1]
    return torch.from_numpy(np.ascontiguousarray(colour, dtype=np.float32) / maxval).permute(2, 0, 1)[None], maxval


def upscale_pixels(pixels: np.ndarray, model: NaLaSR | SelfEnsemble, dtype: torch.dtype) -> tuple[np.ndarray, ForwardStats]:
    """(H, W, C) uint8/uint16 → (s·H, s·W, C) of the same dtype, and the forward's timing and memory.

    Colour (or gray) goes through the model; an alpha channel is upscaled bicubic and re-attached.
    """
    c = pixels.shape[2]
    lr, maxval = lr_tensor(pixels)
    sr, stats = run_model(model, lr, dtype)
    out = np.rint(sr[0].permute(1, 2, 0).cpu().numpy() * maxval).astype(pixels.dtype)
    if c in (2, 4):
        alpha = _resize_alpha(pixels[..., c - 1], model.cfg.scale, maxval)
        out = np.concatenate([out, alpha[..., None]], axis=2)
    return out, stats


def _resize_alpha(alpha: np.ndarray, scale: int, maxval: float) -> np.ndarray:
    """Bicubic (Keys, a = -0.5) in float, so 8- and 16-bit alpha keep their precision."""
    h, w = alpha.shape
    f = Image.fromarray(alpha.astype(np.float32) / np.float32(maxval))  # mode "F"
    big = np.asarray(f.resize((w * scale, h * scale), Image.Resampling.BICUBIC))
    return np.rint(np.clip(big, 0.0, 1.0) * maxval).astype(alpha.dtype)


def _check_pixels(pixels: np.ndarray) -> None:
    if pixels.shape[0] < 1 or pixels.shape[1] < 1:
        raise InputError(f"the image has no pixels (shape {pixels.shape})")


def _model_for(scale: int | None, model: NaLaSR | None, device: str | torch.device) -> NaLaSR:
    if model is not None:
        if scale is not None and model.cfg.scale != scale:
            raise InputError(f"the model upscales x{model.cfg.scale}, not x{scale}; pass scale={model.cfg.scale} "
                             "or another model")
        return model
    scale = check_scale(4 if scale is None else scale)
    path = shipped_path(scale)
    return _cached_model(str(path), path.stat().st_mtime_ns, scale, str(resolve_device(device)))


@functools.lru_cache(maxsize=4)
def _cached_model(path: str, mtime_ns: int, scale: int, device: str) -> NaLaSR:
    """Repeated ``upscale()`` calls reuse the loaded weights (keyed on the file and its mtime)."""
    return load_model(scale, weights=path, device=device)


# ------------------------------------------------------------------------------------------------ batches


@dataclass
class ItemResult:
    """What happened to one input of a batch (also the rows of ``--json``)."""

    input: str
    output: str | None = None
    status: Status = "failed"
    error: str | None = None
    input_size: tuple[int, int] | None = None  # (width, height)
    output_size: tuple[int, int] | None = None
    pixels: str | None = None  # e.g. "RGBA 16-bit"
    model_ms: float | None = None  # forward only, device synchronised
    total_ms: float | None = None  # read + forward + encode + write
    peak_memory_bytes: int | None = None  # growth during the forward (CUDA allocated or CPU RSS)
    memory_kind: str | None = None
    precision: str | None = None  # what the output was computed in
    fell_back: bool = False  # half precision gave non-finite values and fp32 was used
    cuda_graph: bool = False  # the forward replayed a CUDA graph (an earlier image had this size)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class BatchReport:
    scale: int
    device: str
    precision: str  # the precision asked for, resolved; see each item for fallbacks
    weights: str | None
    self_ensemble: bool = False
    items: list[ItemResult] = field(default_factory=list)
    wall_s: float = 0.0

    def count(self, status: Status) -> int:
        return sum(item.status == status for item in self.items)

    @property
    def failures(self) -> list[ItemResult]:
        return [item for item in self.items if item.status == "failed"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale, "device": self.device, "precision": self.precision, "weights": self.weights,
            "self_ensemble": self.self_ensemble, "ok": self.count("ok"), "skipped": self.count("skipped"), "failed": self.count("failed"),
            "wall_s": round(self.wall_s, 4), "items": [item.to_dict() for item in self.items],
        }


@dataclass(frozen=True)
class _Job:
    source: Path
    out_dir: Path  # folder of the output (mirrors the input tree under -o with --recursive)
    out_file: Path | None = None  # the exact output path: `-o FILE` with a single input file


def upscale_paths(
    inputs: Sequence[str | os.PathLike],
    output: str | os.PathLike | None = None,
    *,
    scale: int = 4,
    model: NaLaSR | None = None,
    weights: str | os.PathLike | None = None,
    variant: str | None = None,
    device: str | torch.device = "auto",
    precision: str = "auto",
    attention_backend: str = "auto",
    recursive: bool = False,
    ext: str | None = None,
    quality: int = DEFAULT_QUALITY,
    existing: Existing = "fail",
    max_pixels: int = DEFAULT_MAX_PIXELS,
    self_ensemble: bool = False,
    onnx: str | os.PathLike | None = None,
    on_start: Callable[[int], None] | None = None,
    on_item: Callable[[ItemResult], None] | None = None,
) -> BatchReport:
    """Upscale files, folders and globs; a bad input fails alone and the batch carries on.

    Outputs are ``{stem}_x{scale}{ext}`` beside each input, or in the ``output`` folder (mirroring the
    tree of a folder input with ``recursive``); ``output`` is a file path when there is one input file and
    it has an image extension. Inputs are never overwritten. An existing output fails its item unless
    ``existing`` is "skip" or "overwrite". Every file is written atomically.

    Raises only for problems with the whole run (bad options, weights, device); per-input failures are in
    the report (``report.failures``). ``on_start(n)`` and ``on_item(result)`` drive a progress display.
    ``self_ensemble``: average the network over the 8 flips/rotations of each image (8× the time).
    ``onnx``: run this exported model (``nalasr export``) with onnxruntime instead of the PyTorch network.
    """
    _check_options(scale, existing, quality, max_pixels, attention_backend)
    if onnx is not None:
        if model is not None or weights is not None or variant is not None:
            raise InputError("--model FILE.onnx is the whole model: leave out --weights and --variant")
        from ..interop.onnx import OnnxModel

        model = OnnxModel(onnx, device=str(device))  # type: ignore[assignment]
    suffix = normalise_ext(ext) if ext else None
    entries = _collect(inputs, output, recursive, suffix)
    jobs = [e for e in entries if isinstance(e, _Job)]
    t0 = time.perf_counter()
    dev = next(model.parameters()).device if model is not None else resolve_device(device)
    dtype = resolve_dtype(precision, dev)
    if attention_backend == "triton" and not (dev.type == "cuda" and triton_available()):
        raise InputError("--attention-backend triton needs a CUDA device and the triton package; use auto or reference")
    label: str | None = str(onnx) if onnx is not None else None
    if model is not None:
        if model.cfg.scale != scale:
            raise InputError(f"the model upscales x{model.cfg.scale}, not x{scale}")
    elif jobs:
        label = str(weights if weights is not None else shipped_path(scale, variant))
        model = load_model(scale, variant, weights, dev)
    if model is not None and (label is not None or attention_backend != "auto"):  # a given model keeps its own
        model.set_attention_backend(attention_backend)  # type: ignore[arg-type]
    report = BatchReport(scale, str(dev), dtype_name(dtype), label, self_ensemble)
    net: NaLaSR | SelfEnsemble | None = ensemble_of(model) if self_ensemble and model is not None else model
    if on_start:
        on_start(len(entries))
    writer = _Writer(jobs, scale, suffix, quality, existing)
    for entry in entries:  # in the order the inputs were given; unmatched inputs are failed items already
        if isinstance(entry, _Job):
            assert net is not None
            item = _process(entry, writer, net, dtype, max_pixels)
        else:
            item = entry
        report.items.append(item)
        if on_item:
            on_item(item)
    report.wall_s = time.perf_counter() - t0
    return report


def _check_options(scale: int, existing: str, quality: int, max_pixels: int, backend: str) -> None:
    check_scale(scale)
    if existing not in ("fail", "skip", "overwrite"):
        raise InputError(f"existing must be fail, skip or overwrite, got {existing!r}")
    if not 1 <= quality <= 100:
        raise InputError(f"--quality must be between 1 and 100, got {quality}")
    if max_pixels < 1:
        raise InputError(f"--max-pixels must be at least 1, got {max_pixels}")
    if backend not in BACKENDS:
        raise InputError(f"unknown attention backend {backend!r}: use {', '.join(BACKENDS)}")


# --- finding the inputs


def _collect(
    inputs: Sequence[str | os.PathLike], output: str | os.PathLike | None, recursive: bool, suffix: str | None
) -> list[_Job | ItemResult]:
    """Expand files, folders and globs into jobs, in order; inputs that match nothing become failed items."""
    if not inputs:
        raise InputError("no inputs given: pass image files, folders or globs")
    # (file, the folder it was found in, for mirroring), or a failed item kept in argument order
    found: list[tuple[Path, Path | None] | ItemResult] = []
    for raw in inputs:
        text = os.fspath(raw)
        if not text.strip():  # Path("") is the current folder: an unset shell variable must not upscale it
            raise InputError("an input is empty (''): is a shell variable unset? Pass image files, folders or globs")
        path = Path(text)
        if path.is_dir():
            files = _walk_or_fail(path, recursive, found)
            if files is None:
                continue
            found += [(f, path) for f in files]
            if not files:
                hint = "" if recursive else " (add --recursive to include subfolders)"
                found.append(ItemResult(text, error=f"{text}: no {'/'.join(s[1:] for s in EXTENSIONS)} "
                                                       f"files in this folder{hint}"))
        elif path.exists():
            found.append((path, None) if path.is_file() else _not_regular(text))
        elif glob.has_magic(text):
            matches = sorted(glob.glob(text, recursive=True))
            for m in map(Path, matches):
                if m.is_dir():
                    found += [(f, m) for f in _walk_or_fail(m, recursive, found) or []]
                else:
                    found.append((m, None) if m.is_file() else _not_regular(str(m)))
            if not matches:
                found.append(ItemResult(text, error=f"{text}: no file matches this pattern"))
        else:
            found.append(ItemResult(text, error=f"{text}: no such file or folder"))

    out_root = Path(output) if output is not None else None
    single_file = len(inputs) == 1 and Path(inputs[0]).is_file()
    to_file = (
        out_root is not None and single_file and not out_root.is_dir()
        and not os.fspath(output).endswith(("/", os.sep)) and out_root.suffix.lower() in EXTENSIONS
    )
    if to_file and suffix is not None and out_root.suffix.lower() != suffix:
        raise InputError(f"--ext {suffix[1:]} contradicts -o {output}: drop one of them")
    if out_root is not None and not to_file and out_root.exists() and not out_root.is_dir():
        raise InputError(f"-o {output} is an existing file: give a folder for these outputs, or one input file")

    entries: list[_Job | ItemResult] = []
    seen: set[Path] = set()
    for entry in found:
        if isinstance(entry, ItemResult):
            entries.append(entry)
            continue
        f, root = entry
        # The same path named twice (e.g. by a path and a glob) is done once. Not resolved through symlinks: a
        # link beside its target is an input of its own, and taking one for the other would drop the target.
        key = Path(os.path.abspath(f))
        if key in seen:
            continue
        seen.add(key)
        if out_root is None:
            entries.append(_Job(f, f.parent))
        elif to_file:
            entries.append(_Job(f, out_root.parent, out_root))
        else:
            entries.append(_Job(f, out_root / (f.parent.relative_to(root) if root is not None else Path())))
    return entries


def _not_regular(text: str) -> ItemResult:
    """A FIFO, socket or device named as an input: reading it could block forever, so it is refused."""
    return ItemResult(text, error=f"{text}: not a regular file (a pipe, socket or device); give image files")


def _walk_or_fail(folder: Path, recursive: bool, found: list) -> list[Path] | None:
    """_walk, or None with a failed item appended to ``found`` when the folder cannot be listed."""
    try:
        return _walk(folder, recursive)
    except OSError as e:
        found.append(ItemResult(str(folder), error=f"{folder}: cannot read this folder ({e.strerror or e})"))
        return None


def _walk(folder: Path, recursive: bool) -> list[Path]:
    """Image files (by extension: a folder may hold anything) in ``folder``; hidden names skipped."""
    candidates = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        p for p in candidates
        if p.suffix.lower() in EXTENSIONS
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)  # includes our temp files
        and p.is_file()
    )


# --- one item


class _Writer:
    """Output naming and the rules: never an input, never twice in one run, existing files per policy."""

    def __init__(self, jobs: list[_Job], scale: int, suffix: str | None, quality: int, existing: Existing) -> None:
        self.scale, self.suffix, self.quality, self.existing = scale, suffix, quality, existing
        self.input_paths = {Path(os.path.realpath(j.source)) for j in jobs}
        self.input_ids = {_file_id(j.source) for j in jobs} - {None}
        self.written: dict[Path, str] = {}

    def path_for(self, job: _Job, fmt: str | None) -> Path | None:
        """The output path; None while it depends on the content's format (input without an image extension)."""
        if job.out_file is not None:
            return job.out_file
        suffix = self.suffix or (job.source.suffix if job.source.suffix.lower() in EXTENSIONS else None)
        if suffix is None:
            if fmt is None:
                return None
            suffix = FORMATS[fmt]
        return job.out_dir / f"{job.source.stem}_x{self.scale}{suffix}"

    def wanted(self, out: Path) -> bool:
        """False: skip (exists and --skip-existing). Raises InputError when the output is not allowed."""
        key = Path(os.path.realpath(out))
        if key in self.input_paths or _file_id(out) in self.input_ids:
            raise InputError(f"{out}: this output path is one of the inputs, and inputs are never overwritten; "
                             "choose another -o or --ext")
        if key in self.written:
            raise InputError(f"{out}: already written in this run for {self.written[key]}; "
                             "rename one of the inputs, or use a folder with --recursive to mirror subfolders")
        if out.exists() or out.is_symlink():
            if out.is_dir():
                raise InputError(f"{out}: a folder has the output's name; choose another -o or --ext")
            if self.existing == "skip":
                return False
            if self.existing == "fail":
                raise InputError(f"{out}: output exists; pass --overwrite to replace it or --skip-existing to keep it")
        return True

    def write(self, out: Path, picture: Picture, source: Path) -> list[str]:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"{out.parent}: cannot create the output folder ({e.strerror or e})") from None
        try:
            notes = write_image(out, picture, quality=self.quality, overwrite=self.existing == "overwrite")
        except FileExistsError:
            raise InputError(f"{out}: output appeared while this batch ran; pass --overwrite to replace it") from None
        except OSError as e:
            reason = e.strerror or str(e)
            raise InputError(f"{out}: cannot write ({reason}); check the folder's permissions and free space") from None
        self.written[Path(os.path.realpath(out))] = str(source)
        return notes


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _process(job: _Job, writer: _Writer, model: NaLaSR | SelfEnsemble, dtype: torch.dtype, max_pixels: int) -> ItemResult:
    item = ItemResult(str(job.source))
    t0 = time.perf_counter()
    try:
        out = writer.path_for(job, None)
        if out is not None:  # decide before reading when the name is known: a skip costs nothing
            item.output = str(out)
            if not writer.wanted(out):
                item.status = "skipped"
                return item
        picture = read_image(job.source, max_pixels=max_pixels)
        item.input_size, item.pixels, item.notes = picture.size, picture.describe(), list(picture.notes)
        if out is None:
            out = writer.path_for(job, picture.format)
            assert out is not None
            item.output = str(out)
            if not writer.wanted(out):
                item.status = "skipped"
                return item
        sr, stats = upscale_pixels(picture.pixels, model, dtype)
        item.output_size = (sr.shape[1], sr.shape[0])
        item.model_ms, item.peak_memory_bytes = round(stats.model_ms, 3), stats.peak_bytes
        item.memory_kind, item.precision, item.fell_back = stats.memory_kind, stats.dtype, stats.fell_back
        item.cuda_graph = stats.cuda_graph
        if stats.fell_back:
            item.notes.append("half precision gave non-finite values: recomputed in fp32")
        item.notes += writer.write(out, Picture(sr, picture.format, picture.icc, picture.exif), job.source)
        item.status = "ok"
    except NalasrError as e:
        item.error = str(e)
    finally:
        item.total_ms = round((time.perf_counter() - t0) * 1e3, 3)
    return item
