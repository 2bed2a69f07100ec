"""The x8 geometric self-ensemble (nalasr.inference.ensemble) and its --self-ensemble flags."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nalasr.cli import run
from nalasr.inference.ensemble import SelfEnsemble, unflip_rotate, flip_rotate
from nalasr.eval.evaluate import evaluate
from nalasr.model import create_model
from nalasr.inference.upscaling import upscale
from nalasr.io.weights import save_weights
from test_upscale import _random_model  # a small NaLaSR with a non-zero upsampler


def test_the_eight_transforms_are_distinct_and_inverted():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    images = [flip_rotate(x, k) for k in range(8)]
    assert len({tuple(t.flatten().tolist()) + tuple(t.shape) for t in images}) == 8
    for k, t in enumerate(images):
        torch.testing.assert_close(unflip_rotate(t, k), x, rtol=0, atol=0)


@torch.no_grad()
def test_equals_the_mean_of_the_transformed_forwards():
    model = _random_model(2)
    x = torch.rand(1, 3, 7, 10)
    expected = sum(unflip_rotate(model(flip_rotate(x, k).contiguous()), k) for k in range(8)) / 8
    got = SelfEnsemble(model)(x)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(got, model(x), atol=1e-4)  # the network is not equivariant: the ensemble differs


@torch.no_grad()
def test_an_equivariant_model_is_unchanged():
    """A fresh NaLaSR is bilinear upscaling (zero residual), which every flip/rotation commutes with."""
    torch.manual_seed(0)
    model = create_model("small", 3).eval()
    x = torch.rand(1, 3, 6, 9)
    torch.testing.assert_close(SelfEnsemble(model)(x), model(x), rtol=1e-5, atol=1e-6)


def test_upscale_api_and_cli(tmp_path: Path, capsys, monkeypatch):
    model = _random_model(2)
    img = (np.random.default_rng(0).random((9, 13, 3)) * 255).astype(np.uint8)
    plain = upscale(img, model=model)
    ens = upscale(img, model=model, self_ensemble=True)
    assert ens.shape == plain.shape == (18, 26, 3) and ens.dtype == np.uint8 and not np.array_equal(ens, plain)
    lr = torch.from_numpy(img.astype(np.float32) / 255).permute(2, 0, 1)[None]
    with torch.no_grad():
        ref = SelfEnsemble(model)(lr).clamp(0, 1)[0].permute(1, 2, 0).numpy()
    assert np.abs(ens.astype(int) - np.rint(ref * 255).astype(int)).max() <= 1

    weights = save_weights(model, tmp_path / "w_x2.safetensors")
    Image.fromarray(img).save(tmp_path / "in.png")
    code = run(["upscale", str(tmp_path / "in.png"), "--scale", "2", "--weights", str(weights), "--device", "cpu",
                "--self-ensemble", "-o", str(tmp_path / "out.png"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["self_ensemble"] is True and report["ok"] == 1
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out.png")), ens)


def test_eval_reports_the_ensemble_and_bicubic_refuses_it(tmp_path: Path, capsys):
    hr = tmp_path / "hr"
    hr.mkdir()
    rng = np.random.default_rng(1)
    Image.fromarray(np.asarray(Image.fromarray((rng.random((12, 10, 3)) * 255).astype(np.uint8)).resize(
        (40, 48), Image.BILINEAR))).save(hr / "a.png")
    model = _random_model(4)
    plain = evaluate(model, [str(hr)], 4, device="cpu")
    ens = evaluate(model, [str(hr)], 4, device="cpu", self_ensemble=True)
    assert ens.model == "nalasr (small), x8 self-ensemble" and plain.model == "nalasr (small)"
    assert ens.sets[0].psnr != plain.sets[0].psnr
    code = run(["eval", str(hr), "--scale", "4", "--model", "bicubic", "--self-ensemble"])
    assert code != 0 and "--self-ensemble" in capsys.readouterr().err
    with pytest.raises(Exception, match="self-ensemble applies to a network"):
        evaluate("bicubic", [str(hr)], 4, device="cpu", self_ensemble=True)


def test_gray_input_goes_through_the_ensemble():
    model = _random_model(2)
    gray = (np.random.default_rng(2).random((8, 11)) * 255).astype(np.uint8)
    out = upscale(gray, model=model, self_ensemble=True)
    assert out.shape == (16, 22) and out.dtype == np.uint8


def test_one_wrapper_per_model():
    """Repeated upscale() calls must reuse one wrapper: CUDA graphs are kept per module."""
    from nalasr.inference.ensemble import ensemble_of

    a, b = _random_model(2), _random_model(2)
    assert ensemble_of(a) is ensemble_of(a) and ensemble_of(a) is not ensemble_of(b)
    assert ensemble_of(a).model is a
