"""Training: config, LR schedule, patch sampler (the MARGIN claim, DDP slicing) and `nalasr train` end to end.

Everything runs on CPU with a tiny model and small generated images (never ../shared).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nalasr.cli import run
from nalasr.errors import InputError
from nalasr.eval.protocol import imresize
from nalasr.train.checkpoint import list_checkpoints, load_checkpoint
from nalasr.train.config import TrainConfig, load_toml, to_toml
from nalasr.train.data import MARGIN, PatchSampler
from nalasr.train.loop import Trainer, lr_at
from nalasr.io.weights import load_weights
from imagegen import smooth_image

TINY = {"dim": 8, "groups": 1, "blocks": 1, "heads": 2}


def noise_image(h: int, w: int, seed: int) -> np.ndarray:
    """(H, W, 3) uint8 noise: every crop of a few pixels is unique, so a patch can be found again."""
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def write_images(folder: Path, n: int, h: int, w: int, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(smooth_image(h, w, seed + i)).save(folder / f"img{i:02d}.png")
    return folder


def write_config(path: Path, **fields) -> Path:
    path.write_text(to_toml({"model_overrides": TINY, **fields}))
    return path


def cli(capsys, *args) -> tuple[int, str, str]:
    code = run([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def start_tiny_run(capsys, tmp_path: Path, train: Path, scale: int, steps: int, **config) -> Path:
    """A fresh tiny CPU run of ``steps`` steps in tmp_path/run (``config``: TrainConfig keys); its folder."""
    out = tmp_path / "run"
    cfg_file = write_config(tmp_path / "c.toml", **config)
    code, _, err = cli(capsys, "train", "--scale", scale, "--data", train, "--out", out, "--batch", 2, "--patch", 8,
                       "--device", "cpu", "--config", cfg_file, "--steps", steps)
    assert code == 0, err
    return out


def tiny_config(tmp_path: Path, train: Path, **fields) -> TrainConfig:
    """A TrainConfig for the tiny model on CPU (x2, batch 2, LR patch 8, no validation); ``fields`` override."""
    base = dict(scales=[2], data=[str(train)], out=str(tmp_path / "run"), model_overrides=TINY, batch=2, patch=8,
                val_set="", device="cpu")
    return TrainConfig(**{**base, **fields})


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one error line, got:\n{err}"
    assert lines[0].startswith("error:"), lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------------ config


def test_config_toml_round_trip(tmp_path):
    default = TrainConfig()
    custom = TrainConfig(
        scales=[2, 3, 4],
        data=["/data/DIV2K", 'we"ird\\path', "tab\there", "new\nline", "ünïcødé 🙂", "\x1b\x7f"],
        out="runs/x", variant="small", model_overrides={"dim": 8, "rope": True, "lam": 2.5, "heads": 2},
        init="/w/x2.safetensors", steps=1234, batch=6, lr=1e-6, min_lr=0.0, warmup=0, schedule="multistep",
        milestones=[10, 20], betas=[0.5, 0.999], ema=0.0, fit_schedule=True, max_minutes=1.5, data_root="/d",
        val_set="", compile=False, device="cpu", seed=7,
    )
    for cfg in (default, custom):
        text = to_toml(cfg.to_dict())
        assert TrainConfig.from_dict(tomllib.loads(text)) == cfg
        path = tmp_path / "c.toml"
        path.write_text(text)
        assert TrainConfig.from_dict(load_toml(path)) == cfg


def test_config_rejects_unknown_keys_and_bad_files(tmp_path):
    with pytest.raises(InputError, match="stpes"):
        TrainConfig.from_dict({"stpes": 10})
    with pytest.raises(InputError, match="not found"):
        load_toml(tmp_path / "absent.toml")
    (tmp_path / "bad.toml").write_text("steps = = 3\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_toml(tmp_path / "bad.toml")


@pytest.mark.parametrize("fields", [
    {"steps": "many"}, {"batch": 2.5}, {"lr": "fast"}, {"scales": 4}, {"compile": "yes"}, {"data": "folder"},
    {"model_overrides": []}, {"model_overrides": {"dimm": 8}}, {"model_overrides": {"dim": 9, "heads": 2}},
    {"variant": "huge"}, {"attention_backend": "magic"}, {"ema": 1.0}, {"keep_last": 0}, {"log_every": 0},
])
def test_config_rejects_bad_values(fields):
    with pytest.raises(InputError):
        cfg = TrainConfig.from_dict(fields)
        cfg.validate()


# ---------------------------------------------------------------------------------------------- schedule


def test_lr_warmup_then_cosine_to_min():
    cfg = TrainConfig(lr=1e-3, min_lr=1e-5, warmup=10, steps=110)
    warm = [lr_at(s, cfg) for s in range(10)]
    assert warm[0] == pytest.approx(1e-4) and warm[-1] == pytest.approx(1e-3)
    assert all(b > a for a, b in zip(warm, warm[1:]))  # a linear ramp
    assert np.allclose(np.diff(warm), 1e-4)
    decay = [lr_at(s, cfg) for s in range(10, 111)]
    assert decay[0] == pytest.approx(1e-3)
    assert all(b < a for a, b in zip(decay, decay[1:]))
    assert lr_at(60, cfg) == pytest.approx((1e-3 + 1e-5) / 2)  # halfway through the cosine
    assert lr_at(110, cfg) == pytest.approx(1e-5) and lr_at(10_000, cfg) == pytest.approx(1e-5)
    assert lr_at(0, TrainConfig(lr=1e-3, warmup=0, steps=100)) == pytest.approx(1e-3)


def test_lr_multistep():
    cfg = TrainConfig(lr=1e-3, warmup=4, schedule="multistep", milestones=[50, 80], steps=100)
    assert [lr_at(s, cfg) for s in range(4)] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])
    assert lr_at(4, cfg) == lr_at(49, cfg) == pytest.approx(1e-3)
    assert lr_at(50, cfg) == lr_at(79, cfg) == pytest.approx(5e-4)
    assert lr_at(80, cfg) == lr_at(10_000, cfg) == pytest.approx(2.5e-4)


def test_lr_schedule_counts_from_schedule_start():
    """A warm restart at step 1000 is the same curve as a fresh run, shifted by 1000 steps."""
    fresh = TrainConfig(lr=2e-4, min_lr=1e-6, warmup=10, steps=110)
    restarted = TrainConfig(lr=2e-4, min_lr=1e-6, warmup=10, steps=1110, schedule_start=1000)
    assert [lr_at(s + 1000, restarted) for s in range(0, 120)] == pytest.approx([lr_at(s, fresh) for s in range(0, 120)])
    assert lr_at(999, restarted) == pytest.approx(2e-5)  # before the restart point: the warm-up's first value


def test_cli_restart_on_resume_starts_a_new_schedule_once(tmp_path, tiny_data, capsys):
    train, _ = tiny_data
    out = start_tiny_run(capsys, tmp_path, train, scale=2, steps=3, val_set="", log_every=1, warmup=2)
    code, _, err = cli(capsys, "train", "--resume", "--restart", "--lr", "1e-4", "--out", out, "--steps", 6)
    assert code == 0, err
    saved = tomllib.loads((out / "config.toml").read_text())
    assert saved["schedule_start"] == 3 and saved["restart"] is False and saved["lr"] == 1e-4
    lrs = {r["step"]: r["lr"] for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "lr" in r}
    assert lrs[4] == pytest.approx(5e-5)  # step 3 (logged as 4) is the first of the new 2-step warm-up
    # resuming again continues that schedule: no second restart
    code, _, err = cli(capsys, "train", "--resume", "--out", out, "--steps", 7)
    assert code == 0, err
    assert tomllib.loads((out / "config.toml").read_text())["schedule_start"] == 3


def test_fit_schedule_leaves_validation_time_out_of_the_speed(tmp_path, tiny_data, monkeypatch):
    """180 steps in 20 s of which 11 s were validation: 20 it/s, not 9 (a resumed run once ended minutes early)."""
    train, _ = tiny_data
    cfg = tiny_config(tmp_path, train, steps=1000, max_minutes=10.0, fit_schedule=True)
    trainer = Trainer(cfg, log=lambda m: None)
    trainer.step = 200
    monkeypatch.setattr("nalasr.train.loop.time.perf_counter", lambda: 130.0)  # 130 s into the run
    trainer._fit_schedule(t_start=0.0, t_fit=110.0, paused=11.0)
    left = 600 - 130
    assert trainer.cfg.steps == 200 + int(0.97 * 20.0 * left)
    assert tomllib.loads((tmp_path / "run" / "config.toml").read_text())["steps"] == trainer.cfg.steps


def test_cuda_graphs_flag_is_a_no_op_off_cuda(tmp_path, tiny_data):
    train, _ = tiny_data
    cfg = tiny_config(tmp_path, train, steps=2, cuda_graphs=True, log_every=1)
    trainer = Trainer(cfg, log=lambda m: None)
    assert trainer._graphs is False
    assert trainer.run().step == 2


# ----------------------------------------------------------------------------------------------- sampler


def sampler(images, **kw) -> PatchSampler:
    return PatchSampler(images, **{"patch": 8, "device": torch.device("cpu"), "seed": 3, **kw})


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_sampler_shapes_ranges_determinism(scale):
    images = [smooth_image(60, 72, i) for i in range(3)] + [smooth_image(20, 200, 9)]  # the last is too short
    a, b = sampler(images), sampler(images)
    for _ in range(3):
        x, y = a.sample(5, scale), b.sample(5, scale)
        assert x.lr.shape == (5, 3, 8, 8) and x.hr.shape == (5, 3, 8 * scale, 8 * scale) and x.scale == scale
        assert x.lr.dtype == x.hr.dtype == torch.float32
        for t in (x.lr, x.hr):
            assert 0 <= t.min() and t.max() <= 1
            assert torch.equal(t * 255, (t * 255).round())  # quantised LR, uint8 HR
        assert torch.equal(x.lr, y.lr) and torch.equal(x.hr, y.hr)  # same seed, same batches
    other = sampler(images, seed=4).sample(5, scale)
    assert not torch.equal(other.hr, sampler(images).sample(5, scale).hr)

    # the generator state is the data order: restoring it replays the same batches
    state = a.state_dict()
    want = [a.sample(4, scale) for _ in range(2)]
    c = sampler(images, seed=99)
    c.load_state_dict(state)
    for w in want:
        got = c.sample(4, scale)
        assert torch.equal(got.lr, w.lr) and torch.equal(got.hr, w.hr)


def test_sampler_unquantised_lr_and_too_small_images():
    x = sampler([smooth_image(40, 40, 0)], quantize_lr=False).sample(16, 2)
    assert not torch.equal(x.lr * 255, (x.lr * 255).round())
    with pytest.raises(InputError, match="at least"):
        sampler([smooth_image(40, 40, 0)]).sample(2, 4)  # (8 + 2·MARGIN)·4 = 48 > 40
    with pytest.raises(InputError):
        sampler([])


def test_hr_rescale_adds_protocol_downscaled_copies():
    images = [smooth_image(60, 72, 0), smooth_image(41, 50, 1)]
    plain, more = sampler(images), sampler(images, hr_rescale=[0.75, 0.5])
    assert len(plain.images) == 2 and len(more.images) == 6
    for k, (f, i) in enumerate([(f, i) for f in (0.75, 0.5) for i in range(2)]):
        got = more.images[2 + k]
        want = imresize(torch.from_numpy(images[i].transpose(2, 0, 1).copy()).double(), scale=f)
        h, w = images[i].shape[:2]
        assert got.dtype == torch.uint8 and got.shape == (3, math.ceil(h * f), math.ceil(w * f))
        assert (got.double() - want.round().clamp(0, 255)).abs().max() <= 1  # float32 vs float64 rounding ties
    assert torch.equal(more.images[0], plain.images[0])
    # the copies take part by area: x4 with patch 8 needs 48 px, which 0.75 · 60 = 45 no longer has
    assert more.usable(2).tolist() == [0, 1, 2, 3, 4] and more.usable(4).tolist() == [0]
    with pytest.raises(InputError, match="hr_rescale"):
        TrainConfig(hr_rescale=[1.0]).validate()


def dihedral(x: np.ndarray) -> list[np.ndarray]:
    """The 8 flips/rotations of (..., S, S), as functions of the last two axes."""
    out = []
    for f in (x, x[..., ::-1]):
        out += [np.rot90(f, k, axes=(-2, -1)) for k in range(4)]
    return out


def locate(image: np.ndarray, patch: np.ndarray) -> tuple[int, int, int]:
    """(dihedral index d, y, x) with dihedral(patch)[d] == image[:, y:y+S, x:x+S] (image (3, H, W) uint8)."""
    s = patch.shape[-1]
    found = []
    for d, cand in enumerate(dihedral(patch)):
        ys, xs = np.nonzero((image[:, : image.shape[1] - s + 1, : image.shape[2] - s + 1]
                             == cand[:, :1, :1]).all(0))
        found += [(d, y, x) for y, x in zip(ys, xs) if np.array_equal(image[:, y:y + s, x:x + s], cand)]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_patch_lr_equals_the_whole_images_lr_there(scale):
    """The MARGIN claim: a patch's LR is the protocol LR of the whole image at that place (before rounding),
    whatever the crop position (any phase) and flip/rotation."""
    p = 8
    hr_img = noise_image(19 * scale, 23 * scale, scale)
    chw = np.ascontiguousarray(hr_img.transpose(2, 0, 1))
    s = sampler([hr_img], patch=p, quantize_lr=False, seed=scale)
    whole = torch.from_numpy(chw).double()
    interior, transforms, worst, naive_worst = 0, set(), 0.0, 0.0
    for _ in range(4):
        batch = s.sample(8, scale)
        for lr, hr in zip(batch.lr, batch.hr):
            hr_u8 = (hr * 255).round().to(torch.uint8).numpy()
            d, y, x = locate(chw, hr_u8)
            transforms.add(d)
            top, left = y - MARGIN * scale, x - MARGIN * scale  # the crop's corner, margin included
            assert top >= 0 and left >= 0
            # the whole image's LR on the sampling grid through the crop's corner (the image less < s rows
            # and columns at the top and left, so the grid lines up); the patch sits MARGIN LR px inside
            ref = imresize(whole[:, top % scale:, left % scale:], scale=1 / scale)
            r0, c0 = top // scale + MARGIN, left // scale + MARGIN
            # the whole image's border is more than the margin away: this crop's edges are really tested
            interior += min(r0, c0) > MARGIN and r0 + p + MARGIN < ref.shape[1] and c0 + p + MARGIN < ref.shape[2]
            ref = ref[:, r0:r0 + p, c0:c0 + p] / 255
            got = torch.from_numpy(dihedral(lr.double().numpy())[d].copy())
            worst = max(worst, (got - ref).abs().max().item())
            # without the margin the patch's edges would be wrong: the test can tell
            naive = imresize(torch.from_numpy(dihedral(hr.double().numpy())[d].copy()), scale=1 / scale)
            naive_worst = max(naive_worst, (naive - ref).abs().max().item())
    assert worst < 1e-4, worst
    assert naive_worst > 1e-3
    assert interior >= 8 and len(transforms) >= 4  # most crops away from the image border, flips exercised


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_slices_are_rows_of_the_single_process_batch(world):
    images = [smooth_image(50, 64, i) for i in range(3)]
    b = 8
    single = sampler(images)
    ranks = [sampler(images, rank=r, world=world) for r in range(world)]
    for step in range(4):
        scale = (2, 3)[step % 2]
        full = single.sample(b, scale)
        for r, s in enumerate(ranks):
            part = s.sample(b, scale)
            rows = slice(r * b // world, (r + 1) * b // world)
            assert part.lr.shape[0] == b // world
            assert torch.equal(part.hr, full.hr[rows])
            assert torch.equal(part.lr, full.lr[rows])


# ---------------------------------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("data")
    train = write_images(root / "train", 5, 50, 60)
    val = write_images(root / "val" / "HR", 2, 24, 36, seed=100).parent
    return train, val


def test_cli_trains_and_writes_everything(tmp_path, tiny_data, capsys):
    train, val = tiny_data
    out = tmp_path / "run"
    cfg_file = write_config(tmp_path / "c.toml", keep_last=2, ckpt_every=2, log_every=1, warmup=2, ema=0.9)
    code, stdout, err = cli(capsys, "train", "--config", cfg_file, "--scale", "2,4", "--data", train, "--out", out,
                            "--steps", 5, "--batch", 2, "--patch", 8, "--val-set", val, "--val-every", 3,
                            "--device", "cpu", "--no-compile")
    assert code == 0, err
    assert "stopped at step 5" in stdout

    cfg = TrainConfig.from_dict(load_toml(out / "config.toml"))
    assert cfg.scales == [2, 4] and cfg.steps == 5 and cfg.model_overrides == TINY and cfg.data == [str(train)]
    assert cfg.val_set == str(val) and cfg.ckpt_every == 2

    ckpts = list_checkpoints(out / "checkpoints")
    assert [s for s, _ in ckpts] == [4, 5]  # every 2 steps and the last, the last 2 kept
    state = load_checkpoint(ckpts[-1][1])
    assert state["step"] == 5 and TrainConfig.from_dict(state["config"]) == cfg
    assert [h["step"] for h in state["history"]] == [3, 5]

    recs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    train_recs = [r for r in recs if "step" in r]
    val_recs = [r["val"] for r in recs if "val" in r]
    assert [r["step"] for r in train_recs] == [1, 2, 3, 4, 5]
    assert all(math.isfinite(r["loss"]) and r["loss"] > 0 for r in train_recs)
    assert [r["lr"] for r in train_recs] == pytest.approx([lr_at(s, cfg) for s in range(5)])
    assert [v["step"] for v in val_recs] == [3, 5]
    assert all(10 < v["psnr_x2"] < 60 and 10 < v["psnr_x4"] < 60 for v in val_recs)
    # best.pt is the state at the last validation that improved some scale (step 3 is no checkpoint step)
    improving = [v["step"] for i, v in enumerate(val_recs)
                 if i == 0 or any(v[k] > max(w[k] for w in val_recs[:i]) for k in ("psnr_x2", "psnr_x4"))]
    best_step = improving[-1]
    best = torch.load(out / "checkpoints" / "best.pt", weights_only=True)
    assert best["step"] == best_step
    assert [h["step"] for h in best["history"]] == [v["step"] for v in val_recs if v["step"] <= best_step]

    for s in (2, 4):
        path = out / "weights" / f"nalasr_default_x{s}.safetensors"
        model = load_weights(path, scale=s)
        assert model.cfg.dim == 8 and model.card["iterations"] == 5 and model.card["scales_trained_jointly"] == [2, 4]
        with torch.no_grad():
            assert model(torch.rand(1, 3, 6, 7)).shape == (1, 3, 6 * s, 7 * s)
    # the exported weights are the EMA's, not the raw model's
    model = load_weights(out / "weights" / "nalasr_default_x4.safetensors")
    ema = {k: v.float() for k, v in state["ema"].items()}
    exported = {f"trunk.{k}": v for k, v in model.trunk.state_dict().items()}
    exported |= {f"upsamplers.4.{k}": v for k, v in model.upsampler.state_dict().items()}
    assert all(torch.equal(v, ema[k]) for k, v in exported.items())
    assert not all(torch.equal(v, state["model"][k].float()) for k, v in exported.items())


def test_cli_resume_continues_and_extends(tmp_path, tiny_data, capsys):
    train, _ = tiny_data
    out = start_tiny_run(capsys, tmp_path, train, scale=3, steps=3, val_set="", log_every=1)
    # --resume alone reads the run's config from its checkpoint; --steps extends the schedule
    code, stdout, err = cli(capsys, "train", "--resume", "--out", out, "--steps", 5)
    assert code == 0, err
    assert "stopped at step 5" in stdout
    steps = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [3, 5]


def test_cli_resume_with_config_overrides_only_its_keys(tmp_path, tiny_data, capsys):
    """--resume --config FILE: the run's own settings, with just the keys FILE names changed."""
    train, _ = tiny_data
    out = start_tiny_run(capsys, tmp_path, train, scale=3, steps=2, val_set="", log_every=1)
    override = tmp_path / "o.toml"
    override.write_text('attention_backend = "reference"\nlog_every = 2\n')
    code, _, err = cli(capsys, "train", "--resume", "--out", out, "--config", override, "--steps", 4)
    assert code == 0, err
    saved = tomllib.loads((out / "config.toml").read_text())
    assert saved["attention_backend"] == "reference" and saved["log_every"] == 2
    assert saved["scales"] == [3] and saved["batch"] == 2 and saved["patch"] == 8  # kept from the run
    assert [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()] == [1, 2, 4]


