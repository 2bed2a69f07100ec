"""Put measured results and the training story into the shipped weights' cards, and write weights/README.md.

    python tools/update_weights_card.py --eval EVAL_x2.json EVAL_x3.json EVAL_x4.json \
        --log benchmarks/results/training/run1_log.jsonl --command "nalasr train ..."

Each EVAL_*.json is the output of `nalasr eval set5 set14 bsd100 urban100 --scale S --json`. The card
embedded in each safetensors header gains `results` (per set PSNR/SSIM) and the training description;
the tensors are rewritten unchanged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nalasr.model import DEFAULT_VARIANT, SCALES, VARIANTS  # noqa: E402
from nalasr.io.weights import load_weights, read_header, save_weights, shipped_dir, shipped_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Where each shipped variant's training run (checkpoint and log) lives in this repo.
RUN_LOGS = {"default": "training/default_l2/log.jsonl", "small": "training/small_x234/log.jsonl"}

TRAINING_DATA = (  # a card written without --data says this (the training sets of ../shared/datasets)
    "train/ (T91 91, BSD200 200, McMaster 18, 9 LIVE1: 318 images, 43.5 MP) and train_extra/ (285 photographs: "
    "BSDS500's 200 test-split images and high-resolution photo wallpapers from Debian packages and public artwork "
    "repositories, 232.6 MP): 603 HR images, 276 MP. DIV2K is not available on the machines these weights were "
    "trained on."
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", nargs="+", required=True, type=Path)
    ap.add_argument("--variant", default="default")
    ap.add_argument("--log", type=Path, help="training log.jsonl (validation curve)")
    ap.add_argument("--command", default="", help="the training command(s), for the card")
    ap.add_argument("--data", default="", help="what the weights were trained on, for the card")
    ap.add_argument("--schedule", default="", help="how the steps were spent (sessions, restarts), for the card")
    a = ap.parse_args()

    reports = {r["scale"]: r for r in (json.loads(p.read_text()) for p in a.eval)}
    for scale, rep in sorted(reports.items()):
        path = shipped_dir() / shipped_name(a.variant, scale)
        model = load_weights(path, scale=scale)
        card = dict(model.card)  # type: ignore[attr-defined]
        card["training_data"] = a.data or TRAINING_DATA
        card["training_command"] = a.command
        if a.schedule:
            card["training_schedule"] = a.schedule
        card["results"] = {
            "protocol": rep["protocol"], "device": rep["device"], "precision": rep["precision"],
            "sets": {s["name"]: {"psnr": round(s["psnr"], 4), "ssim": round(s["ssim"], 5)} for s in rep["sets"]},
        }
        save_weights(model, path, card)
    logs = {**{v: ROOT / p for v, p in RUN_LOGS.items()}, **({a.variant: a.log} if a.log else {})}
    (shipped_dir() / "README.md").write_text(render(logs))
    print(f"updated {len(reports)} weights cards and {shipped_dir() / 'README.md'}")


def shipped_cards(variant: str) -> list[tuple[int, dict]]:
    """(scale, card) of every shipped file of a variant that carries measured results."""
    rows = []
    for scale in SCALES:
        path = shipped_dir() / shipped_name(variant, scale)
        if path.is_file():
            card = read_header(path)[1]
            if "results" in card:
                rows.append((scale, card))
    return rows


def render(logs: dict[str, Path]) -> str:
    """weights/README.md: one section per shipped variant (from the cards in the files' headers)."""
    lines = [
        "# Shipped weights",
        "",
        "NaLaSR x2 / x3 / x4 per variant (`nalasr_{variant}_x{s}.safetensors`). Each file is safetensors with its",
        "config and its card in the header; `nalasr models` lists them and `nalasr.io.weights.read_header(path)`",
        "returns (config, card).",
        "",
    ]
    for variant in sorted(VARIANTS, key=lambda v: v != DEFAULT_VARIANT):  # the default first
        rows = shipped_cards(variant)
        if rows:
            lines += render_variant(rows, variant, logs.get(variant))
    return "\n".join(lines)


def render_variant(rows: list[tuple[int, dict]], variant: str, log: Path | None) -> list[str]:
    order = ["Set5", "Set14", "BSD100", "Urban100", "Manga109"]  # the papers' column order (cards sort by name)
    sets = sorted(rows[0][1]["results"]["sets"], key=lambda s: (order.index(s) if s in order else len(order), s))
    card0 = rows[0][1]
    lines = [
        f"## `{variant}` variant",
        "",
        f"- Training data: {card0.get('training_data', TRAINING_DATA)}",
        f"- Iterations: {card0['iterations']} steps, one trunk trained jointly for x{card0.get('scales_trained_jointly')}"
        " (each step one scale, taking turns"
        + (f"; the last cycle {card0['scale_cycle']}" if "scale_cycle" in card0 else "")
        + f"; see the schedule); batch {card0['batch']},"
        f" LR patch {card0['patch']}, AdamW, EMA {card0['ema']}, bf16 autocast, one GPU (H200 or H100: see the schedule).",
        f"- Schedule: {card0.get('training_schedule') or 'warm-up, then cosine from lr ' + str(card0['lr'])}",
        f"- Command: `{card0.get('training_command', '')}`",
        *_other_runs(rows),
        "",
        f"### Measured (Y-PSNR / SSIM, the standard protocol: `nalasr eval SETS --scale S --variant {variant}`)",
        "",
        "| scale | " + " | ".join(sets) + " |",
        "|---|" + "---|" * len(sets),
    ]
    for scale, card in rows:
        res = card["results"]["sets"]
        lines.append(f"| x{scale} | " + " | ".join(f"{res[s]['psnr']:.2f} / {res[s]['ssim']:.4f}" for s in sets) + " |")
    r = rows[0][1]["results"]
    lines += ["", f"Measured on {r['device']} in {r['precision']}.", ""]
    if log is not None and log.exists():
        lines += ["### Validation curve (Set5, EMA weights, during training)", "", "| step | x2 | x3 | x4 |", "|---|---|---|---|"]
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            if "val" in rec:
                v = rec["val"]
                lines.append(f"| {v['step']} | " + " | ".join(f"{v.get(f'psnr_x{s}', float('nan')):.2f}" for s in (2, 3, 4)) + " |")
        lines.append("")
    return lines


def _other_runs(rows: list[tuple[int, dict]]) -> list[str]:
    """A line for each scale whose file came from a later run than the first scale's (a scale is replaced alone
    when only its evaluation improved)."""
    card0 = rows[0][1]
    return [f"- x{scale} comes from a later run: {card['iterations']} steps. Schedule: {card.get('training_schedule', '')} "
            f"Command: `{card.get('training_command', '')}`"
            for scale, card in rows[1:] if card["iterations"] != card0["iterations"]]


if __name__ == "__main__":
    main()
