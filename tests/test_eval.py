"""`nalasr eval` and nalasr.eval.evaluate: published numbers through the whole path, models, outputs, bad input."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nalasr import settings
from nalasr.eval import protocol as P
from nalasr.cli import run
from nalasr.errors import DatasetError, InputError, WeightsError
from nalasr.eval.evaluate import evaluate, prepare_set, quick_score
from nalasr.model import create_model
from nalasr.io.weights import save_weights


def _hr_folder(folder: Path, n: int = 2, size: tuple[int, int] = (52, 44), gray: int | None = None) -> Path:
    """A folder of smooth-ish random HR images (sizes not multiples of 3 or 4); image ``gray`` single-channel."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        h, w = size
        base = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1, 3)).astype(np.uint8)
        img = np.asarray(Image.fromarray(base).resize((w, h), Image.BILINEAR))
        if gray == i:
            Image.fromarray(img[..., 1], "L").save(folder / f"im{i}.png")
        else:
            Image.fromarray(img).save(folder / f"im{i}.png")
    return folder


@pytest.fixture
def weights(tmp_path: Path) -> callable:
    """scale → a random-weight 'small' NaLaSR weights file (the shipped ones do not exist yet)."""

    def make(scale: int) -> Path:
        torch.manual_seed(0)
        return save_weights(create_model("small", scale), tmp_path / f"small_x{scale}.safetensors", {"test": True})

    return make


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("error: ")
    return err[0]


# ------------------------------------------------------------------------- published numbers, end to end


@pytest.mark.parametrize(("scale", "want"), [(2, (33.68, 30.24)), (3, (30.40, 27.54)), (4, (28.43, 26.00))])
def test_eval_bicubic_reproduces_published(data_root: Path, scale: int, want: tuple[float, float]) -> None:
    r = evaluate("bicubic", ["set5", "set14"], scale, data_root=data_root, device="cpu")
    assert [s.name for s in r.sets] == ["Set5", "Set14"]
    assert abs(r.sets[0].psnr - want[0]) <= 0.01 and abs(r.sets[1].psnr - want[1]) <= 0.01
    assert len(r.sets[1].images) == 14 and r.sets[0].lr_source == "computed"