def test_cli_resume_without_checkpoints_starts_fresh(tmp_path, tiny_data, capsys):
    """A job script that always passes --resume must work on its first start too."""
    train, _ = tiny_data
    out = tmp_path / "run"
    cfg_file = write_config(tmp_path / "c.toml", val_set="")
    code, _, err = cli(capsys, "train", "--resume", "--config", cfg_file, "--scale", 2, "--data", train, "--out", out,
                       "--steps", 2, "--batch", 2, "--patch", 8, "--device", "cpu")
    assert code == 0, err
    code, _, err = cli(capsys, "train", "--resume", "--scale", 2, "--data", train, "--out", tmp_path / "other",
                       "--steps", 1, "--batch", 1, "--patch", 4, "--device", "cpu", "--val-set", "",
                       "--variant", "small")
    assert code == 0, err


def test_cli_bad_input_is_one_line(tmp_path, tiny_data, capsys):
    train, _ = tiny_data
    cfg_file = write_config(tmp_path / "c.toml", val_set="")
    base = ["train", "--config", cfg_file, "--steps", 1, "--batch", 2, "--patch", 8, "--device", "cpu"]

    def fails(*args, code=2) -> str:
        got, _, err = cli(capsys, *base, *args)
        assert got == code, err
        return one_error_line(err)

    assert "not found" in fails("--scale", 2, "--data", tmp_path / "absent", "--out", tmp_path / "a")
    assert "no training data" in fails("--scale", 2, "--out", tmp_path / "b")
    assert "scale" in fails("--scale", 5, "--data", train, "--out", tmp_path / "c")
    assert "scale" in fails("--scale", "two", "--data", train, "--out", tmp_path / "c")
    # --variant is an enum choice: Typer's usage error (exit 2) names the bad value
    got, _, err = cli(capsys, *base, "--scale", 2, "--data", train, "--out", tmp_path / "c", "--variant", "huge")
    assert got == 2 and "huge" in err, err
    assert "batch" in fails("--scale", 2, "--data", train, "--out", tmp_path / "c", "--batch", 0)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no image files" in fails("--scale", 2, "--data", empty, "--out", tmp_path / "c")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.png").write_bytes(b"not an image")
    assert "1 of 1 training images could not be decoded" in fails("--scale", 2, "--data", tmp_path / "junk",
                                                                  "--out", tmp_path / "c")
    assert "at least 48 px" in fails("--scale", "2,4", "--data", write_images(tmp_path / "small", 2, 40, 60),
                                     "--out", tmp_path / "c")
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text("stpes = 3\n")
    got, _, err = cli(capsys, "train", "--config", bad_cfg, "--data", train, "--out", tmp_path / "d")
    assert got == 2 and "stpes" in one_error_line(err)

    done = tmp_path / "done"
    assert cli(capsys, *base, "--scale", 2, "--data", train, "--out", done)[0] == 0
    assert "--resume" in fails("--scale", 2, "--data", train, "--out", done)
    # resuming with another model than the checkpoint's is refused cleanly
    assert "checkpoint" in fails("--scale", 4, "--data", train, "--out", done, "--resume", "--steps", 2)
    assert len(list_checkpoints(done / "checkpoints")) == 1


