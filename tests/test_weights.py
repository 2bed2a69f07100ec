"""Weights format: safetensors + config + card; strict loading that never unpickles; one-line errors."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from nalasr import settings
import nalasr
from nalasr.errors import WeightsError
from nalasr.model import NaLaSR, config_for, create_model
from nalasr.io.weights import (
    ARCHITECTURE,
    FORMAT,
    load_weights,
    read_header,
    save_weights,
    shipped_dir,
    shipped_name,
    shipped_path,
)

CARD = {
    "architecture": "NaLaSR", "variant": "small", "scale": 2, "training_data": "DIV2K train (800)",
    "iterations": 1234, "results": {"Set5": {"psnr_y": 37.1, "ssim_y": 0.958}},
}


def _model(scale: int = 2, variant: str = "small", seed: int = 0, **overrides) -> NaLaSR:
    """A small model whose every parameter is random (a fresh one may have a zero upsampler)."""
    torch.manual_seed(seed)
    model = create_model(variant, scale, **overrides).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[NaLaSR, Path]:
    model = _model()
    path = tmp_path_factory.mktemp("w") / "nalasr_small_x2.safetensors"
    assert save_weights(model, path, card=CARD) == path
    return model, path


def _raises_weights_error(path: Path, fn=None, match: str | None = None) -> str:
    """Call fn (load_weights by default), expect a WeightsError naming the file in one line; the message."""
    with pytest.raises(WeightsError) as info:
        (fn or load_weights)(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    assert "\n" not in msg and len(msg) < 400, msg
    if match:
        assert match in msg, msg
    return msg


def _metadata(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="pt") as f:
        return f.metadata()


# ----------------------------------------------------------------------------------------- round trip


def test_round_trip_gives_identical_outputs(saved):
    model, path = saved
    loaded = load_weights(path, scale=2)
    assert isinstance(loaded, NaLaSR) and not loaded.training
    assert loaded.cfg == model.cfg
    x = torch.rand(1, 3, 7, 5, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    assert loaded.card == CARD
    for (name, a), (name_b, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert name == name_b and torch.equal(a, b)


def test_config_and_card_are_embedded(saved):
    model, path = saved
    meta = _metadata(path)
    assert meta["format"] == FORMAT and meta["architecture"] == ARCHITECTURE == "NaLaSR"
    assert json.loads(meta["config"]) == model.cfg.to_dict()
    assert json.loads(meta["card"]) == CARD
    cfg, card = read_header(path)
    assert cfg == model.cfg and card == CARD


def test_custom_config_round_trips(tmp_path):
    model = _model(3, "small", rope=True, alpha=20.0)
    path = save_weights(model, tmp_path / "custom.safetensors")
    loaded = load_weights(path)
    assert loaded.cfg == model.cfg and loaded.cfg.rope and loaded.cfg.alpha == 20.0
    assert loaded.card == {}
    x = torch.rand(1, 3, 4, 3)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))


def test_half_precision_model_is_saved_as_float32(tmp_path):
    model = _model().to(torch.bfloat16)
    path = save_weights(model, tmp_path / "bf16.safetensors")
    with safe_open(str(path), framework="pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}
    loaded = load_weights(path)
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert b.dtype == torch.float32 and torch.equal(a.float(), b)


def test_save_is_atomic_and_replaces(tmp_path):
    path = tmp_path / "w.safetensors"
    save_weights(_model(seed=1), path)
    save_weights(_model(seed=2), path, card={"iterations": 2})
    assert read_header(path)[1] == {"iterations": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.safetensors"]  # no temporary left behind


def test_load_to_device_and_scale_none(saved):
    _, path = saved
    model = load_weights(path, device="cpu")
    assert next(model.parameters()).device.type == "cpu"


# --------------------------------------------------------------------------------------------- errors


def test_wrong_scale(saved):
    _, path = saved
    msg = _raises_weights_error(path, lambda p: load_weights(p, scale=4))
    assert "x2" in msg and "x4" in msg


def test_missing_file(tmp_path):
    _raises_weights_error(tmp_path / "nope.safetensors", match="not found")
    _raises_weights_error(tmp_path / "nope.safetensors", read_header)


def test_directory_is_not_a_weights_file(tmp_path):
    folder = tmp_path / "dir.safetensors"
    folder.mkdir()
    _raises_weights_error(folder)


@pytest.mark.parametrize("metadata", [None, {"format": "pt"}, {"format": FORMAT, "architecture": "SwinIR"},
                                      {"architecture": "NaLaSR"}])
def test_another_architecture(tmp_path, saved, metadata):
    model, _ = saved
    path = tmp_path / "other.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path), metadata=metadata)
    _raises_weights_error(path, match="not NaLaSR")
    _raises_weights_error(path, read_header)


def test_truncated_file(tmp_path, saved):
    _, path = saved
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 1, 100, 8, 3, 0):
        bad = tmp_path / f"cut{cut}.safetensors"
        bad.write_bytes(data[:cut])
        _raises_weights_error(bad)


def test_corrupt_bytes(tmp_path, saved):
    _, path = saved
    data = bytearray(path.read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    variants = {
        "garbage": os.urandom(4096),
        "text": b"hello, I am not a weights file\n" * 10,
        "header-bytes": bytes(data[:8]) + b"\xff" * 64 + bytes(data[72:]),
        "header-length": (header_len + 13).to_bytes(8, "little") + bytes(data[8:]),
        "huge-header-length": (2**62).to_bytes(8, "little") + bytes(data[8:]),
    }
    for name, blob in variants.items():
        bad = tmp_path / f"{name}.safetensors"
        bad.write_bytes(blob)
        _raises_weights_error(bad)


def _write_with_meta(path: Path, tensors: dict[str, torch.Tensor], config: dict | str, card: str = "{}") -> Path:
    meta = {"format": FORMAT, "architecture": ARCHITECTURE, "card": card,
            "config": config if isinstance(config, str) else json.dumps(config)}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=meta)
    return path


def test_shape_mismatch(tmp_path, saved):
    model, _ = saved
    state = dict(model.state_dict())
    name = "trunk.head.weight"
    state[name] = torch.zeros(state[name].shape[0] + 1, *state[name].shape[1:])
    path = _write_with_meta(tmp_path / "shape.safetensors", state, model.cfg.to_dict())
    _raises_weights_error(path, match="shape")
    # the tensors of the small variant under the default variant's config
    path = _write_with_meta(tmp_path / "variant.safetensors", model.state_dict(), config_for("default", 2).to_dict())
    _raises_weights_error(path)


def test_missing_and_unexpected_tensors(tmp_path, saved):
    model, _ = saved
    state = dict(model.state_dict())
    state.pop("upsampler.0.bias")
    _raises_weights_error(_write_with_meta(tmp_path / "missing.safetensors", state, model.cfg.to_dict()),
                          match="missing 1")
    state = {**model.state_dict(), "extra.weight": torch.zeros(2)}
    _raises_weights_error(_write_with_meta(tmp_path / "extra.safetensors", state, model.cfg.to_dict()),
                          match="unexpected 1")


@pytest.mark.parametrize("config", [
    "not json", "[1, 2]", '"a string"', "{}",
    {"scale": 5}, {"wat": 1}, {"dim": 50, "heads": 4}, {"heads": 0}, {"dim": -4, "heads": 2},
    {"dim": "64"}, {"ffn_ratio": "2"}, {"groups": 1.5}, {"blocks": -1}, {"lam": "3"}, {"rope": "no"},
    {"alpha": float("nan")}, {"in_chans": True},
], ids=lambda c: str(c)[:20])
def test_bad_config_in_header(tmp_path, saved, config):
    """A header whose config cannot build a model is a WeightsError too, never a traceback or a huge allocation."""
    model, _ = saved
    if isinstance(config, dict) and config:
        config = {**model.cfg.to_dict(), **config}
    path = _write_with_meta(tmp_path / "cfg.safetensors", model.state_dict(), config)
    _raises_weights_error(path)


def test_huge_config_is_refused_before_allocating(tmp_path, saved):
    """A header claiming a gigantic network must not try to allocate it (the tensors cannot match anyway)."""
    model, _ = saved
    for big in ({"dim": 1 << 20, "heads": 1 << 10}, {"groups": 1 << 12, "blocks": 1 << 12}):
        config = {**model.cfg.to_dict(), **big}
        path = _write_with_meta(tmp_path / "huge.safetensors", model.state_dict(), config)
        _raises_weights_error(path)


def test_non_finite_or_non_float_tensors(tmp_path, saved):
    """safetensors has no checksum: corrupted data bytes load silently. NaN/Inf weights are caught."""
    model, path = saved
    for name, bad in (("nan", float("nan")), ("inf", float("inf"))):
        state = dict(model.state_dict())
        state["trunk.tail.weight"] = state["trunk.tail.weight"].clone()
        state["trunk.tail.weight"].view(-1)[7] = bad
        _raises_weights_error(_write_with_meta(tmp_path / f"{name}.safetensors", state, model.cfg.to_dict()),
                              match="trunk.tail.weight")
    state = dict(model.state_dict())
    state["upsampler.0.bias"] = state["upsampler.0.bias"].to(torch.int32)
    _raises_weights_error(_write_with_meta(tmp_path / "int.safetensors", state, model.cfg.to_dict()))
    # flip the data bytes of the last tensor to 0xFF (a NaN pattern in float32)
    data = bytearray(path.read_bytes())
    data[-64:] = b"\xff" * 64
    flipped = tmp_path / "flipped.safetensors"
    flipped.write_bytes(bytes(data))
    _raises_weights_error(flipped, match="not finite")


def test_bad_card(tmp_path, saved):
    model, _ = saved
    _raises_weights_error(_write_with_meta(tmp_path / "card.safetensors", model.state_dict(), model.cfg.to_dict(),
                                           card="{not json"), match="card")


class _Tripwire:
    """Unpickling this creates a marker file: proof that someone unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_renamed_is_rejected_and_never_unpickled(tmp_path, saved):
    model, _ = saved
    marker = tmp_path / "UNPICKLED"
    payload = {"state_dict": model.state_dict(), "trap": _Tripwire(str(marker))}
    plain = tmp_path / "plain.safetensors"
    plain.write_bytes(pickle.dumps(payload))
    zipped = tmp_path / "torchsave.safetensors"
    torch.save(payload, zipped)
    for path in (plain, zipped):
        _raises_weights_error(path)
        _raises_weights_error(path, read_header)
        assert not marker.exists(), f"{path.name} was unpickled"
    # the trap works: unpickling does create the marker
    pickle.loads(plain.read_bytes())
    assert marker.exists()


