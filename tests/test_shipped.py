"""The committed weights themselves: they load, carry their card, and beat bicubic on a real photo.

The photo is scikit-image's bundled `chelsea` (no ../shared needed): downscaled by the protocol, upscaled
by the shipped model through the CLI, scored by the protocol.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import skimage.data
from PIL import Image

from nalasr import settings
from nalasr.cli import run
from nalasr.model import SCALES, VARIANTS
from nalasr.eval.protocol import bicubic_up, eval_hr, make_lr, score
from nalasr.io.weights import SHIPPED_DIR, read_header, shipped_name


@pytest.fixture(autouse=True)
def _real_shipped_dir(monkeypatch):
    monkeypatch.delenv("NALASR_WEIGHTS", raising=False)
    settings.reload()  # nalasr reads the environment once


SHIPPED_VARIANTS = list(VARIANTS)  # weights/ ships every variant, each at every scale


@pytest.mark.parametrize("variant", SHIPPED_VARIANTS)
@pytest.mark.parametrize("scale", SCALES)
def test_shipped_weights_load_with_their_card(variant, scale):
    cfg, card = read_header(SHIPPED_DIR / shipped_name(variant, scale))
    assert cfg.scale == scale and card["scale"] == scale and card["iterations"] > 0
    assert card["variant"] == variant
    assert "DIV2K is not available" in card["training_data"]
    assert set(card["results"]["sets"]) == {"Set5", "Set14", "BSD100", "Urban100"}


@pytest.mark.parametrize("variant", SHIPPED_VARIANTS)
@pytest.mark.parametrize("scale", [2, 4])
def test_cli_upscale_with_shipped_weights_beats_bicubic(tmp_path, capsys, scale, variant):
    hr = eval_hr(skimage.data.chelsea()[:160, 100:340], scale)  # a detailed crop: fur and an eye
    lr = make_lr(hr, scale)
    Image.fromarray(lr).save(tmp_path / "cat.png")
    code = run(["upscale", str(tmp_path / "cat.png"), "--scale", str(scale), "--variant", variant, "--device", "cpu",
                "--threads", "1", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["weights"].endswith(shipped_name(variant, scale))
    sr = np.asarray(Image.open(tmp_path / f"cat_x{scale}.png"))
    ours, _ = score(sr, hr, scale)
    base, _ = score(bicubic_up(lr, scale), hr, scale)
    assert ours > base + 0.5, (ours, base)