def test_best_is_the_state_of_the_best_validation(tmp_path, tiny_data, monkeypatch):
    """best.pt holds the weights of the best validation step even when that step is not a checkpoint step."""
    import nalasr.train.loop as loop

    scores = iter([20.0, 25.0, 22.0])

    class FakeValidator:
        bad: list = []  # files of the set that cannot be scored

        def __init__(self, *a, **k) -> None:
            pass

        def run(self, model, scale):
            return next(scores), 0.5

    monkeypatch.setattr(loop, "Validator", FakeValidator)
    cfg = tiny_config(tmp_path, tiny_data[0], steps=6, val_set="fake", val_every=2, ckpt_every=3, keep_last=5,
                      log_every=1)
    result = loop.train(cfg, log=lambda m: None)
    assert result.best_psnr == {"x2": 25.0}
    best = torch.load(tmp_path / "run" / "checkpoints" / "best.pt", weights_only=True)
    assert best["step"] == 4 and best["best"] == {"x2": 25.0}
    assert [s for s, _ in list_checkpoints(tmp_path / "run" / "checkpoints")] == [3, 6]


def test_init_applies_on_a_first_start_even_with_resume(tmp_path, tiny_data):
    """--init seeds the trunk when there is no checkpoint yet (a job script that always passes --resume), and is
    ignored once the run has its own checkpoint."""
    from nalasr.model import create_model
    from nalasr.train.loop import train
    from nalasr.io.weights import save_weights

    torch.manual_seed(123)
    src = save_weights(create_model("default", 2, **TINY), tmp_path / "x2.safetensors")
    cfg = dict(scales=[2, 4], data=[str(tiny_data[0])], out=str(tmp_path / "run"), model_overrides=TINY, init=str(src),
               steps=1, batch=2, patch=8, lr=1e-12, warmup=0, ema=0.0, val_set="", device="cpu")
    logs: list[str] = []
    train(TrainConfig(**cfg), resume=True, log=logs.append)
    assert any("initialised the trunk" in m for m in logs)
    trained = load_checkpoint(list_checkpoints(tmp_path / "run" / "checkpoints")[-1][1])["model"]
    ref = load_weights(src).state_dict()
    for name, t in ref.items():  # one step at lr 1e-12 leaves the initial weights (x2's upsampler too)
        torch.testing.assert_close(trained[name if name.startswith("trunk.") else name.replace("upsampler.",
                                                                                                "upsamplers.2.")],
                                   t, atol=1e-6, rtol=0)
    logs.clear()
    train(TrainConfig(**{**cfg, "steps": 2}), resume=True, log=logs.append)
    assert not any("initialised" in m for m in logs) and any("resumed from ckpt_00000001.pt" in m for m in logs)