# ------------------------------------------------------------------------------------- shipped weights


def test_shipped_path_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("NALASR_WEIGHTS", str(tmp_path))
    settings.reload()  # nalasr reads the environment once
    assert shipped_dir() == tmp_path
    with pytest.raises(WeightsError) as info:
        shipped_path(3, "small")
    msg = str(info.value)
    assert "\n" not in msg and "x3" in msg and "--weights" in msg and str(tmp_path) in msg
    monkeypatch.setenv("NALASR_WEIGHTS", str(tmp_path / "does-not-exist"))
    settings.reload()  # nalasr reads the environment once
    with pytest.raises(WeightsError):
        shipped_path(4)


def test_shipped_dir_override_and_load_model(tmp_path, monkeypatch, saved):
    model, path = saved
    monkeypatch.setenv("NALASR_WEIGHTS", str(tmp_path))
    settings.reload()  # nalasr reads the environment once
    target = tmp_path / shipped_name("small", 2)
    assert target.name == "nalasr_small_x2.safetensors"
    target.write_bytes(path.read_bytes())
    assert shipped_path(2, "small") == target
    loaded = nalasr.load_model(scale=2, variant="small", device="cpu")
    assert loaded.cfg == model.cfg and loaded.card == CARD
    with pytest.raises(WeightsError):  # the default variant is not there
        nalasr.load_model(scale=2, device="cpu")
    with pytest.raises(WeightsError) as info:
        shipped_path(4, "small")
    assert "nalasr_small_x2.safetensors" in str(info.value)  # says which files there are


def test_load_model_with_weights_path(saved, monkeypatch, tmp_path):
    model, path = saved
    monkeypatch.setenv("NALASR_WEIGHTS", str(tmp_path))  # nothing shipped there: the path alone must do
    settings.reload()  # nalasr reads the environment once
    loaded = nalasr.load_model(scale=2, weights=path, device="cpu")
    x = torch.rand(1, 3, 3, 4)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    loaded = nalasr.load_model(scale=2, variant="default", weights=str(path), device="cpu")  # variant ignored
    assert loaded.cfg == model.cfg
    _raises_weights_error(path, lambda p: nalasr.load_model(scale=4, weights=p, device="cpu"))
