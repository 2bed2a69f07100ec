"""Scoring a model (or bicubic) on benchmark sets with the standard protocol (docs/design.md §4).

Two entry points:
- :func:`evaluate`: sets by name or folder → an :class:`EvalReport` (per-image PSNR/SSIM, latency, peak
  memory, means, and the protocol), what ``nalasr eval`` prints.
- :func:`prepare_set` once + :func:`quick_score` every K steps: the trainer's validation. HR is decoded
  and the LR made once; LR tensors and the HR planes stay on the device, so a call is forwards plus a
  little float64 arithmetic there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
import torch
from PIL import Image
from torch import Tensor, nn

from . import protocol as P
from .datasets import BadFile, EvalSet, read_image, resolve_set, short_reason
from ..errors import DatasetError, InputError, WeightsError
from ..io.fsutil import atomic_write_with, writable_folder
from ..io.imageio import DEFAULT_MAX_PIXELS
from ..inference.ensemble import SelfEnsemble, ensemble_of
from ..inference.infer import run_model
from ..inference.runtime import PeakMemory, check_scale, dtype_name, resolve_device, resolve_dtype, sync

SrFn = Callable[[Tensor], Tensor]  # (1, 3, h, w) float in [0, 1] on the device → (1, 3, s·h, s·w)
Model = Union[nn.Module, SrFn, str]  # a network, any function as above, or "bicubic"
ProgressFn = Callable[[str, int, int], None]  # (set name, images done, images in the set)


# ------------------------------------------------------------------------------------------ prepared sets


@dataclass
class PreparedImage:
    name: str
    hr: np.ndarray  # uint8 (H, W[, 3]), cropped per the protocol
    lr: np.ndarray  # uint8 (H/s, W/s[, 3])
    lr_t: Tensor  # (1, C, H/s, W/s) float32 in [0, 1] on the device, C ∈ {1, 3}
    hr_plane: Tensor  # (H, W) float64 on the device: gray levels or Y (what is scored)


@dataclass
class PreparedSet:
    name: str
    folder: Path
    scale: int
    crop12: bool
    lr_source: str  # "computed" or the LR folder used
    images: list[PreparedImage]
    bad: list[BadFile] = field(default_factory=list)  # files of the set that could not be scored, and why


def _lr_from_folder(es: EvalSet, scale: int, hr_files: list[Path], hrs: list[np.ndarray],
                    max_pixels: int) -> tuple[list[np.ndarray], str] | None:
    files = es.lr_files(scale, hr_files)
    if files is None:
        return None
    lrs = []
    for f, hr in zip(files, hrs):
        try:
            lr = read_image(f, max_pixels=max_pixels)
        except InputError as e:  # the LR folder is part of the dataset: a broken LR file breaks the set
            raise DatasetError(f"{f}: {short_reason(f, e)}; fix or remove the LR folder {f.parent}") from None
        want = (hr.shape[0] // scale, hr.shape[1] // scale)
        if lr.shape[:2] != want:
            raise DatasetError(f"{f}: LR is {lr.shape[1]}x{lr.shape[0]} but HR {want[1] * scale}x{want[0] * scale} "
                               f"at x{scale} needs {want[1]}x{want[0]}; fix or remove the folder {f.parent}")
        if lr.ndim == 3 and hr.ndim == 2:  # an LR saved as RGB of a gray HR: keep it only if it is grey
            if not (np.array_equal(lr[..., 0], lr[..., 1]) and np.array_equal(lr[..., 0], lr[..., 2])):
                raise DatasetError(f"{f}: LR has colour but its HR is single-channel; fix or remove {f.parent}")
            lr = lr[..., 0]
        elif lr.ndim != hr.ndim:
            raise DatasetError(f"{f}: LR is single-channel but its HR has colour; fix or remove {f.parent}")
        lrs.append(lr)
    return lrs, str(files[0].parent)


def _decode_hr(files: list[Path], scale: int, crop12: bool,
               max_pixels: int) -> tuple[list[Path], list[np.ndarray], list[BadFile]]:
    """(files that decode, their cropped HR uint8 (H, W[, 3]), the files that do not and why)."""
    good, hrs, bad = [], [], []
    for f in files:
        try:
            picture = read_image(f, max_pixels=max_pixels)
            hr = P.eval_hr(picture, scale, crop12=crop12)
        except InputError as e:  # every decoding failure is one of these (nalasr.io.imageio): a bad file
            bad.append(BadFile(f.name, short_reason(f, e)))
            continue
        if min(hr.shape[:2]) < 2 * scale + 11:  # SSIM's 11x11 window must fit inside the cropped border
            h, w = picture.shape[:2]
            bad.append(BadFile(f.name, f"{w}x{h} ({hr.shape[1]}x{hr.shape[0]} after cropping to a multiple of "
                                       f"{scale}) is too small to score at x{scale}: it needs {2 * scale + 11} pixels a side"))
            continue
        good.append(f)
        hrs.append(hr)
    return good, hrs, bad


def prepare_set(spec: str | os.PathLike | EvalSet, scale: int, *, data_root: str | os.PathLike | None = None,
                device: str | torch.device = "cpu", crop12: bool = False,
                max_pixels: int = DEFAULT_MAX_PIXELS) -> PreparedSet:
    """Decode a set's HR, crop it, and make (or read) its LR, once.

    A file that cannot be scored (not decodable, 16-bit, over ``max_pixels``, too small) is listed in
    ``bad`` with its reason, not scored; DatasetError when no file of the set can be scored.
    A precomputed LR folder (LR_bicubic/X{s}) is used when present and its sizes match; with ``crop12``
    the LR is always computed (precomputed LR belongs to the crop-to-scale HR).
    """
    check_scale(scale)
    dev = resolve_device(device)
    es = spec if isinstance(spec, EvalSet) else resolve_set(spec, data_root)
    files, hrs, bad = _decode_hr(es.files, scale, crop12, max_pixels)
    bad = sorted(es.bad + bad, key=lambda b: b.name)
    if not files:
        first = bad[0]
        raise DatasetError(f"{es.hr_dir}: none of its {len(bad)} image files can be scored ({first.name}: "
                           f"{first.reason}); fix or replace them")
    found = None if crop12 else _lr_from_folder(es, scale, files, hrs, max_pixels)
    if found is not None:
        lrs, source = found
    else:
        lrs, source = [P.make_lr(hr, scale, dev) for hr in hrs], "computed"
    images = []
    for f, hr, lr in zip(files, hrs, lrs):
        lr_t = torch.from_numpy(_chw(lr)).to(dev).float().div_(255)[None]
        images.append(PreparedImage(f.stem, hr, lr, lr_t, P.plane_t(torch.from_numpy(_chw(hr)).to(dev))))
    return PreparedSet(es.name, es.hr_dir, scale, crop12, source, images, bad)


def _chw(img: np.ndarray) -> np.ndarray:
    """uint8 (H, W[, C]) → (C, H, W), a contiguous writable copy (decoded images can be read-only)."""
    a = img[..., None] if img.ndim == 2 else img
    return np.array(a.transpose(2, 0, 1), order="C")


# ------------------------------------------------------------------------------------------- one image


@dataclass
class ImageScore:
    name: str
    psnr: float
    ssim: float
    ms: float  # the SR step alone (model forward, device synchronised; for bicubic the resize)
    peak_bytes: int  # peak memory growth during that step (runtime.PeakMemory)
    lr_size: tuple[int, int]  # (width, height)


def _apply_fn(fn: SrFn, lr: Tensor) -> Tensor:
    """A plain function always sees 3 channels: a gray LR is replicated and its output averaged back."""
    gray = lr.shape[1] == 1
    with torch.inference_mode():
        y = fn(lr.expand(-1, 3, -1, -1) if gray else lr).float()
    return (y.mean(1, keepdim=True) if gray else y).clamp(0, 1)


def _super_resolve(model: Model, img: PreparedImage, scale: int, dtype: torch.dtype,
                   device: torch.device) -> tuple[Tensor, float, int]:
    """(SR (1, C, H, W) float in [0, 1], ms, peak bytes) of one prepared image."""
    if isinstance(model, nn.Module):
        sr, stats = run_model(model, img.lr_t, dtype)
        return sr, stats.model_ms, stats.peak_bytes
    with PeakMemory(device) as mem:
        sync(device)
        t0 = time.perf_counter()
        if model == "bicubic":  # the protocol's baseline: float64 MATLAB upscale of the uint8 LR
            x = torch.from_numpy(_chw(img.lr)).to(device, torch.float64)[None]  # (1, C, h, w), exact uint8 values
            sr = P.imresize(x, scale=float(scale), size=(x.shape[-2] * scale, x.shape[-1] * scale)) / 255
        else:
            assert callable(model)
            sr = _apply_fn(model, img.lr_t)
        sync(device)
        ms = (time.perf_counter() - t0) * 1e3
    return sr.clamp(0, 1), ms, mem.peak_bytes


def _quantise(sr: Tensor) -> Tensor:
    """(1, C, H, W) float in [0, 1] → (C, H, W) uint8, rounded half up (step 4)."""
    return torch.floor(sr[0].to(torch.float64) * 255 + 0.5).clamp_(0, 255).to(torch.uint8)


def _score_image(model: Model, img: PreparedImage, scale: int, dtype: torch.dtype,
                 device: torch.device) -> tuple[ImageScore, Tensor]:
    sr, ms, peak = _super_resolve(model, img, scale, dtype, device)
    if tuple(sr.shape[-2:]) != img.hr.shape[:2]:
        raise InputError(f"the model made {sr.shape[-1]}x{sr.shape[-2]} from {img.name}'s "
                         f"{img.lr.shape[1]}x{img.lr.shape[0]} LR, not x{scale}; is it a x{scale} model?")
    sr8 = _quantise(sr)
    plane = P.plane_t(sr8.to(img.hr_plane.device))
    if plane.device.type == "cpu":  # numpy arrays: skimage's SSIM beats torch's float64 convolution on CPU
        c = scale
        a, b = plane[c:-c, c:-c].numpy(), img.hr_plane[c:-c, c:-c].numpy()
        p, s = P.psnr(a, b), P.ssim(a, b)
    else:
        p, s = P.score_planes(plane, img.hr_plane, scale)
    h, w = img.lr.shape[:2]
    return ImageScore(img.name, p, s, ms, peak, (w, h)), sr8


def quick_score(model: Model, prepared: PreparedSet, dtype: torch.dtype = torch.float32) -> tuple[float, float]:
    """Mean (PSNR, SSIM) of ``model`` on a prepared set — the trainer's every-K-steps validation.

    ``model``: an nn.Module called as ``model(x)`` (through infer.run_model; it is put in eval mode and
    its train/eval state restored), or any ``fn(x)`` (e.g. ``lambda x: net(x, scale)``). run_model casts
    a module to ``dtype``: keep fp32 for a model being trained, or pass a function that autocasts.
    """
    device = prepared.images[0].lr_t.device
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        scores = [_score_image(model, img, prepared.scale, dtype, device)[0] for img in prepared.images]
    finally:
        if was_training:
            assert isinstance(model, nn.Module)
            model.train()
    return float(np.mean([s.psnr for s in scores])), float(np.mean([s.ssim for s in scores]))


# ------------------------------------------------------------------------------------------- the report


@dataclass
class SetReport:
    name: str
    folder: str
    scale: int
    lr_source: str
    images: list[ImageScore]
    unscored: list[BadFile] = field(default_factory=list)  # image files the means leave out, and why
    ignored: list[str] = field(default_factory=list)  # files there that are no images by name or content (notes.txt)

    @property
    def files(self) -> int:
        """Image files of the set: the scored ones and the unscored."""
        return len(self.images) + len(self.unscored)

    @property
    def psnr(self) -> float:
        return float(np.mean([i.psnr for i in self.images]))

    @property
    def ssim(self) -> float:
        return float(np.mean([i.ssim for i in self.images]))

    @property
    def ms(self) -> float:
        return float(np.mean([i.ms for i in self.images]))

    @property
    def peak_bytes(self) -> int:
        return max(i.peak_bytes for i in self.images)


# How many unscored files the one-line error names before "and N more".
_NAMED = 3


class UnscoredFiles(DatasetError):
    """Some image files of the sets could not be scored (exit 4); ``report`` holds what was scored, for a caller
    that shows it before failing."""

    def __init__(self, message: str, report: EvalReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class EvalReport:
    model: str  # "nalasr (default)", "bicubic", or a function's name
    scale: int
    device: str
    precision: str
    weights: str | None
    protocol: dict[str, Any]
    sets: list[SetReport] = field(default_factory=list)
    skip_bad: bool = False  # unscored files were left out on request (--skip-bad)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for s, sd in zip(self.sets, d["sets"]):
            sd.update(psnr=s.psnr, ssim=s.ssim, ms=s.ms, peak_bytes=s.peak_bytes, scored=len(s.images), files=s.files)
        # every set's unscored files in one list, so a script need not walk the sets to know the run was short
        d["unscored"] = [{"set": s.name, **asdict(b)} for s in self.sets for b in s.unscored]
        return d

    def rows(self) -> list[dict[str, Any]]:
        """Flat rows (one per image, one per unscored file, then one 'mean' row per set) for CSV."""
        out = []
        common = {"scale": self.scale, "model": self.model, "precision": self.precision, "device": self.device}
        for s in self.sets:
            for i in s.images:
                out.append({"set": s.name, "image": i.name, **common, "psnr": round(i.psnr, 4),
                            "ssim": round(i.ssim, 6), "ms": round(i.ms, 3), "peak_mib": round(i.peak_bytes / 2**20, 2),
                            "images": 1, "error": ""})
            for b in s.unscored:
                out.append({"set": s.name, "image": b.name, **common, "psnr": "", "ssim": "", "ms": "",
                            "peak_mib": "", "images": 0, "error": b.reason})
            out.append({"set": s.name, "image": "mean", **common, "psnr": round(s.psnr, 4),
                        "ssim": round(s.ssim, 6), "ms": round(s.ms, 3), "peak_mib": round(s.peak_bytes / 2**20, 2),
                        "images": len(s.images), "error": ""})
        return out

    def unscored_error(self) -> UnscoredFiles | None:
        """The one-line error for files the means leave out (None when every file was scored)."""
        bad = [(s, b) for s in self.sets for b in s.unscored]
        if not bad:
            return None
        named = "; ".join(f"{s.name}/{b.name}: {b.reason}" for s, b in bad[:_NAMED])
        more = f"; and {len(bad) - _NAMED} more" if len(bad) > _NAMED else ""
        return UnscoredFiles(f"{len(bad)} image file{'s' * (len(bad) > 1)} could not be scored ({named}{more}): fix or "
                             "remove them, or pass --skip-bad to score the rest", self)


def _model_name(model: Model) -> str:
    if isinstance(model, str):
        return model
    if isinstance(model, SelfEnsemble):
        return f"{_model_name(model.model)}, x8 self-ensemble"
    if isinstance(model, nn.Module):
        cfg = getattr(model, "cfg", None)
        if cfg is not None:
            from ..model import variant_of

            return f"nalasr ({variant_of(cfg) or 'custom'})"
        return type(model).__name__
    return getattr(model, "__name__", "function")


def _check_save_dir(save_dir: str | os.PathLike | None, sets: list[EvalSet], scale: int) -> None:
    """Create the folder of each set's SR images, or a one-line InputError: a --save-dir that is a file, or where a
    set's folder would be a file (save_dir/Set5), or cannot be written, fails before any work."""
    if save_dir is None:
        return
    writable_folder(save_dir, "--save-dir")
    for es in sets:
        writable_folder(Path(save_dir) / es.name / f"x{scale}", "--save-dir")


