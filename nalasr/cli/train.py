"""``nalasr train``: parse arguments, call :func:`nalasr.train.loop.train_with_options`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ..errors import InputError
from ..train.config import TrainConfig
from .app import app, console, out
from .choices import Variant, value


def _parse_scales(text: str) -> list[int]:
    try:
        return [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise InputError(f"--scale takes 2, 3, 4 or a list like 2,3,4; got {text!r}") from None


@app.command("train")
def train_cmd(
    scale: Annotated[Optional[str], typer.Option("--scale", help="2, 3, 4, or several (2,3,4): one shared trunk.")] = None,
    data: Annotated[Optional[list[Path]], typer.Option("--data", help="Folder of HR images (DIV2K layout ok); repeat for more.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML file with any TrainConfig field.")] = None,
    variant: Annotated[Optional[Variant], typer.Option(help="Model variant (see `nalasr models`).")] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run folder (checkpoints, log, weights).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the newest checkpoint in --out.")] = False,
    init: Annotated[Optional[Path], typer.Option("--init", help="Start the trunk from these weights (e.g. x2 for x4).")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Schedule length in steps.")] = None,
    batch: Annotated[Optional[int], typer.Option(help="Global batch size.")] = None,
    patch: Annotated[Optional[int], typer.Option(help="LR patch side.")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", help="Peak learning rate.")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(help="Stop and checkpoint after this many minutes.")] = None,
    fit_schedule: Annotated[Optional[bool], typer.Option("--fit-schedule/--no-fit-schedule", help="Fit the LR schedule's length to --max-minutes.")] = None,
    val_set: Annotated[Optional[str], typer.Option(help="Validation set name or folder ('' disables).")] = None,
    val_every: Annotated[Optional[int], typer.Option(help="Validate every N steps.")] = None,
    data_root: Annotated[Optional[Path], typer.Option(help="Where named validation sets live.")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda, cuda:N (torchrun picks per process).")] = None,
    compile: Annotated[Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile on CUDA.")] = None,
    restart: Annotated[bool, typer.Option("--restart", help="With --resume: a new warm-up and decay from the resume step, peak --lr (a warm restart).")] = False,
    cuda_graphs: Annotated[Optional[bool], typer.Option("--cuda-graphs/--no-cuda-graphs", help="Replay the trunk's forward+backward from CUDA graphs (also under torchrun).")] = None,
    seed: Annotated[Optional[int], typer.Option()] = None,
) -> None:
    """Train NaLaSR (single process, or under torchrun with DistributedDataParallel)."""
    from ..train.loop import train_with_options

    options = {"scales": _parse_scales(scale) if scale else None, "data": [str(d) for d in data] if data else None,
               "variant": value(variant), "out": str(out_dir) if out_dir else None, "init": str(init) if init else None,
               "steps": steps, "batch": batch, "patch": patch, "lr": lr, "max_minutes": max_minutes,
               "fit_schedule": fit_schedule, "val_set": val_set, "val_every": val_every,
               "data_root": str(data_root) if data_root else None, "device": device, "compile": compile,
               "cuda_graphs": cuda_graphs, "seed": seed, "restart": restart or None}
    result = train_with_options(options, config_file=config, resume=resume, log=lambda m: console.print(m),
                                display=_display)
    out.print(f"stopped at step {result.step}; weights: " + ", ".join(str(p) for p in result.exported))


@contextmanager
def _display(cfg: TrainConfig, start: int) -> Iterator[tuple[Callable[[str], None], Callable[[dict], None]]]:
    """A progress bar over the run's steps, and the log lines printed above it."""
    columns = (TextColumn("[bold]train"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TextColumn("{task.fields[info]}"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("train", total=cfg.steps, completed=start, info="")

        def progress(rec: dict) -> None:
            if "val" in rec:
                v = rec["val"]
                bar.console.print("val step {}: ".format(v["step"]) + "  ".join(
                    f"x{s} {v[f'psnr_x{s}']:.2f} dB / {v[f'ssim_x{s}']:.4f}" for s in cfg.scales))
            else:
                bar.update(task, total=cfg.steps, completed=rec["step"],
                           info=f"loss {rec['loss']:.4f}  {rec['it_s']:.1f} it/s  lr {rec['lr']:.2e}")

        yield (lambda m: bar.console.print(m)), progress
