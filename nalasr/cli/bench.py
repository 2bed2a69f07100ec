"""``nalasr bench``: whole-image latency and peak memory, NaLa beside softmax attention in the same network."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.console import Console
from rich.table import Table

from ..errors import BatchFailures, InputError
from .app import app, console, out

if TYPE_CHECKING:  # torch: imported by the command, not by --help
    from ..bench import report
    from ..bench import sweep as lib

_SWEEP_FLAGS = ("--sizes", "--scales", "--precisions", "--devices", "--variants", "--attention", "--find-max")


def _split(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in _split(text))
    except ValueError:
        raise InputError(f"{flag} takes comma-separated integers, got {text!r}") from None


def _sweeps(preset: str | None, sizes: str | None, scales: str | None, precisions: str | None,
            devices: str | None, variants: str | None, attention: str | None, find_max: bool) -> tuple[tuple[lib.Sweep, ...], lib.BenchOptions]:
    from ..bench import sweep as lib

    given = [f for f, v in zip(_SWEEP_FLAGS, (sizes, scales, precisions, devices, variants, attention, find_max)) if v]
    if preset is not None:
        if preset not in lib.PRESETS:
            raise InputError(f"unknown preset {preset!r}: use {', '.join(lib.PRESETS)}")
        if given:
            raise InputError(f"--preset {preset} sets the sweep itself; drop {', '.join(given)}")
        p = lib.PRESETS[preset]
        return p.sweeps, p.options
    sweep = lib.Sweep(
        sizes=tuple(lib.parse_size(s) for s in _split(sizes)) if sizes else None,
        scales=_ints(scales, "--scales") if scales else (4,),
        precisions=_split(precisions) if precisions else ("auto",),
        devices=_split(devices) if devices else ("auto",),
        variants=_split(variants) if variants else (lib.DEFAULT_VARIANT,),
        attentions=tuple(lib.parse_attention(a) for a in _split(attention)) if attention else lib.DEFAULT_ATTENTIONS,
        find_max=find_max,
    )
    for name, value in (("--sizes", sweep.sizes), ("--scales", sweep.scales), ("--precisions", sweep.precisions),
                        ("--devices", sweep.devices), ("--variants", sweep.variants), ("--attention", sweep.attentions)):
        if value is not None and not value:
            raise InputError(f"{name} is empty")
    return (sweep,), lib.BenchOptions()


def _rich_progress(bar: Progress) -> lib.Progress:
    """The sweep's progress callbacks drawn on ``bar`` (a class made here: lib.Progress comes with torch)."""
    from ..bench import report
    from ..bench import sweep as lib

    class RichProgress(lib.Progress):
        def __init__(self) -> None:
            self.bar = bar
            self.task = bar.add_task("bench", total=None)

        def start(self, total: int) -> None:
            self.bar.update(self.task, total=total)

        def case(self, label: str) -> None:
            self.bar.update(self.task, description=label)

        def done(self, r: lib.BenchRecord) -> None:
            what = (f"{r.median_ms:9.1f} ms  {r.peak_gib:7.3f} GiB" if r.status == "ok" else report.status_text(r))
            self.bar.console.print(f"{r.attention:>20} {r.precision} x{r.scale} {r.variant:>7} {r.size:>10}"
                                   f"{' (max)' if r.find_max else ''}  {what}", soft_wrap=True, highlight=False)
            self.bar.advance(self.task)

    return RichProgress()


