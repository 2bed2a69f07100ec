"""``nalasr train``: parse arguments, call :func:`nalasr.train.loop.train_with_options`.

Every setting defaults to None (not given): a flag the user did not type must not override the --config file or
the resumed run's own settings. ``--help`` shows TrainConfig's defaults (``show_default``), which is what a new run
gets for a setting given nowhere.
"""

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


_D = TrainConfig()  # the defaults --help shows (config.py imports no torch)


def _shown(v: object) -> str:
    """A default as --help shows it (a flag pair shows the flag that is on)."""
    if isinstance(v, list):
        return ",".join(map(str, v))
    return repr(v) if v == "" else str(v)


def _flag(on: str, off: str, v: bool) -> str:
    return on if v else off


@app.command("train")
def train_cmd(
    scale: Annotated[Optional[str], typer.Option("--scale", show_default=_shown(_D.scales), help="2, 3, 4, or several (2,3,4): one shared trunk.")] = None,
    data: Annotated[Optional[list[Path]], typer.Option("--data", help="Folder of HR images (DIV2K layout ok); repeat for more. Up to 10% of its image files may fail to decode (they are left out and named); more refuses the run.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML file with any TrainConfig field; flags given here override it.")] = None,
    variant: Annotated[Optional[Variant], typer.Option(show_default=_D.variant, help="Model variant (see `nalasr models`).")] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out", "-o", show_default=_D.out, help="Run folder (checkpoints, log, weights).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the newest checkpoint in --out, with that run's settings (flags given here override them).")] = False,
    init: Annotated[Optional[Path], typer.Option("--init", help="Start the trunk from these weights (e.g. x2 for x4).")] = None,
    steps: Annotated[Optional[int], typer.Option(show_default=_shown(_D.steps), help="Schedule length in steps.")] = None,
    batch: Annotated[Optional[int], typer.Option(show_default=_shown(_D.batch), help="Global batch size.")] = None,
    patch: Annotated[Optional[int], typer.Option(show_default=_shown(_D.patch), help="LR patch side.")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", show_default=_shown(_D.lr), help="Peak learning rate.")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(show_default=_shown(_D.max_minutes), help="Stop and checkpoint after this many minutes (0: no limit).")] = None,
    fit_schedule: Annotated[Optional[bool], typer.Option("--fit-schedule/--no-fit-schedule", show_default=_flag("--fit-schedule", "--no-fit-schedule", _D.fit_schedule), help="Fit the LR schedule's length to --max-minutes.")] = None,
    val_set: Annotated[Optional[str], typer.Option(show_default=_shown(_D.val_set), help="Validation set name or folder ('' disables).")] = None,
    val_every: Annotated[Optional[int], typer.Option(show_default=_shown(_D.val_every), help="Validate every N steps.")] = None,
    data_root: Annotated[Optional[Path], typer.Option(show_default="$NALASR_DATA, else datasets/", help="Where named validation sets live.")] = None,
    device: Annotated[Optional[str], typer.Option(show_default=_D.device, help="auto, cpu, cuda, cuda:N (torchrun picks per process).")] = None,
    compile: Annotated[Optional[bool], typer.Option("--compile/--no-compile", show_default=_flag("--compile", "--no-compile", _D.compile), help="torch.compile on CUDA.")] = None,
    restart: Annotated[bool, typer.Option("--restart", help="With --resume: a new warm-up and decay from the resume step, peak --lr (a warm restart).")] = False,
    cuda_graphs: Annotated[Optional[bool], typer.Option("--cuda-graphs/--no-cuda-graphs", show_default=_flag("--cuda-graphs", "--no-cuda-graphs", _D.cuda_graphs), help="Replay the trunk's forward+backward from CUDA graphs (also under torchrun).")] = None,
    seed: Annotated[Optional[int], typer.Option(show_default=_shown(_D.seed), help="Seed of the model's init and of the data order.")] = None,
    threads: Annotated[Optional[int], typer.Option("--threads", min=1, show_default="PyTorch's choice", help="CPU threads for PyTorch, per process (a busy CPU trains faster with fewer).")] = None,
) -> None:
    """Train NaLaSR (single process, or under torchrun with DistributedDataParallel).

    Settings: a flag given here, else --config's file, else the resumed run's, else the default shown.
    Image files under --data that do not decode are left out and named; more than 10% of them refuses the run
    (exit 2). A run folder that is a file or not writable is refused (exit 2) before any work."""
    from ..inference.runtime import set_threads
    from ..train.loop import train_with_options

    set_threads(threads)  # before any work: the image decoding and the model already use the thread pool
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