def _save(sr8: Tensor, path: Path) -> None:
    a = sr8.cpu().numpy().transpose(1, 2, 0)
    img = Image.fromarray(a[..., 0] if a.shape[2] == 1 else a)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(path, lambda tmp: img.save(tmp, format="PNG"))


def evaluate(model: Model, sets: list[str | os.PathLike], scale: int, *,
             data_root: str | os.PathLike | None = None, device: str | torch.device = "auto",
             precision: str = "auto", save_dir: str | os.PathLike | None = None, crop12: bool = False,
             progress: ProgressFn | None = None, weights: str | None = None,
             self_ensemble: bool = False, skip_bad: bool = False,
             max_pixels: int = DEFAULT_MAX_PIXELS) -> EvalReport:
    """Score ``model`` on each set (a name such as ``urban100`` or a folder of HR images) at ``scale``.

    ``model``: an nn.Module (moved to ``device``; fed LR float in [0, 1] through infer.run_model in
    ``precision``), any ``fn(lr) -> sr`` on (1, 3, h, w) tensors, or ``"bicubic"`` (the baseline row).
    Whole images only. ``save_dir``: the uint8 SR images go to save_dir/<set>/x<scale>/<name>.png.
    ``self_ensemble``: an nn.Module is averaged over the 8 flips/rotations (:class:`~nalasr.inference.ensemble.SelfEnsemble`).

    A file of a set that cannot be scored (not decodable, unreadable, 16-bit, over ``max_pixels``, too small) is
    listed in its SetReport's ``unscored`` with the reason, and the means are over the others. Unless
    ``skip_bad``, the whole run then ends in :class:`UnscoredFiles` (a DatasetError, exit 4) naming them, raised
    after every set was scored; its ``report`` holds the report, so a caller can still show it.
    """
    check_scale(scale)
    if not sets:
        raise InputError("no set given: name one (set5, set14, bsd100, urban100, ...) or a folder of HR images")
    dev = resolve_device(device)
    dtype = resolve_dtype(precision, dev) if isinstance(model, nn.Module) else torch.float64
    if isinstance(model, nn.Module):
        cfg = getattr(model, "cfg", None)
        if cfg is not None and getattr(cfg, "scale", scale) != scale:
            raise WeightsError(f"the model is for x{cfg.scale}, not x{scale}; pick --scale {cfg.scale} or other weights")
        model = model.to(dev).eval()
        if self_ensemble:
            model = ensemble_of(model)
    elif self_ensemble:
        raise InputError("self-ensemble applies to a network, not to bicubic or a plain function")
    resolved = [resolve_set(s, data_root) for s in sets]  # every name checked before any work
    _check_save_dir(save_dir, resolved, scale)
    proto = dict(P.PROTOCOL)
    if crop12:
        proto["hr_crop"] = "HR cropped to a multiple of 12 for every scale (old MATLAB scripts)"
    report = EvalReport(_model_name(model), scale, str(dev), dtype_name(dtype) if dtype != torch.float64 else "fp64",
                        weights, proto, skip_bad=skip_bad)
    warmed = False
    for es in resolved:
        prep = prepare_set(es, scale, device=dev, crop12=crop12, max_pixels=max_pixels)
        if isinstance(model, nn.Module) and dev.type == "cuda" and not warmed:
            run_model(model, prep.images[0].lr_t, dtype)  # first-call setup (cuDNN, kernels) is not latency
            warmed = True
        rows = []
        for k, img in enumerate(prep.images):
            row, sr8 = _score_image(model, img, scale, dtype, dev)
            rows.append(row)
            if save_dir is not None:
                _save(sr8, Path(save_dir) / prep.name / f"x{scale}" / f"{img.name}.png")
            if progress:
                progress(prep.name, k + 1, len(prep.images))
        report.sets.append(SetReport(prep.name, str(prep.folder), scale, prep.lr_source, rows, prep.bad,
                                     [p.name for p in es.skipped]))
    error = None if skip_bad else report.unscored_error()
    if error is not None:
        raise error
    return report


