"""The standard SR evaluation protocol (docs/design.md §4), in one place for eval, training and benchmarks.

- :func:`imresize`: MATLAB ``imresize(..., 'bicubic')`` (cubic a = -0.5, antialiased when shrinking,
  symmetric borders, output ceil(n·s)) as two dense 1-D weight matrices, batched, on any device.
- :func:`modcrop`, :func:`rgb_to_y` (MATLAB ``rgb2ycbcr`` Y, unrounded), :func:`psnr`, :func:`ssim`.
- :func:`make_lr`: the LR the evaluation feeds a model; :func:`bicubic_up`: the baseline's SR.
- :func:`score`: steps 4–6 incl. the gray rule and the border crop.

The LR convention (pinned by tests/test_protocol.py against the published bicubic numbers): the LR is
the float64 MATLAB downscale of the uint8 HR *rounded to uint8*, exactly as the LR images the field's
benchmark folders (``LR_bicubic/X4``) hold; the bicubic baseline upscales that uint8 LR in float and
rounds the result to uint8 (step 4). The alternatives miss the published numbers: an unrounded float
LR gives Set14 x2 30.252 (published 30.24) and x4 26.010 (26.00); rounding after each 1-D pass (what
MATLAB's imresize does to uint8 input) gives Set5 x2 33.673 (33.68).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

# MATLAB's kernel support for bicubic; widened by 1/scale when shrinking with antialiasing.
_KERNEL_WIDTH = 4.0

PROTOCOL = {
    "lr": "MATLAB bicubic imresize (a=-0.5, antialiased), float64, rounded to uint8",
    "sr": "clamp to [0,1], round to uint8",
    "channel": "Y of BT.601 (MATLAB rgb2ycbcr, unrounded); single-channel HR scored in gray levels",
    "hr_crop": "HR cropped to a multiple of the scale (top-left)",
    "border": "scale pixels cropped from every border",
    "psnr": "10*log10(255^2/MSE)",
    "ssim": "Gaussian 11x11 sigma 1.5, C1=(0.01*255)^2, C2=(0.03*255)^2, valid region",
}


# ------------------------------------------------------------------------------------------ imresize


def _cubic(x: np.ndarray) -> np.ndarray:
    """Keys' cubic with a = -0.5 (MATLAB's ``cubic``)."""
    ax = np.abs(x)
    ax2, ax3 = ax * ax, ax * ax * ax
    return (1.5 * ax3 - 2.5 * ax2 + 1.0) * (ax <= 1) + (-0.5 * ax3 + 2.5 * ax2 - 4.0 * ax + 2.0) * (
        (ax > 1) & (ax <= 2)
    )


def resize_matrix(in_len: int, out_len: int, scale: float) -> np.ndarray:
    """(out_len, in_len) float64 matrix M with ``out = M @ in`` along one axis — MATLAB's ``contributions``.

    Symmetric borders are folded into M: an out-of-range tap adds its weight to the mirrored input pixel
    (MATLAB's ``aux = [1:n, n:-1:1]`` index map), so M's rows still sum to 1.
    """
    antialias = scale < 1
    width = _KERNEL_WIDTH / scale if antialias else _KERNEL_WIDTH
    x = np.arange(1, out_len + 1, dtype=np.float64)
    u = x / scale + 0.5 * (1 - 1 / scale)  # output pixel centre in input coordinates (1-based)
    left = np.floor(u - width / 2)
    taps = int(math.ceil(width)) + 2
    idx = left[:, None] + np.arange(taps)[None, :]  # 1-based input indices, may fall outside
    d = u[:, None] - idx
    w = scale * _cubic(scale * d) if antialias else _cubic(d)
    w = w / w.sum(axis=1, keepdims=True)
    aux = np.concatenate([np.arange(in_len), np.arange(in_len - 1, -1, -1)])
    src = aux[np.mod(idx.astype(np.int64) - 1, 2 * in_len)]
    m = np.zeros((out_len, in_len), dtype=np.float64)
    np.add.at(m, (np.repeat(np.arange(out_len), taps), src.ravel()), w.ravel())
    return m


@lru_cache(maxsize=32)  # training reuses a few shapes; an (n, m) float64 matrix on a GPU is not free
def _matrix(in_len: int, out_len: int, scale: float, device: torch.device, dtype: torch.dtype) -> Tensor:
    return torch.from_numpy(resize_matrix(in_len, out_len, scale)).to(device=device, dtype=dtype)


def _out_len(n: int, scale: float) -> int:
    # ceil(n·s) as MATLAB, but immune to n·(1/s) landing a hair above an integer (e.g. 3·(1/3)·k).
    return max(1, int(math.ceil(n * scale - 1e-9)))


def imresize(x: Tensor, scale: float | None = None, size: tuple[int, int] | None = None) -> Tensor:
    """MATLAB-style bicubic resize of ``x``: (..., H, W) float → (..., H', W'), same device and dtype.

    Give ``scale`` (H' = ceil(H·scale)) or ``size`` = (H', W') (the per-axis scale is H'/H); with both,
    ``scale`` sets the kernel and ``size`` the output. No rounding or clamping: that is the caller's step.
    Rows are resized first, then columns (MATLAB's order for equal scales); both are linear, so the
    order only changes the last float bits.
    """
    if not x.is_floating_point():
        raise TypeError(f"imresize needs a float tensor, got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"imresize needs (..., H, W), got shape {tuple(x.shape)}")
    h, w = x.shape[-2:]
    if scale is None and size is None:
        raise ValueError("imresize needs scale or size")
    if size is None:
        assert scale is not None
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        size = (_out_len(h, scale), _out_len(w, scale))
    sh, sw = (scale, scale) if scale is not None else (size[0] / h, size[1] / w)
    mh = _matrix(h, size[0], float(sh), x.device, x.dtype)  # (H', H)
    mw = _matrix(w, size[1], float(sw), x.device, x.dtype)  # (W', W)
    return torch.matmul(torch.matmul(mh, x), mw.transpose(0, 1))


# -------------------------------------------------------------------------------- image-level helpers


def modcrop(img: np.ndarray, scale: int) -> np.ndarray:
    """Crop (H, W[, C]) to H, W multiples of ``scale``, keeping the top-left corner."""
    h, w = img.shape[:2]
    return img[: h - h % scale, : w - w % scale, ...]


def rgb_to_y(img: np.ndarray) -> np.ndarray:
    """(H, W, 3) RGB in [0, 255] → (H, W) float64 Y of MATLAB ``rgb2ycbcr`` (range [16, 235]), unrounded."""
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"rgb_to_y needs (H, W, 3), got shape {img.shape}")
    rgb = img.astype(np.float64)
    return 16.0 + (65.481 * rgb[..., 0] + 128.553 * rgb[..., 1] + 24.966 * rgb[..., 2]) / 255.0


def _to_chw(img: np.ndarray) -> Tensor:
    """(H, W) or (H, W, C) uint8 → (C, H, W) float64 in [0, 255]."""
    a = (img[..., None] if img.ndim == 2 else img).astype(np.float64)  # a writable copy for torch
    return torch.from_numpy(a.transpose(2, 0, 1))


def _to_uint8(t: Tensor, like_ndim: int) -> np.ndarray:
    """(C, H, W) float in [0, 255] → uint8 (H, W[, C]), rounded half away from zero as MATLAB."""
    a = t.detach().to("cpu", torch.float64).clamp(0, 255).numpy()
    a = np.floor(a + 0.5).astype(np.uint8).transpose(1, 2, 0)
    return a[..., 0] if like_ndim == 2 else a


def make_lr(hr: np.ndarray, scale: int, device: torch.device | None = None) -> np.ndarray:
    """The evaluation LR of ``hr``: uint8 (H, W[, C]) with H, W multiples of ``scale`` → uint8 (H/s, W/s[, C]).

    float64 MATLAB bicubic downscale by 1/scale, rounded to uint8 (what ``LR_bicubic`` folders hold).
    ``device``: where the float64 resize runs (a GPU makes Urban100 fast); the result is the same.
    """
    h, w = hr.shape[:2]
    if h % scale or w % scale:
        raise ValueError(f"HR {w}x{h} is not a multiple of the scale {scale}: modcrop it first")
    lr = imresize(_to_chw(hr).to(device or "cpu"), scale=1.0 / scale, size=(h // scale, w // scale))
    return _to_uint8(lr, hr.ndim)


def bicubic_up(lr: np.ndarray, scale: int, device: torch.device | None = None) -> np.ndarray:
    """The bicubic baseline's SR: uint8 (h, w[, C]) → uint8 (s·h, s·w[, C]), float64 MATLAB upscale, rounded."""
    h, w = lr.shape[:2]
    sr = imresize(_to_chw(lr).to(device or "cpu"), scale=float(scale), size=(h * scale, w * scale))
    return _to_uint8(sr, lr.ndim)


# ----------------------------------------------------------------------------------------- metrics


def psnr(a: np.ndarray | Tensor, b: np.ndarray | Tensor) -> float:
    """PSNR in dB of two same-shape arrays (numpy, or tensors on any device) in [0, 255]; inf when identical."""
    if a.shape != b.shape:
        raise ValueError(f"psnr needs equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        x = torch.as_tensor(a).to(torch.float64)
        mse = float(((x - torch.as_tensor(b).to(device=x.device, dtype=torch.float64)) ** 2).mean())
    else:
        mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(255.0**2 / mse)


def _gauss_window(device: torch.device) -> Tensor:
    """(11,) float64 normalised Gaussian, σ = 1.5 (the separable form of MATLAB's fspecial('gaussian', 11, 1.5))."""
    r = torch.arange(-5, 6, dtype=torch.float64, device=device)
    g = torch.exp(-(r * r) / (2 * 1.5**2))
    return g / g.sum()


def ssim(a: np.ndarray | Tensor, b: np.ndarray | Tensor) -> float:
    """Wang's SSIM of two (H, W) arrays in [0, 255]: Gaussian 11×11 σ 1.5, C1/C2 for 255, valid region.

    numpy arrays: skimage ``structural_similarity(gaussian_weights=True, sigma=1.5,
    use_sample_covariance=False, data_range=255)``, which is exactly that. Tensors: the same in torch,
    float64 separable convolution on the tensors' device (eval's GPU path; on CPU torch's float64
    convolution is slower than skimage). tests/test_protocol.py holds both to Wang's formula within 1e-9.
    """
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"ssim needs two equal (H, W) arrays, got {tuple(a.shape)} and {tuple(b.shape)}")
    if min(a.shape) < 11:
        raise ValueError(f"ssim needs images of at least 11x11 pixels, got {tuple(a.shape)}")
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        x = torch.as_tensor(a).to(torch.float64)
        y = torch.as_tensor(b).to(device=x.device, dtype=torch.float64)
        g = _gauss_window(x.device)
        maps = torch.stack([x, y, x * x, y * y, x * y])[:, None]  # (5, 1, H, W)
        maps = torch.nn.functional.conv2d(maps, g.view(1, 1, 11, 1))
        maps = torch.nn.functional.conv2d(maps, g.view(1, 1, 1, 11))[:, 0]  # (5, H-10, W-10): valid region
        mu1, mu2, e11, e22, e12 = maps
        s11, s22, s12 = e11 - mu1 * mu1, e22 - mu2 * mu2, e12 - mu1 * mu2
        c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
        m = ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (s11 + s22 + c2))
        return float(m.mean())
    from skimage.metrics import structural_similarity

    return float(structural_similarity(
        np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
        gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255.0,
    ))


def is_gray(img: np.ndarray) -> bool:
    """True for a single-channel image ((H, W) or (H, W, 1)): scored in its own gray levels."""
    return img.ndim == 2 or img.shape[2] == 1


def score(sr: np.ndarray, hr: np.ndarray, scale: int, device: torch.device | None = None) -> tuple[float, float]:
    """(PSNR, SSIM) of uint8 ``sr`` against uint8 ``hr`` (same shape, (H, W[, C])) by the protocol.

    Single-channel HR: gray levels as they are. Three channels (grey-looking ones too): MATLAB Y.
    Then ``scale`` pixels are cropped from every border. With ``device`` the float64 arithmetic runs in
    torch there (eval on a GPU); the result is the same to ~1e-12.
    """
    if sr.shape != hr.shape:
        raise ValueError(f"SR shape {sr.shape} differs from HR shape {hr.shape}")
    if is_gray(hr):
        a, b = sr.reshape(sr.shape[:2]).astype(np.float64), hr.reshape(hr.shape[:2]).astype(np.float64)
    else:
        a, b = rgb_to_y(sr), rgb_to_y(hr)
    if device is not None:
        a, b = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)  # type: ignore[assignment]
    if scale > 0:
        a, b = a[scale:-scale, scale:-scale], b[scale:-scale, scale:-scale]
    return psnr(a, b), ssim(a, b)


