"""Weights files: safetensors tensors plus the config and a card in the header metadata.

A weights file rebuilds its model by itself (spandrel's rule: loading never guesses). Nothing is ever
unpickled. Every failure is a :class:`WeightsError` whose one-line message names the file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .. import settings
from ..errors import WeightsError
from .fsutil import atomic_path
from ..model import DEFAULT_VARIANT, NaLaSR, NaLaSRConfig

FORMAT = "nalasr-weights/1"
ARCHITECTURE = "NaLaSR"
# The repo's weights/ folder (shipped weights; found without network). NALASR_WEIGHTS overrides it.
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "weights"  # nalasr/io/ → the checkout


def shipped_dir() -> Path:
    """NALASR_WEIGHTS, else the checkout's weights/ (editable install), else the installed copy."""
    env = settings.get().weights
    if env is not None:
        return env
    installed = Path(sys.prefix) / "share" / "nalasr" / "weights"
    return SHIPPED_DIR if SHIPPED_DIR.is_dir() or not installed.is_dir() else installed


def shipped_name(variant: str, scale: int) -> str:
    return f"nalasr_{variant}_x{scale}.safetensors"


def shipped_path(scale: int, variant: str | None = None) -> Path:
    """The shipped weights file for a scale and variant; WeightsError when there is none."""
    variant = variant or DEFAULT_VARIANT
    path = shipped_dir() / shipped_name(variant, scale)
    if not path.is_file():
        have = sorted(p.name for p in shipped_dir().glob("nalasr_*.safetensors")) if shipped_dir().is_dir() else []
        raise WeightsError(
            f"no shipped weights for variant {variant!r} at x{scale} in {shipped_dir()}"
            f" (have: {', '.join(have) or 'none'}); pass --weights PATH"
        )
    return path


def save_weights(model: NaLaSR, path: str | os.PathLike, card: dict[str, Any] | None = None) -> Path:
    """Write ``model``'s weights with its config and ``card`` (atomically). Tensors are stored as float32."""
    path = Path(path)
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
    meta = {
        "format": FORMAT,
        "architecture": ARCHITECTURE,
        "config": json.dumps(model.cfg.to_dict(), sort_keys=True),
        "card": json.dumps(card or {}, sort_keys=True),
    }
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=meta)
    return path


def read_header(path: str | os.PathLike) -> tuple[NaLaSRConfig, dict[str, Any]]:
    """(config, card) of a weights file, reading the header only."""
    path = Path(path)
    meta = _metadata(path)
    return _config(path, meta), _card(path, meta)


def load_weights(
    path: str | os.PathLike, *, scale: int | None = None, device: str | torch.device = "cpu"
) -> NaLaSR:
    """Build the model a weights file describes and load it strictly.

    ``scale``, when given, must match the file's. The card is attached as ``model.card``.
    """
    path = Path(path)
    meta, shapes = _header(path)
    cfg = _config(path, meta)
    if scale is not None and cfg.scale != scale:
        raise WeightsError(f"{path}: these weights are for x{cfg.scale}, not x{scale}; pick --scale {cfg.scale} or other weights")
    card = _card(path, meta)
    _check_tensors(path, cfg, shapes)  # names and shapes, from the header alone: nothing allocated yet
    try:
        state = load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightsError(f"{path}: corrupt or truncated weights file ({_first_line(e)})") from None
    bad = next((k for k, t in state.items() if not (t.is_floating_point() and torch.isfinite(t).all())), None)
    if bad is not None:
        raise WeightsError(f"{path}: corrupt weights file (tensor {bad} is not finite floating point)")
    model = NaLaSR(cfg)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise WeightsError(f"{path}: tensors do not match the config ({_first_line(e)})") from None
    model.card = card  # type: ignore[attr-defined]
    return model.to(device).eval()


# ----------------------------------------------------------------------------------------------- helpers


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def _metadata(path: Path) -> dict[str, str]:
    return _header(path)[0]


def _header(path: Path) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    """(metadata, {tensor name: shape}) from the header; checks the file is NaLaSR weights."""
    if not path.exists():
        raise WeightsError(f"{path}: weights file not found")
    if not path.is_file():
        raise WeightsError(f"{path}: not a file")
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightsError(f"{path}: not a readable safetensors file ({_first_line(e)})") from None
    if meta.get("format") != FORMAT or meta.get("architecture") != ARCHITECTURE:
        arch = meta.get("architecture") or "unknown"
        raise WeightsError(f"{path}: not NaLaSR weights (architecture {arch!r}, format {meta.get('format')!r})")
    return meta, shapes


def _config(path: Path, meta: dict[str, str]) -> NaLaSRConfig:
    try:
        d = json.loads(meta["config"])
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        return NaLaSRConfig.from_dict(d)
    except (KeyError, ValueError, TypeError, ArithmeticError) as e:
        raise WeightsError(f"{path}: bad config in the header ({_first_line(e)})") from None


def _check_tensors(path: Path, cfg: NaLaSRConfig, shapes: dict[str, tuple[int, ...]]) -> None:
    """The file's tensor names and shapes are exactly those of NaLaSR(cfg), checked on the meta device.

    A header may claim any network: a block count above the file's tensor count cannot match (and would be
    slow to build even on the meta device), and nothing of the claimed size is allocated.
    """
    if cfg.groups * cfg.blocks > len(shapes):
        raise WeightsError(f"{path}: the config's {cfg.groups}x{cfg.blocks} blocks cannot fit in {len(shapes)} tensors")
    try:
        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in NaLaSR(cfg).state_dict().items()}
    except Exception as e:  # noqa: BLE001 (any failure to build is a bad config)
        raise WeightsError(f"{path}: bad config in the header ({type(e).__name__}: {_first_line(e)})") from None
    missing, unexpected = set(expected) - set(shapes), set(shapes) - set(expected)
    if missing or unexpected:
        raise WeightsError(
            f"{path}: tensors do not match the NaLaSR config in the file"
            f" (missing {len(missing)}, unexpected {len(unexpected)}, e.g. {sorted(missing | unexpected)[0]})"
        )
    wrong = next((k for k in expected if expected[k] != shapes[k]), None)
    if wrong is not None:
        raise WeightsError(
            f"{path}: tensor shapes do not match the config ({wrong}: {list(shapes[wrong])} in the file,"
            f" {list(expected[wrong])} for the config)"
        )


def _card(path: Path, meta: dict[str, str]) -> dict[str, Any]:
    try:
        card = json.loads(meta.get("card", "{}"))
    except ValueError:
        raise WeightsError(f"{path}: bad card in the header") from None
    return card if isinstance(card, dict) else {}