def test_scale_weights_interleave_the_scales_per_cycle():
    cfg = TrainConfig(scales=[2, 3, 4], scale_weights=[1, 1, 2])
    assert cfg.scale_cycle() == [2, 3, 4, 4]
    assert TrainConfig(scales=[2, 4], scale_weights=[1, 3]).scale_cycle() == [2, 4, 4, 4]
    assert TrainConfig(scales=[2, 3, 4]).scale_cycle() == [2, 3, 4]
    for bad in ([1, 1], [1, 0, 2]):
        with pytest.raises(InputError, match="scale_weights"):
            TrainConfig(scales=[2, 3, 4], scale_weights=bad).validate()


def test_pixel_loss_choice():
    from nalasr.train.loop import loss_fn

    g = torch.Generator().manual_seed(3)
    sr, hr = torch.rand(2, 3, 7, 5, generator=g), torch.rand(2, 3, 7, 5, generator=g)
    diff = sr - hr
    assert torch.allclose(loss_fn(sr, hr, 0.0, "l1"), diff.abs().mean())
    assert torch.allclose(loss_fn(sr, hr, 0.0, "l2"), diff.square().mean())
    assert not torch.allclose(loss_fn(sr, hr, 0.0, "l1"), loss_fn(sr, hr, 0.0, "l2"))
    with pytest.raises(InputError, match="loss must be l1 or l2"):
        TrainConfig(loss="l3").validate()
    cfg = TrainConfig(loss="l2")
    cfg.validate()
    assert TrainConfig.from_dict(cfg.to_dict()).loss == "l2"
