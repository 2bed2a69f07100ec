"""ONNX export against PyTorch through onnxruntime, and the query-norm / entropy diagnostic."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nalasr.errors import InputError, WeightsError
from nalasr.interop.diagnose import METHODS, attention_entropy, diagnose, row_entropy, spearman
from nalasr.model import create_model
from nalasr.ops.nala import NalaParams


@pytest.fixture(scope="module")
def small_x3():
    torch.manual_seed(0)
    return create_model("small", 3).eval()


@pytest.fixture(scope="module")
def exported(small_x3, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from nalasr.interop.onnx import export_onnx

    path = tmp_path_factory.mktemp("onnx") / "small_x3.onnx"
    return export_onnx(small_x3, path, card={"note": "test"})


@pytest.mark.parametrize("hw", [(19, 33), (40, 27)])
def test_onnx_fp32_matches_pytorch_at_odd_sizes(exported, small_x3, hw):
    from nalasr.interop.onnx import OnnxModel

    onnx_model = OnnxModel(exported.path)
    x = torch.rand(1, 3, *hw, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = small_x3(x)
    got = onnx_model(x)
    assert got.shape == (1, 3, 3 * hw[0], 3 * hw[1])
    assert (got - ref).abs().max().item() <= 1e-4
    assert exported.check_max_abs <= 1e-4


def test_onnx_sidecar_carries_config_and_card(exported, small_x3):
    meta = json.loads(exported.sidecar.read_text())
    assert meta["config"] == small_x3.cfg.to_dict()
    assert meta["card"] == {"note": "test"} and meta["opset"] == exported.opset and meta["dynamic"] is True


def test_onnx_fp16_within_tolerance(small_x3, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from nalasr.interop.onnx import OnnxModel, export_onnx

    rep = export_onnx(small_x3, tmp_path / "h.onnx", dtype="fp16", dynamic=False, size=(16, 21))
    assert rep.check_max_abs <= 2e-2
    x = torch.rand(1, 3, 16, 21, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        ref = small_x3(x)
    assert (OnnxModel(rep.path)(x).float() - ref).abs().max().item() < 2e-2


def test_onnx_model_needs_its_sidecar(exported, tmp_path):
    from nalasr.interop.onnx import OnnxModel

    lone = tmp_path / "lone.onnx"
    lone.write_bytes(exported.path.read_bytes())
    with pytest.raises(WeightsError, match="json is missing"):
        OnnxModel(lone)
    with pytest.raises(InputError, match="no such ONNX file"):
        OnnxModel(tmp_path / "absent.onnx")


def test_row_entropy_uniform_and_one_hot():
    rows = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    h = row_entropy(rows)
    assert h[0].item() == pytest.approx(np.log(4)) and h[1].item() == 0.0 and torch.isnan(h[2])


def test_entropy_falls_with_query_norm_for_nala_not_for_linear():
    """q = c·u with a fixed direction u: only the norm changes. ReLU linear attention is exactly blind to it,
    1+ELU nearly so; NaLa (and softmax) sharpen as the norm grows."""
    g = torch.Generator().manual_seed(0)
    k = torch.randn(512, 16, generator=g)
    u = torch.randn(16, generator=g)
    c = torch.linspace(0.05, 4.0, 40)
    q = c[:, None] * (u / u.norm())
    ent = {m: attention_entropy(q, k, m, NalaParams()).numpy() for m in METHODS}
    spread = {m: float(e.max() - e.min()) for m, e in ent.items()}
    assert spearman(c.numpy(), ent["nala"]) < -0.95
    assert spearman(c.numpy(), ent["softmax"]) < -0.95
    assert spread["linear_relu"] < 1e-6
    assert spread["nala"] > 10 * spread["linear_elu"]
    assert all(np.isfinite(e).all() and (e >= 0).all() and (e <= np.log(512) + 1e-9).all() for e in ent.values())


def test_diagnose_on_a_small_image(small_x3):
    x = torch.rand(1, 3, 14, 18, generator=torch.Generator().manual_seed(3))
    rep = diagnose(small_x3, x, samples=20)
    n_layers = sum(1 for m in small_x3.modules() if hasattr(m, "qkvg"))
    assert len(rep.layers) == n_layers > 0
    for layer in rep.layers:
        assert layer.tokens == 14 * 18 and len(layer.q_norm) == 20 * small_x3.cfg.heads
        for m in METHODS:
            e = np.asarray(layer.entropy[m])
            assert np.isfinite(e[np.isfinite(e)]).all() and np.nanmax(e) <= 1 + 1e-9 and np.nanmin(e) >= 0
    d = rep.to_dict()
    assert set(d["summary"]) == set(METHODS) and json.dumps(d)


def test_upscale_cli_runs_an_exported_model(exported, small_x3, tmp_path):
    """`nalasr upscale --runtime onnxruntime --model FILE.onnx` through the same pipeline as the torch model."""
    from PIL import Image

    from nalasr.cli import run
    from nalasr.inference.batch import upscale_paths

    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (23, 31, 3), dtype=np.uint8)).save(tmp_path / "a.png")
    assert run(["upscale", str(tmp_path / "a.png"), "-s", "3", "--runtime", "onnxruntime", "--model",
                str(exported.path), "-o", str(tmp_path / "onnx.png")]) == 0
    upscale_paths([tmp_path / "a.png"], tmp_path / "torch.png", scale=3, model=small_x3)
    a = np.asarray(Image.open(tmp_path / "onnx.png")).astype(int)
    b = np.asarray(Image.open(tmp_path / "torch.png")).astype(int)
    assert a.shape == (69, 93, 3) and np.abs(a - b).max() <= 1
    assert run(["upscale", str(tmp_path / "a.png"), "-s", "2", "--runtime", "onnxruntime", "--model",
                str(exported.path)]) == 2  # the file says x3
    assert run(["upscale", str(tmp_path / "a.png"), "--runtime", "onnxruntime"]) == 2  # no --model