def evaluate_named(sets: list[str | os.PathLike], scale: int, *, model: str = "nalasr",
                   weights: str | os.PathLike | None = None, variant: str | None = None,
                   device: str | torch.device = "auto", precision: str = "auto",
                   data_root: str | os.PathLike | None = None, save_dir: str | os.PathLike | None = None,
                   crop12: bool = False, self_ensemble: bool = False,
                   progress: ProgressFn | None = None, skip_bad: bool = False,
                   max_pixels: int = DEFAULT_MAX_PIXELS) -> EvalReport:
    """``nalasr eval``: :func:`evaluate` of the shipped network (or ``weights``), or of ``model="bicubic"``.

    Every argument is checked (the scale, the set names) before any weights are loaded."""
    check_scale(scale)
    if model not in ("nalasr", "bicubic"):
        raise InputError(f"--model must be nalasr or bicubic, got {model!r}")
    if model == "bicubic" and (weights is not None or variant is not None or self_ensemble):
        raise InputError("--weights/--variant/--self-ensemble do not apply to --model bicubic; drop them or use "
                         "--model nalasr")
    resolved = [resolve_set(s, data_root) for s in sets]  # a bad name fails before weights are loaded
    _check_save_dir(save_dir, resolved, scale)  # so does a --save-dir that is a file or cannot be written
    net: Model = "bicubic"
    if model == "nalasr":
        from ..inference.loading import load_model

        net = load_model(scale, variant, weights, device)
    return evaluate(net, list(sets), scale, data_root=data_root, device=device, precision=precision,
                    save_dir=save_dir, crop12=crop12, progress=progress,
                    weights=str(weights) if weights else None, self_ensemble=self_ensemble, skip_bad=skip_bad,
                    max_pixels=max_pixels)
