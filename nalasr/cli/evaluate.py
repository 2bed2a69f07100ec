"""``nalasr eval`` and ``nalasr datasets list|download``: parse arguments, call the library, print tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import InputError
from ..fsutil import atomic_write_with
from .app import app, console, out

if TYPE_CHECKING:  # the library (torch, the model) is imported only when a command runs
    from ..evaluate import EvalReport, SetReport

datasets_app = typer.Typer(help="Benchmark datasets: where they are, and downloading them.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@app.command("eval")
def eval_cmd(
    sets: list[str] = typer.Argument(..., metavar="NAME|FOLDER...",
                                     help="set5, set14, bsd100 (b100), urban100, manga109, div2k-valid, or folders."),
    scale: int = typer.Option(..., "--scale", "-s", help="2, 3 or 4."),
    weights: Optional[Path] = typer.Option(None, "--weights", "-w", help="Weights file (default: the shipped ones)."),
    variant: Optional[str] = typer.Option(None, help="Shipped variant (see `nalasr models`)."),
    model_kind: str = typer.Option("nalasr", "--model", help="nalasr, or bicubic for the baseline row."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N."),
    precision: str = typer.Option("auto", help="auto (fp16 on CUDA, fp32 on CPU), fp32, fp16, bf16."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Where named sets live (else $NALASR_DATA)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write per-image rows and means to this CSV."),
    save_dir: Optional[Path] = typer.Option(None, "--save-dir", help="Write the SR images (PNG) under this folder."),
    crop12: bool = typer.Option(False, "--crop12", help="Crop HR to a multiple of 12 (old MATLAB tables)."),
    self_ensemble: bool = typer.Option(False, "--self-ensemble",
                                       help="Average the network over the 8 flips/rotations (8x the time)."),
) -> None:
    """Score a model on benchmark sets with the standard protocol (MATLAB bicubic LR, Y PSNR/SSIM)."""
    if scale not in (2, 3, 4):
        raise InputError(f"--scale must be 2, 3 or 4, got {scale}")
    if model_kind not in ("nalasr", "bicubic"):
        raise InputError(f"--model must be nalasr or bicubic, got {model_kind!r}")
    if model_kind == "bicubic" and (weights is not None or variant is not None or self_ensemble):
        raise InputError("--weights/--variant/--self-ensemble do not apply to --model bicubic; drop them or use "
                         "--model nalasr")
    if csv_path is not None and csv_path.is_dir():
        raise InputError(f"--csv {csv_path} is a folder; give a file path")
    from ..datasets import resolve_set
    from ..evaluate import evaluate

    for s in sets:  # a bad name fails before weights are loaded
        resolve_set(s, data_root)
    if model_kind == "bicubic":
        model: object = "bicubic"
    else:
        from ..api import load_model

        model = load_model(scale, variant, weights, device)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(f"{name} x{scale}", total=total)
            bar.update(tasks[name], completed=done)

        report = evaluate(model, list(sets), scale, data_root=data_root, device=device,  # type: ignore[arg-type]
                          precision=precision, save_dir=save_dir, crop12=crop12, progress=progress,
                          weights=str(weights) if weights else None, self_ensemble=self_ensemble)
    if csv_path is not None:
        _write_csv(report, csv_path)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
        return
    for s in report.sets:
        out.print(_set_table(report, s))
    if len(report.sets) > 1:
        out.print(_summary_table(report))
    out.print(_protocol_line(report), soft_wrap=True)


def _set_table(report: EvalReport, s: SetReport) -> Table:
    t = Table(title=f"{s.name} x{report.scale} — {report.model}, {report.device} {report.precision}",
              caption=f"{s.folder}; LR: {s.lr_source}")
    for col in ("image", "PSNR", "SSIM", "ms", "peak MiB"):
        t.add_column(col, justify="left" if col == "image" else "right")
    for i in s.images:
        t.add_row(i.name, f"{i.psnr:.2f}", f"{i.ssim:.4f}", f"{i.ms:.1f}", f"{i.peak_bytes / 2**20:.1f}")
    t.add_section()
    t.add_row("mean", f"{s.psnr:.2f}", f"{s.ssim:.4f}", f"{s.ms:.1f}", f"{s.peak_bytes / 2**20:.1f}", style="bold")
    return t


def _summary_table(report: EvalReport) -> Table:
    """One row per model, one PSNR/SSIM column per set, as papers print it."""
    t = Table(title=f"x{report.scale} PSNR/SSIM (Y)")
    t.add_column("model")
    for s in report.sets:
        t.add_column(s.name, justify="right")
    t.add_row(report.model, *(f"{s.psnr:.2f}/{s.ssim:.4f}" for s in report.sets))
    return t


def _protocol_line(report: EvalReport) -> str:
    p = report.protocol
    return f"protocol: LR {p['lr']}; {p['channel']}; {p['hr_crop']}; {p['border']}; SSIM {p['ssim']}"


def _write_csv(report: EvalReport, path: Path) -> None:
    rows = report.rows()

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    if not path.parent.exists():
        raise InputError(f"--csv {path}: folder {path.parent} does not exist")
    atomic_write_with(path, write)


# ------------------------------------------------------------------------------------------- datasets


@datasets_app.command("list")
def datasets_list(
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Data root (else $NALASR_DATA, else datasets/)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The known sets, where each is found under the data root, and which can be downloaded."""
    from ..datasets import data_root as root_of
    from ..datasets import list_sets

    rows = list_sets(data_root)
    if as_json:
        out.print_json(json.dumps({"data_root": str(root_of(data_root)), "sets": rows}))
        return
    t = Table(title=f"datasets under {root_of(data_root)}")
    for col in ("name", "images", "folder", "download"):
        t.add_column(col)
    for r in rows:
        n = "-" if r["images"] is None else f"{r['images']}/{r['expected']}"
        t.add_row(str(r["name"]), n, str(r["folder"] or "missing"), "yes" if r["download"] else "by hand")
    out.print(t)


@datasets_app.command("download")
def datasets_download(
    name: str = typer.Argument(..., help="set5, set14, bsd100, urban100 or div2k-valid."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Data root (else $NALASR_DATA, else datasets/)."),
    force: bool = typer.Option(False, "--force", help="Replace the set if it is already there."),
) -> None:
    """Download a set's public archive (pinned checksum, resumable) and unpack it under the data root."""
    from ..datasets import download

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(f"downloading {name}", total=None)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        folder = download(name, data_root, force=force, progress=progress)
    out.print(f"{name}: {folder}")