def test_eval_cli_crop12_set5(data_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["eval", "set5", "--scale", "3", "--model", "bicubic", "--device", "cpu", "--crop12", "--json",
                "--data-root", str(data_root)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert abs(rep["sets"][0]["psnr"] - 30.39) <= 0.01
    assert "multiple of 12" in rep["protocol"]["hr_crop"]


def test_function_path_and_gray_rule_match_bicubic(data_root: Path) -> None:
    """A plain function doing the bicubic upscale in torch: gray `bridge` is fed as RGB and averaged back.

    It sees float32 LR in [0, 1] (not the uint8 values), so it may differ from the baseline by rounding only.
    """
    def up(x: torch.Tensor) -> torch.Tensor:
        assert x.shape[1] == 3
        return P.imresize(x.double(), scale=2.0).float()

    fn = evaluate(up, ["set14"], 2, data_root=data_root, device="cpu").sets[0]
    base = evaluate("bicubic", ["set14"], 2, data_root=data_root, device="cpu").sets[0]
    assert abs(fn.psnr - base.psnr) < 0.005
    bridge = [i for i in fn.images if i.name == "bridge"][0]
    assert abs(bridge.psnr - [i for i in base.images if i.name == "bridge"][0].psnr) < 0.01


# ------------------------------------------------------------------------------------------- a real model


def test_eval_model_table_json_csv_and_saved_images(tmp_path: Path, weights, capsys) -> None:
    hr = _hr_folder(tmp_path / "mine", n=2, gray=1)
    w = weights(4)
    csv_path, save = tmp_path / "out.csv", tmp_path / "sr"
    rc = run(["eval", str(hr), "--scale", "4", "--weights", str(w), "--device", "cpu",
              "--csv", str(csv_path), "--save-dir", str(save)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "mine x4" in text and "mean" in text and "protocol: LR MATLAB bicubic" in text
    rows = list(csv.DictReader(open(csv_path)))
    assert [r["image"] for r in rows] == ["im0", "im1", "mean"]
    assert all(math.isfinite(float(r["psnr"])) and 0 < float(r["ssim"]) < 1 and float(r["ms"]) > 0 for r in rows)
    mean = float(rows[2]["psnr"])
    assert mean == pytest.approx((float(rows[0]["psnr"]) + float(rows[1]["psnr"])) / 2, abs=1e-3)
    saved = sorted((save / "mine" / "x4").iterdir())
    assert [p.name for p in saved] == ["im0.png", "im1.png"]
    assert Image.open(saved[0]).size == (44, 52) and Image.open(saved[1]).mode == "L"  # the gray one stays gray
    # the saved SR scores exactly what the table says (the images are the ones scored)
    hr0 = P.eval_hr(np.asarray(Image.open(hr / "im0.png")), 4)
    assert P.score(np.asarray(Image.open(saved[0])), hr0, 4)[0] == pytest.approx(float(rows[0]["psnr"]), abs=1e-4)


def test_eval_json_several_sets_summary(tmp_path: Path, weights, capsys) -> None:
    a, b = _hr_folder(tmp_path / "a", n=1), _hr_folder(tmp_path / "b", n=1, size=(40, 40))
    assert run(["eval", str(a), str(b), "--scale", "2", "--weights", str(weights(2)), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "x2 PSNR/SSIM (Y)" in text  # the paper-style summary
    assert run(["eval", str(a), str(b), "--scale", "2", "--weights", str(weights(2)), "--device", "cpu",
                "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in rep["sets"]] == ["a", "b"] and rep["model"] == "nalasr (small)"
    assert rep["protocol"]["channel"].startswith("Y of BT.601") and rep["precision"] == "fp32"


def test_quick_score_equals_evaluate(tmp_path: Path) -> None:
    hr = _hr_folder(tmp_path / "v", n=2, gray=0)
    torch.manual_seed(1)
    model = create_model("small", 3).train()
    prep = prepare_set(str(hr), 3)
    p, s = quick_score(model, prep)
    assert model.training  # its mode is restored
    full = evaluate(model, [str(hr)], 3, device="cpu").sets[0]
    assert p == pytest.approx(full.psnr, abs=1e-9) and s == pytest.approx(full.ssim, abs=1e-9)
    # a function (the multi-scale trainer's `lambda x: net(x, s)`) works the same way
    assert quick_score(lambda x: model.eval()(x), prep) == pytest.approx((p, s), abs=1e-9)


# ------------------------------------------------------------------------------------ precomputed LR


def _with_lr_folder(tmp_path: Path, scale: int, tamper: bool = False, size_off: int = 0) -> Path:
    base = tmp_path / "set"
    hr = _hr_folder(base / "HR", n=2, size=(48, 36))
    lr_dir = base / "LR_bicubic" / f"X{scale}"
    lr_dir.mkdir(parents=True)
    for p in sorted(hr.iterdir()):
        lr = P.make_lr(P.modcrop(np.asarray(Image.open(p)), scale), scale)
        if tamper:
            lr = 255 - lr
        if size_off:
            lr = lr[:-size_off]
        Image.fromarray(lr).save(lr_dir / f"{p.stem}x{scale}.png")
    return base


def test_precomputed_lr_is_used(tmp_path: Path) -> None:
    good = evaluate("bicubic", [str(_with_lr_folder(tmp_path / "g", 2))], 2, device="cpu").sets[0]
    assert good.lr_source.endswith("LR_bicubic/X2")
    computed = evaluate("bicubic", [str(_hr_folder(tmp_path / "c" / "set" / "HR", n=2, size=(48, 36)))], 2,
                        device="cpu").sets[0]
    assert good.psnr == pytest.approx(computed.psnr, abs=1e-9)  # the same LR, read instead of made
    bad = evaluate("bicubic", [str(_with_lr_folder(tmp_path / "t", 2, tamper=True))], 2, device="cpu").sets[0]
    assert bad.psnr < good.psnr - 10  # the folder's pixels really are what is scored
    crop12 = evaluate("bicubic", [str(_with_lr_folder(tmp_path / "t2", 2, tamper=True))], 2, device="cpu",
                      crop12=True).sets[0]
    assert crop12.lr_source == "computed"  # crop12 LR cannot come from a crop-to-scale LR folder


# -------------------------------------------------------------------------------------------- bad input


def test_bad_input_one_line_errors(tmp_path: Path, weights, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NALASR_DATA", str(tmp_path / "root"))
    settings.reload()  # nalasr reads the environment once
    (tmp_path / "root").mkdir()
    ok = _hr_folder(tmp_path / "ok", n=1)
    (tmp_path / "empty").mkdir()
    mismatched = _with_lr_folder(tmp_path / "mm", 2, size_off=1)
    cases = [
        (["eval", "set7", "--scale", "4", "--model", "bicubic"], DatasetError, "unknown set 'set7'"),
        (["eval", "urban100", "--scale", "4", "--model", "bicubic"], DatasetError, "Urban100 not found"),
        (["eval", str(tmp_path / "nope"), "--scale", "4", "--model", "bicubic"], DatasetError, "does not exist"),
        (["eval", str(tmp_path / "empty"), "--scale", "4", "--model", "bicubic"], DatasetError, "no images"),
        (["eval", str(mismatched), "--scale", "2", "--model", "bicubic"], DatasetError, "LR is 18x23 but HR 36x48 at x2 needs 18x24"),
        (["eval", str(ok), "--scale", "4", "--weights", str(weights(2)), "--device", "cpu"], WeightsError,
         "for x2, not x4"),
        (["eval", str(ok), "--scale", "5", "--model", "bicubic"], InputError, "one of 2, 3, 4, got 5"),
        (["eval", str(ok), "--scale", "4", "--model", "bicubic", "--weights", "w.safetensors"], InputError,
         "do not apply"),
        (["eval", str(ok), "--scale", "4", "--weights", str(tmp_path / "missing.safetensors")], WeightsError,
         "not found"),
    ]
    for argv, err, match in cases:
        assert run(argv) == err.exit_code, argv
        assert match in _error_line(capsys), argv
    # --model is an enum choice: Typer's usage error (exit 2) names the bad value and the choices
    assert run(["eval", str(ok), "--scale", "4", "--model", "lanczos"]) == InputError.exit_code
    assert "lanczos" in capsys.readouterr().err


def test_tiny_image_is_a_clear_error(tmp_path: Path) -> None:
    _hr_folder(tmp_path / "tiny", n=1, size=(16, 16))
    with pytest.raises(DatasetError, match="too small"):
        evaluate("bicubic", [str(tmp_path / "tiny")], 4, device="cpu")
