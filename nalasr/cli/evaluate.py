"""``nalasr eval`` and ``nalasr datasets list|download``: parse arguments, call the library, print tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated, TYPE_CHECKING, Optional

import typer
from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import InputError
from ..io.defaults import DEFAULT_MAX_PIXELS
from ..io.fsutil import atomic_write_with
from .app import app, console, out
from .choices import ModelKind, Precision, Variant, value

if TYPE_CHECKING:  # the library (torch, the model) is imported only when a command runs
    from ..eval.evaluate import EvalReport, SetReport

datasets_app = typer.Typer(help="Benchmark datasets: where they are, and downloading them.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@app.command("eval")
def eval_cmd(
    sets: Annotated[list[str], typer.Argument(metavar="NAME|FOLDER...", help="set5, set14, bsd100 (b100), urban100, manga109, div2k-valid, or folders.")],
    scale: Annotated[int, typer.Option("--scale", "-s", help="2, 3 or 4.")],
    weights: Annotated[Optional[Path], typer.Option("--weights", "-w", help="Weights file (default: the shipped ones).")] = None,
    variant: Annotated[Optional[Variant], typer.Option(help="Shipped variant (see `nalasr models`).")] = None,
    model_kind: Annotated[ModelKind, typer.Option("--model", help="nalasr, or bicubic for the baseline row.")] = ModelKind.nalasr,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:N.")] = "auto",
    precision: Annotated[Precision, typer.Option(help="auto (fp16 on CUDA, fp32 on CPU), fp32, fp16, bf16.")] = Precision.auto,
    data_root: Annotated[Optional[Path], typer.Option("--data-root", help="Where named sets live (else $NALASR_DATA).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")] = False,
    csv_path: Annotated[Optional[Path], typer.Option("--csv", help="Also write per-image rows and means to this CSV.")] = None,
    save_dir: Annotated[Optional[Path], typer.Option("--save-dir", help="Write the SR images (PNG) under this folder.")] = None,
    crop12: Annotated[bool, typer.Option("--crop12", help="Crop HR to a multiple of 12 (old MATLAB tables).")] = False,
    self_ensemble: Annotated[bool, typer.Option("--self-ensemble", help="Average the network over the 8 flips/rotations (8x the time).")] = False,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Score a set without the files that cannot be scored (listed in the report) instead of failing (exit 4).")] = False,
    max_pixels: Annotated[int, typer.Option("--max-pixels", min=1, help="Refuse images with more pixels (decompression-bomb guard; Pillow's limit).")] = DEFAULT_MAX_PIXELS,
) -> None:
    """Score a model on benchmark sets with the standard protocol (MATLAB bicubic LR, Y PSNR/SSIM).

    A file of a set that cannot be scored (corrupt, empty, unreadable, 16-bit, too large or small) is listed with
    its reason and the command exits 4, after printing what it scored; --skip-bad scores the rest and exits 0."""
    if csv_path is not None and csv_path.is_dir():
        raise InputError(f"--csv {csv_path} is a folder; give a file path")
    from ..eval.evaluate import UnscoredFiles, evaluate_named

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(f"{name} x{scale}", total=total)
            bar.update(tasks[name], completed=done)

        unscored: UnscoredFiles | None = None
        try:
            report = evaluate_named(sets, scale, model=model_kind.value, weights=weights, variant=value(variant),
                                    device=device, precision=precision.value, data_root=data_root,
                                    save_dir=save_dir, crop12=crop12, self_ensemble=self_ensemble,
                                    progress=progress, skip_bad=skip_bad, max_pixels=max_pixels)
        except UnscoredFiles as e:  # show what was scored, then fail (exit 4) naming the files left out
            report, unscored = e.report, e
    if csv_path is not None:
        _write_csv(report, csv_path)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        _print_tables(report)
    if unscored is not None:
        raise unscored


def _print_tables(report: EvalReport) -> None:
    for s in report.sets:
        out.print(_set_table(report, s))
    if len(report.sets) > 1:
        out.print(_summary_table(report))
    out.print(_protocol_line(report), soft_wrap=True)


def _set_table(report: EvalReport, s: SetReport) -> Table:
    ignored = f"; ignored, not images: {', '.join(s.ignored)}" if s.ignored else ""  # said, so nothing drops silently
    t = Table(title=f"{s.name} x{report.scale} — {report.model}, {report.device} {report.precision}",
              caption=f"{s.folder}; LR: {s.lr_source}{ignored}")
    for col in ("image", "PSNR", "SSIM", "ms", "peak MiB"):
        t.add_column(col, justify="left" if col == "image" else "right")
    for i in s.images:
        t.add_row(i.name, f"{i.psnr:.2f}", f"{i.ssim:.4f}", f"{i.ms:.1f}", f"{i.peak_bytes / 2**20:.1f}")
    for b in s.unscored:  # in the table, so the mean below visibly leaves them out
        t.add_row(f"{b.name}: {'skipped' if report.skip_bad else 'not scored'}, {b.reason}", "-", "-", "-", "-",
                  style="red")
    t.add_section()
    mean = f"mean ({len(s.images)} of {s.files})" if s.unscored else "mean"
    t.add_row(mean, f"{s.psnr:.2f}", f"{s.ssim:.4f}", f"{s.ms:.1f}", f"{s.peak_bytes / 2**20:.1f}", style="bold")
    return t


def _summary_table(report: EvalReport) -> Table:
    """One row per model, one PSNR/SSIM column per set, as papers print it."""
    t = Table(title=f"x{report.scale} PSNR/SSIM (Y)")
    t.add_column("model")
    for s in report.sets:
        t.add_column(s.name, justify="right")
    t.add_row(report.model, *(f"{s.psnr:.2f}/{s.ssim:.4f}" + (f" ({len(s.images)} of {s.files})" if s.unscored else "")
                              for s in report.sets))
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
    data_root: Annotated[Optional[Path], typer.Option("--data-root", help="Data root (else $NALASR_DATA, else datasets/).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """The known sets, where each is found under the data root, and which can be downloaded."""
    from ..eval.datasets import data_root as root_of
    from ..eval.datasets import list_sets

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
    name: Annotated[str, typer.Argument(help="set5, set14, bsd100, urban100 or div2k-valid.")],
    data_root: Annotated[Optional[Path], typer.Option("--data-root", help="Data root (else $NALASR_DATA, else datasets/).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the set if it is already there.")] = False,
) -> None:
    """Download a set's public archive (pinned checksum, resumable) and unpack it under the data root."""
    from ..eval.datasets import download

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(f"downloading {name}", total=None)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        folder = download(name, data_root, force=force, progress=progress)
    out.print(f"{name}: {folder}")