def _summary(records: list[lib.BenchRecord]) -> Table:
    from ..bench import report

    table = Table(title="nalasr bench", title_justify="left")
    for col, justify in (("attention", "left"), ("op", "left"), ("variant", "left"), ("x", "right"),
                         ("prec", "left"), ("device", "left"), ("LR", "right"), ("tokens", "right"),
                         ("median ms", "right"), ("MP/s", "right"), ("peak GiB", "right"), ("status", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in records:
        ok = r.status == "ok"
        table.add_row(r.attention + (" (max)" if r.find_max else ""), r.backend, r.variant, str(r.scale), r.precision,
                      r.device, r.size, f"{r.tokens:,}", f"{r.median_ms:.1f}" if ok else "-",
                      f"{r.mpix_per_s:.1f}" if ok else "-", f"{r.peak_gib:.3f}" if ok else "-",
                      "ok" if ok and not r.message else report.status_text(r))
    return table


def _targets(checks: list[report.TargetCheck]) -> Table:
    table = Table(title="targets (issue 6)", title_justify="left")
    for col in ("target", "measured", "met"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.target, c.measured, "n/a" if c.passed is None else ("[green]yes[/]" if c.passed else "[red]no[/]"))
    return table


@app.command("bench")
def bench(
    preset: Annotated[Optional[str], typer.Option("--preset", help="A named sweep: 'cpu' (256x256 LR x4, the CPU target) or 'h200' (the GPU targets, NaLa vs softmax, largest size).")] = None,
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="LR sizes HxW, comma-separated. Default: 192x256,270x480,540x960,1080x1920 on CUDA; 48x48 on CPU.")] = None,
    scales: Annotated[Optional[str], typer.Option("--scales", help="Comma-separated scales from 2,3,4. Default: 4.")] = None,
    precisions: Annotated[Optional[str], typer.Option("--precisions", "--precision", help="Comma-separated: auto,fp32,fp16,bf16 (auto: fp16 on CUDA, fp32 on CPU). Default: auto.")] = None,
    devices: Annotated[Optional[str], typer.Option("--devices", "--device", help="Comma-separated: auto,cpu,cuda,cuda:N. Default: auto.")] = None,
    variants: Annotated[Optional[str], typer.Option("--variants", "--variant", help="Comma-separated model variants (small,default). Default: default.")] = None,
    attention: Annotated[Optional[str], typer.Option("--attention", help="Comma-separated: nala (=nala-auto), nala-triton, nala-reference, softmax-sdpa, softmax-materialised. Default: nala,softmax-sdpa,softmax-materialised.")] = None,
    find_max: Annotated[bool, typer.Option("--find-max", help="Also grow each configuration's input until it no longer fits (CUDA only).")] = False,
    warmup: Annotated[Optional[int], typer.Option("--warmup", help="Untimed forwards first. Default: 3 on CUDA, 1 on CPU.")] = None,
    repeats: Annotated[Optional[int], typer.Option("--repeats", help="Timed forwards; the median is reported. Default: 10 on CUDA, 3 on CPU.")] = None,
    weights: Annotated[Optional[Path], typer.Option("--weights", help="A weights file instead of random weights (its variant and scale are used).")] = None,
    threads: Annotated[Optional[int], typer.Option("--threads", help="CPU threads for torch.")] = None,
    max_forward_s: Annotated[Optional[float], typer.Option("--max-forward-s", help="Skip a case predicted to take longer than this per forward. Default: 30.")] = None,
    max_case_s: Annotated[Optional[float], typer.Option("--max-case-s", help="Cut warm-up and repeats of one case to fit this. Default: 45.")] = None,
    time_budget: Annotated[Optional[float], typer.Option("--time-budget", help="Seconds for the whole sweep; later cases are recorded as skipped.")] = None,
    json_path: Annotated[Optional[Path], typer.Option("--json", help="Write the records and environment as JSON here.")] = None,
    markdown_path: Annotated[Optional[Path], typer.Option("--markdown", help="Write a markdown report here.")] = None,
    plot_path: Annotated[Optional[Path], typer.Option("--plot", help="Write a PNG of latency and peak memory against token count (needs matplotlib: the 'plot' extra).")] = None,
    cuda_graphs: Annotated[bool, typer.Option("--cuda-graphs/--no-cuda-graphs", help="On CUDA, time repeated forwards as upscale runs them: replayed from a CUDA graph (up to 540x960 LR). --no-cuda-graphs: eager PyTorch every time.")] = True,
) -> None:
    """Whole-image latency and peak memory of NaLaSR, beside the same network with softmax attention.

    A result, an OOM and a skip are all rows of the report; the exit code is non-zero only when a case
    failed with an error. Random weights unless --weights (latency and memory do not depend on them).
    """
    from ..bench import report
    from ..bench import sweep as lib
    from ..inference.runtime import set_threads

    sweeps, options = _sweeps(preset, sizes, scales, precisions, devices, variants, attention, find_max)
    # (BenchOptions field, value, flag, smallest allowed)
    limits = (("warmup", warmup, "--warmup", 0), ("repeats", repeats, "--repeats", 1),
              ("max_forward_s", max_forward_s, "--max-forward-s", 0.001), ("max_case_s", max_case_s, "--max-case-s", 0.001),
              ("time_budget_s", time_budget, "--time-budget", 0.001))
    for _field, value, flag, low in limits:
        if value is not None and value < low:
            raise InputError(f"{flag} must be at least {low:g}, got {value:g}")
    overrides = {f: v for f, v, _flag, _low in limits if v is not None}
    if weights is not None:
        overrides["weights"] = str(weights)
    options = dataclasses.replace(options, **overrides, cuda_graphs=cuda_graphs)
    set_threads(threads)
    if plot_path is not None:
        report.require_matplotlib()  # before minutes of measuring, not after
    command = _command(preset=preset, sizes=sizes, scales=scales, precisions=precisions, devices=devices,
                       variants=variants, attention=attention, find_max=find_max, warmup=warmup, repeats=repeats,
                       weights=weights, threads=threads, max_forward_s=max_forward_s, max_case_s=max_case_s,
                       time_budget=time_budget, json=json_path, markdown=markdown_path, plot=plot_path,
                       no_cuda_graphs=not cuda_graphs)
    load = report.load_average()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        records = lib.run_sweeps(sweeps, options, _rich_progress(bar))
    report.write_reports(records, json_path=json_path, markdown_path=markdown_path, plot_path=plot_path, command=command,
                      load_at_start=load)
    # Piped into a file or a log, rich would squeeze the tables to 80 columns: print them wide there.
    wide = out if out.is_terminal else Console(file=out.file, highlight=False, width=180)
    wide.print(_summary(records))
    checks = report.check_targets(records)
    if checks:
        wide.print(_targets(checks))
    if options.weights is None:
        out.print(lib.RANDOM_WEIGHTS_NOTE)
    for path in (json_path, markdown_path, plot_path):
        if path is not None:
            out.print(f"wrote {path}")
    errors = [r for r in records if r.status == "error"]
    if errors:
        raise BatchFailures(f"{len(errors)} of {len(records)} case(s) failed with an error, first: "
                            f"{errors[0].attention} {errors[0].size}: {errors[0].message}")


def _command(**params: object) -> str:
    """The command line that reproduces this run (options given, in a fixed order)."""
    parts = ["nalasr", "bench"]
    for name, value in params.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value is not None and value is not False:  # 0 is a value (--warmup 0), False is an unset flag
            parts += [flag, str(value)]
    return shlex.join(parts)
