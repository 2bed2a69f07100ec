"""The NaLaSR network (docs/design.md §3): variants, scales, any input size, config, spec, precisions."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from nalasr.model import (
    DEFAULT_VARIANT,
    SCALES,
    VARIANTS,
    ModelSpec,
    NaLaSR,
    NaLaSRConfig,
    config_for,
    count_params,
    create_model,
    spec_of,
    variant_of,
)
from nalasr.model.nalasr import NalaMixer

PARAM_LIMITS = {"small": 300_000, "default": 1_000_000}


def _model(variant: str, scale: int, seed: int = 0, **overrides) -> NaLaSR:
    """A model in eval mode whose output depends on the trunk. The upsampler may start at zero (a fresh
    model is then exactly bilinear), which would let every test below pass with the trunk ignored."""
    torch.manual_seed(seed)
    model = create_model(variant, scale, **overrides).eval()
    model.upsampler[0].reset_parameters()
    return model


@pytest.fixture(scope="module")
def models() -> dict[tuple[str, int], NaLaSR]:
    return {(v, s): _model(v, s) for v in VARIANTS for s in SCALES}


def _img(h, w, b=1, seed=0, dtype=torch.float32):
    return torch.rand(b, 3, h, w, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_variants_and_scales_are_the_advertised_ones():
    assert set(VARIANTS) == {"small", "default"}
    assert DEFAULT_VARIANT == "default"
    assert tuple(SCALES) == (2, 3, 4)


@pytest.mark.parametrize("variant", ["small", "default"])
@pytest.mark.parametrize("scale", [2, 3, 4])
def test_every_variant_and_scale_builds_and_upscales_odd_sizes(models, variant, scale):
    model = models[variant, scale]
    assert model.cfg.scale == scale
    with torch.no_grad():
        for h, w in ((7, 5), (1, 1), (2, 9)):
            y = model(_img(h, w))
            assert y.shape == (1, 3, scale * h, scale * w)
            assert y.dtype == torch.float32 and torch.isfinite(y).all()


@pytest.mark.parametrize("variant", ["small", "default"])
def test_parameter_budgets(models, variant):
    counts = [count_params(models[variant, s]) for s in SCALES]
    assert max(counts) <= PARAM_LIMITS[variant], counts
    assert counts == sorted(counts) and len(set(counts)) == 3  # only the upsampler grows with the scale
    assert counts[0] == sum(p.numel() for p in models[variant, 2].parameters())
    assert count_params(models["small", 4]) < count_params(models["default", 2])


def test_same_trunk_for_every_scale(models):
    """×2/×3/×4 differ only in the upsampler: the trunk parameters have identical names and shapes."""
    for variant in VARIANTS:
        shapes = [{k: v.shape for k, v in models[variant, s].trunk.state_dict().items()} for s in SCALES]
        assert shapes[0] == shapes[1] == shapes[2]
        ups = [{k: v.shape for k, v in models[variant, s].upsampler.state_dict().items()} for s in SCALES]
        assert ups[0] != ups[1] != ups[2]


def test_batch_items_do_not_mix(models):
    """Attention sums over the tokens of one image only: a batch gives each image's own output."""
    model = models["small", 2]
    a, b = _img(6, 5, seed=1), _img(6, 5, seed=2)
    with torch.no_grad():
        both = model(torch.cat([a, b]))
        torch.testing.assert_close(both[:1], model(a), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(both[1:], model(b), rtol=1e-5, atol=1e-5)


def test_attention_is_global():
    """A pixel change reaches an output pixel farther away than every convolution together could reach:
    nothing is windowed. (The convolutions alone reach ~30 LR pixels in the small variant.)"""
    model = _model("small", 2)
    x = _img(2, 128, seed=3)
    x2 = x.clone()
    x2[..., 0] += 0.5  # change the first column
    with torch.no_grad():
        far = (model(x2) - model(x))[..., -8:]  # the last 4 LR columns, 124+ pixels away
    assert far.abs().max() > 1e-6
    # and with the attention output zeroed the far end does not move (the test measures attention)
    for m in model.modules():
        if isinstance(m, NalaMixer):
            m.proj.weight.data.zero_()
            m.proj.bias.data.zero_()
    with torch.no_grad():
        far = (model(x2) - model(x))[..., -8:]
    assert far.abs().max() == 0


def test_output_adds_bilinear_base():
    """With the upsampler's conv zeroed the network is exactly the bilinear upsampling of the input."""
    model = _model("small", 3)
    conv = model.upsampler[0]
    conv.weight.data.zero_()
    conv.bias.data.zero_()
    x = _img(5, 4)
    with torch.no_grad():
        y = model(x)
    expected = torch.nn.functional.interpolate(x, scale_factor=3, mode="bilinear", align_corners=False)
    torch.testing.assert_close(y, expected)


# ------------------------------------------------------------------------------------------- config


def test_config_round_trip():
    for variant in VARIANTS:
        for scale in SCALES:
            cfg = config_for(variant, scale)
            assert NaLaSRConfig.from_dict(cfg.to_dict()) == cfg
            assert NaLaSRConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
            assert variant_of(cfg) == variant
    custom = config_for("small", 2, rope=True, alpha=20.0)
    assert NaLaSRConfig.from_dict(json.loads(json.dumps(custom.to_dict()))) == custom
    assert variant_of(custom) is None
    assert custom.nala.alpha == 20.0 and custom.head_dim == custom.dim // custom.heads


def test_config_rejects_bad_values():
    d = config_for("small", 2).to_dict()
    with pytest.raises(ValueError, match="wat"):
        NaLaSRConfig.from_dict({**d, "wat": 1})
    with pytest.raises(ValueError):
        NaLaSRConfig.from_dict({**d, "scale": 5})
    with pytest.raises(ValueError):
        NaLaSRConfig(dim=50, heads=4)
    with pytest.raises(ValueError):
        config_for("huge", 4)
    with pytest.raises(TypeError):
        config_for("small", 4, nonsense=1)


def test_config_is_frozen():
    cfg = config_for("small", 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.scale = 4  # type: ignore[misc]


# --------------------------------------------------------------------------------------------- spec


def test_spec_fields(models):
    for (variant, scale), model in models.items():
        spec = spec_of(model)
        assert isinstance(spec, ModelSpec)
        assert spec.architecture == "NaLaSR"
        assert spec.variant == variant and spec.scale == scale
        assert spec.in_channels == spec.out_channels == 3
        assert spec.params == count_params(model)
        assert spec.size_multiple == 1 and spec.min_size == 1  # any size: checked above with 1×1 and 7×5
        assert set(spec.dtypes) == {torch.float32, torch.float16, torch.bfloat16}
    assert spec_of(create_model("small", 2, rope=True)).variant is None


# ------------------------------------------------------------------------------- backend and dtypes


def test_set_attention_backend(models):
    model = models["small", 3]
    x = _img(5, 7, seed=4)
    with torch.no_grad():
        auto = model(x)
        model.set_attention_backend("reference")
        mixers = [m for m in model.modules() if isinstance(m, NalaMixer)]
        assert mixers and all(m.backend == "reference" for m in mixers)
        assert torch.equal(model(x), auto)
        model.set_attention_backend("triton")  # reaches the op: on CPU the kernel cannot run, and says so
        with pytest.raises(RuntimeError):
            model(x)
        model.set_attention_backend("auto")
    # with autograd on, CPU convolutions may take another kernel path: equal up to float rounding
    torch.testing.assert_close(model(x).detach(), auto, rtol=1e-5, atol=1e-6)


def test_rope_variant_runs():
    model = _model("small", 2, rope=True)
    with torch.no_grad():
        y = model(_img(3, 5))
    assert y.shape == (1, 3, 6, 10) and torch.isfinite(y).all()


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 0.05), (torch.float16, 0.02)])
def test_half_precision_forward_is_finite_and_close(dtype, tol):
    model = _model("small", 2)
    x = _img(6, 7, seed=5)
    with torch.no_grad():
        ref = model(x)
        try:
            y = model.to(dtype)(x.to(dtype))
        except RuntimeError as e:  # an op without a CPU kernel for this dtype in this torch build
            pytest.skip(f"{dtype} forward not supported on CPU here: {e}")
    assert y.dtype == dtype and y.shape == ref.shape
    assert torch.isfinite(y).all()
    assert (y.float() - ref).abs().max() < tol


def test_gradients_reach_every_parameter():
    model = _model("small", 2).train()
    model(_img(4, 3, b=2)).square().mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing
