"""``nalasr train`` and ``nalasr export``: parse arguments, call :mod:`nalasr.train`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ..errors import InputError
from ..train.config import TrainConfig, load_toml
from .app import app, console, out


def _parse_scales(text: str) -> list[int]:
    try:
        return [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise InputError(f"--scale takes 2, 3, 4 or a list like 2,3,4; got {text!r}") from None


@app.command("train")
def train_cmd(
    scale: Optional[str] = typer.Option(None, "--scale", help="2, 3, 4, or several (2,3,4): one shared trunk."),
    data: Optional[list[Path]] = typer.Option(None, "--data", help="Folder of HR images (DIV2K layout ok); repeat for more."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with any TrainConfig field."),
    variant: Optional[str] = typer.Option(None, help="Model variant (see `nalasr models`)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Run folder (checkpoints, log, weights)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest checkpoint in --out."),
    init: Optional[Path] = typer.Option(None, "--init", help="Start the trunk from these weights (e.g. x2 for x4)."),
    steps: Optional[int] = typer.Option(None, help="Schedule length in steps."),
    batch: Optional[int] = typer.Option(None, help="Global batch size."),
    patch: Optional[int] = typer.Option(None, help="LR patch side."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate."),
    max_minutes: Optional[float] = typer.Option(None, help="Stop and checkpoint after this many minutes."),
    fit_schedule: Optional[bool] = typer.Option(None, "--fit-schedule/--no-fit-schedule",
                                                help="Fit the LR schedule's length to --max-minutes."),
    val_set: Optional[str] = typer.Option(None, help="Validation set name or folder ('' disables)."),
    val_every: Optional[int] = typer.Option(None, help="Validate every N steps."),
    data_root: Optional[Path] = typer.Option(None, help="Where named validation sets live."),
    device: Optional[str] = typer.Option(None, help="auto, cpu, cuda, cuda:N (torchrun picks per process)."),
    compile: Optional[bool] = typer.Option(None, "--compile/--no-compile", help="torch.compile on CUDA."),
    restart: bool = typer.Option(False, "--restart", help="With --resume: a new warm-up and decay from the resume step, peak --lr (a warm restart)."),
    cuda_graphs: Optional[bool] = typer.Option(None, "--cuda-graphs/--no-cuda-graphs",
                                               help="Replay the trunk's forward+backward from CUDA graphs (also under torchrun)."),
    seed: Optional[int] = typer.Option(None),
) -> None:
    """Train NaLaSR (single process, or under torchrun with DistributedDataParallel)."""
    from ..train.checkpoint import list_checkpoints
    from ..train.loop import Trainer, resume_config

    fields: dict = {}
    if resume and out_dir is not None and list_checkpoints(out_dir / "checkpoints"):
        fields = resume_config(out_dir).to_dict()  # the run's own settings; a --config file and flags override them
    if config is not None:
        fields.update(load_toml(config))
    cli = {"scales": _parse_scales(scale) if scale else None, "data": [str(d) for d in data] if data else None,
           "variant": variant, "out": str(out_dir) if out_dir else None, "init": str(init) if init else None,
           "steps": steps, "batch": batch, "patch": patch, "lr": lr, "max_minutes": max_minutes, "fit_schedule": fit_schedule,
           "val_set": val_set, "val_every": val_every, "data_root": str(data_root) if data_root else None,
           "device": device, "compile": compile, "cuda_graphs": cuda_graphs, "seed": seed, "restart": restart or None}
    fields.update({k: v for k, v in cli.items() if v is not None})
    cfg = TrainConfig.from_dict(fields)
    if not cfg.data:
        raise InputError("no training data: pass --data DIR (a folder of HR images, or a DIV2K root)")

    # Everything that can be wrong with the input fails here, before the progress display starts.
    trainer = Trainer(cfg, resume=resume, log=lambda m: console.print(m))
    with trainer:
        if not trainer.dist.main:  # one display per run: rank 0's
            trainer.run()
            return
        columns = (TextColumn("[bold]train"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TextColumn("{task.fields[info]}"), TimeRemainingColumn())
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task("train", total=cfg.steps, completed=trainer.step, info="")

            def progress(rec: dict) -> None:
                if "val" in rec:
                    v = rec["val"]
                    bar.console.print("val step {}: ".format(v["step"]) + "  ".join(
                        f"x{s} {v[f'psnr_x{s}']:.2f} dB / {v[f'ssim_x{s}']:.4f}" for s in cfg.scales))
                else:
                    bar.update(task, total=cfg.steps, completed=rec["step"],
                               info=f"loss {rec['loss']:.4f}  {rec['it_s']:.1f} it/s  lr {rec['lr']:.2e}")

            trainer.log = lambda m: bar.console.print(m)
            result = trainer.run(progress)
    out.print(f"stopped at step {result.step}; weights: " + ", ".join(str(p) for p in result.exported))
