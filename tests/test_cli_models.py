"""``nalasr models``: variants, parameter counts per scale, shipped weights."""

from __future__ import annotations

import json

import pytest
import torch

from nalasr import settings
from nalasr.cli import run
from nalasr.model import SCALES, VARIANTS, count_params, create_model
from nalasr.io.weights import save_weights, shipped_name


@pytest.fixture(scope="module")
def counts() -> dict[tuple[str, int], int]:
    return {(v, s): count_params(create_model(v, s)) for v in VARIANTS for s in SCALES}


@pytest.fixture
def empty_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("NALASR_WEIGHTS", str(tmp_path))
    settings.reload()  # nalasr reads the environment once
    return tmp_path


def test_models_table(capsys, empty_weights, counts):
    assert run(["models"]) == 0
    text = capsys.readouterr().out
    for variant in ("small", "default"):
        assert variant in text
    for (variant, scale), n in counts.items():
        assert f"{n:,}" in text, (variant, scale, n)
    assert "x2" in text and "x3" in text and "x4" in text


def test_models_json(capsys, empty_weights, counts):
    assert run(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["variant"], r["scale"]) for r in rows} == set(counts)
    assert len(rows) == len(counts)
    for r in rows:
        assert r["params"] == counts[r["variant"], r["scale"]]
        assert r["weights"] is None and r["iterations"] is None
    small = max(r["params"] for r in rows if r["variant"] == "small")
    default = max(r["params"] for r in rows if r["variant"] == "default")
    assert small <= 300_000 and default <= 1_000_000


def test_models_lists_shipped_weights(capsys, empty_weights):
    torch.manual_seed(0)
    path = empty_weights / shipped_name("small", 3)
    save_weights(create_model("small", 3), path, card={"iterations": 4321})
    assert run(["models", "--json"]) == 0
    rows = {(r["variant"], r["scale"]): r for r in json.loads(capsys.readouterr().out)}
    assert rows["small", 3]["weights"] == str(path) and rows["small", 3]["iterations"] == 4321
    assert all(r["weights"] is None for k, r in rows.items() if k != ("small", 3))
    assert run(["models"]) == 0
    assert "4321" in capsys.readouterr().out


def test_models_with_a_corrupt_shipped_file(capsys, empty_weights):
    """A broken file in the weights folder is a clean one-line error naming it, not a traceback."""
    bad = empty_weights / shipped_name("default", 4)
    bad.write_bytes(b"\x00" * 10)
    code = run(["models"])
    err = capsys.readouterr().err
    assert code == 3
    assert bad.name in err.replace("\n", "") and "Traceback" not in err


def test_models_help_and_bad_option(capsys):
    assert run(["models", "--help"]) == 0
    assert "--json" in capsys.readouterr().out
    assert run(["models", "--nope"]) == 2


def test_cli_choices_are_the_library_s():
    """The CLI's Enum choices (nalasr.cli.choices) list exactly what the library accepts."""
    from nalasr.cli import choices
    from nalasr.inference.runtime import PRECISIONS
    from nalasr.io.imageio import EXTENSIONS
    from nalasr.ops import BACKENDS

    assert [c.value for c in choices.Variant] == list(VARIANTS)
    assert [c.value for c in choices.AttentionBackend] == list(BACKENDS)
    assert [c.value for c in choices.Precision] == ["auto", *PRECISIONS]
    assert [c.value for c in choices.Ext] == [e[1:] for e in EXTENSIONS]