def plane_t(img: Tensor) -> Tensor:
    """The plane the protocol scores: (C, H, W) uint8-valued tensor → (H, W) float64 on its device.

    C = 1: the gray levels themselves; C = 3: MATLAB Y (as :func:`rgb_to_y`).
    """
    x = img.to(torch.float64)
    if x.shape[0] == 1:
        return x[0]
    return 16.0 + (65.481 * x[0] + 128.553 * x[1] + 24.966 * x[2]) / 255.0


def score_planes(sr: Tensor, hr: Tensor, scale: int) -> tuple[float, float]:
    """(PSNR, SSIM) of two (H, W) float64 planes from :func:`plane_t` (any device), ``scale`` px border cropped."""
    if sr.shape != hr.shape:
        raise ValueError(f"SR plane {tuple(sr.shape)} differs from HR plane {tuple(hr.shape)}")
    if scale > 0:
        sr, hr = sr[scale:-scale, scale:-scale], hr[scale:-scale, scale:-scale]
    return psnr(sr, hr), ssim(sr, hr)


def eval_hr(hr: np.ndarray, scale: int, *, crop12: bool = False) -> np.ndarray:
    """The HR an evaluation scores against: modcrop to ``scale``, or to 12 (old MATLAB scripts) with crop12."""
    return modcrop(hr, 12 if crop12 else scale)
