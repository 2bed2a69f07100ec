"""Upscaling images in memory (:func:`upscale`, :func:`upscale_pixels`); files and folders: :mod:`.batch`.

Always the whole image in one forward pass: the attention is global, so there are no tiles and no seams.
Alpha is not shown to the network (it was trained on colour): it is upscaled separately, bicubic, and
re-attached.
"""

from __future__ import annotations

import functools
from typing import TypeVar

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from ..errors import InputError
from ..io.imageio import array_to_pil, icc_fits, pil_to_array
from ..io.weights import shipped_path
from ..model import NaLaSR
from .ensemble import SelfEnsemble, ensemble_of
from .infer import ForwardStats, run_model
from .loading import load_model
from .runtime import check_scale, resolve_device, resolve_dtype
from .staging import Deferred, HostStaging

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


def _colour(pixels: np.ndarray) -> tuple[np.ndarray, float]:
    """The (H, W, 3 or 1) channels the network sees (alpha left out) and the maximum value of the dtype."""
    maxval = 65535.0 if pixels.dtype == np.uint16 else 255.0
    return (pixels[..., :3] if pixels.shape[2] >= 3 else pixels[..., :1]), maxval


def lr_tensor(pixels: np.ndarray) -> tuple[Tensor, float]:
    """(H, W, C) uint8/uint16 → its colour (or gray) channels as (1, 3 or 1, H, W) float32 in [0, 1], and the
    maximum value they were divided by. An alpha channel is left out."""
    colour, maxval = _colour(pixels)
    return torch.from_numpy(np.ascontiguousarray(colour, dtype=np.float32) / maxval).permute(2, 0, 1)[None], maxval


def upscale_pixels(pixels: np.ndarray, model: NaLaSR | SelfEnsemble, dtype: torch.dtype) -> tuple[np.ndarray, ForwardStats]:
    """(H, W, C) uint8/uint16 → (s·H, s·W, C) of the same dtype, and the forward's timing and memory.

    Colour (or gray) goes through the model; an alpha channel is upscaled bicubic and re-attached. On CUDA the
    integers cross PCIe both ways and are converted on the device (a float image is 4x the bytes, and rounding
    a 4K float image on the CPU costs more than the forward); the values are bit for bit those of the CPU path.
    """
    c = pixels.shape[2]
    device = next(model.parameters()).device
    if device.type == "cuda":
        lr, maxval = device_lr_tensor(pixels, device)
    else:
        lr, maxval = lr_tensor(pixels)
    sr, stats = run_model(model, lr, dtype)
    out = quantise(sr[0], maxval, pixels.dtype)
    if c in (2, 4):
        alpha = _resize_alpha(pixels[..., c - 1], model.cfg.scale, maxval)
        out = np.concatenate([out, alpha[..., None]], axis=2)
    return out, stats


def upscale_deferred(pixels: np.ndarray, model: NaLaSR | SelfEnsemble, dtype: torch.dtype,
                     staging: HostStaging | None) -> tuple[Deferred, ForwardStats]:
    """:func:`upscale_pixels` that returns before the output is on the host where it can: 8-bit colour (or
    gray) on CUDA with ``staging`` copies back on a side stream while the caller starts the next image. Alpha and
    16-bit outputs, and every CPU one, come back ready. The values are those of :func:`upscale_pixels`."""
    device = next(model.parameters()).device
    if staging is None or device.type != "cuda" or pixels.dtype != np.uint8 or pixels.shape[2] in (2, 4):
        out, stats = upscale_pixels(pixels, model, dtype)
        return Deferred(out), stats
    lr, maxval = device_lr_tensor(pixels, device)
    sr, stats = run_model(model, lr, dtype)
    return staging.send_back(device_ints(sr[0], maxval)), stats


@functools.lru_cache(maxsize=8)
def _unit_table(maxval: float, device: torch.device) -> Tensor:
    """v → v / maxval for every integer v, computed as :func:`lr_tensor` computes it (float32 division on the
    CPU): a gather from it on the device gives exactly the CPU path's values (a CUDA division by a scalar is a
    multiplication by its reciprocal, which rounds differently)."""
    values = np.arange(int(maxval) + 1, dtype=np.float32) / maxval
    return torch.from_numpy(values).to(device)


def device_lr_tensor(pixels: np.ndarray, device: torch.device) -> tuple[Tensor, float]:
    """:func:`lr_tensor` with the integers copied to ``device`` and turned into floats there."""
    colour, maxval = _colour(pixels)
    # uint16 has few CUDA ops: widen on the host (still half the bytes of float32)
    host = torch.from_numpy(np.ascontiguousarray(colour, dtype=np.int32 if maxval > 255 else np.uint8))
    ints = host.to(device, non_blocking=False).long()
    return _unit_table(maxval, device)[ints].permute(2, 0, 1)[None], maxval


def device_ints(sr: Tensor, maxval: float) -> Tensor:
    """(C, H, W) float in [0, 1] → (H, W, C) contiguous integers where the tensor lives (uint8 for maxval 255,
    else int32), rounded half to even (np.rint's rule): only integers cross to the host, already interleaved
    as encoders take them."""
    ints = torch.round(sr * maxval).permute(1, 2, 0)
    return ints.to(torch.uint8 if maxval <= 255 else torch.int32).contiguous()


def quantise(sr: Tensor, maxval: float, dtype: np.dtype) -> np.ndarray:
    """(C, H, W) float in [0, 1] on any device → (H, W, C) host integers of ``dtype`` (see :func:`device_ints`)."""
    return device_ints(sr, maxval).cpu().numpy().astype(dtype, copy=False)


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
