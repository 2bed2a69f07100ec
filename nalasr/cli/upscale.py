"""``nalasr upscale``: parse the arguments, run :func:`nalasr.inference.batch.upscale_paths`, report.

Imports nothing heavy at module level: ``nalasr upscale --help`` must not load torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import BatchFailures, InputError, NalasrError, Terminated
from ..io.defaults import DEFAULT_MAX_PIXELS, DEFAULT_PNG_COMPRESSION, DEFAULT_QUALITY
from .app import app, console, out
from .choices import AttentionBackend, Ext, Precision, Runtime, Variant, value

if TYPE_CHECKING:
    from ..inference.jobs import BatchReport, ItemResult


@app.command("upscale")
def upscale_command(
    inputs: Annotated[list[str], typer.Argument(
        metavar="INPUT", show_default=False,
        help="Image files (read by content), folders, or globs such as 'photos/*.jpg' (quote them).")],
    scale: Annotated[int, typer.Option("--scale", "-s", help="Upscaling factor: 2, 3 or 4.")] = 4,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", show_default=False,
        help="Output folder (created; mirrors subfolders with --recursive), or a file path for one input file. "
             "Default: beside each input.")] = None,
    weights: Annotated[Optional[Path], typer.Option(
        "--weights", show_default=False, help="A NaLaSR weights file instead of the shipped weights.")] = None,
    variant: Annotated[Optional[Variant], typer.Option(
        "--variant", show_default=False, help="Which shipped model (default: the default variant).")] = None,
    device: Annotated[str, typer.Option(
        "--device", help="auto, cpu, cuda, cuda:N, or a list (cuda:0,cuda:2). cuda with several GPUs visible uses them "
                         "all, one worker process each.")] = "auto",
    precision: Annotated[Precision, typer.Option(
        "--precision", help="auto = fp16 on CUDA, fp32 on CPU. A non-finite half-precision output is redone in fp32.")
    ] = Precision.auto,
    threads: Annotated[Optional[int], typer.Option(
        "--threads", min=1, show_default=False, help="CPU threads for PyTorch (default: PyTorch's choice).")] = None,
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Include subfolders of folder inputs.")] = False,
    ext: Annotated[Optional[Ext], typer.Option(
        "--ext", show_default=False, case_sensitive=False,
        help="Output format by extension (default: the input's).")] = None,
    quality: Annotated[int, typer.Option(
        "--quality", "-q", min=1, max=100, help="JPEG/WebP quality.")] = DEFAULT_QUALITY,
    png_compression: Annotated[int, typer.Option(
        "--png-compression", min=0, max=9,
        help="PNG zlib level: 0 fastest and largest, 9 slowest and smallest; pixels are the same at every level."
    )] = DEFAULT_PNG_COMPRESSION,
    skip_existing: Annotated[bool, typer.Option("--skip-existing", help="Leave existing outputs alone.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace existing outputs (never an input).")] = False,
    max_pixels: Annotated[int, typer.Option(
        "--max-pixels", min=1, help="Refuse larger inputs (decompression-bomb guard).")] = DEFAULT_MAX_PIXELS,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print machine-readable results on stdout: per image the read, device, model and write "
                       "times, and the job's images/s.")] = False,
    attention_backend: Annotated[AttentionBackend, typer.Option(
        "--attention-backend", help="auto = fused Triton kernel on CUDA when available, else the PyTorch reference.")
    ] = AttentionBackend.auto,
    runtime: Annotated[Runtime, typer.Option(
        "--runtime", help="torch: this package's network; onnxruntime: an exported --model FILE.onnx.")] = Runtime.torch,
    onnx_model: Annotated[Optional[Path], typer.Option(
        "--model", show_default=False, help="With --runtime onnxruntime: the file `nalasr export` wrote.")] = None,
    self_ensemble: Annotated[bool, typer.Option(
        "--self-ensemble", help="Average the network over the 8 flips/rotations of each image: a little more "
                                "quality for 8x the time.")] = False,
    no_worker: Annotated[bool, typer.Option(
        "--no-worker", help="Run in this process even when a `nalasr worker` is running (by default a running "
                            "worker does the job, without this process's start-up).")] = False,
) -> None:
    """Upscale images, whole (never tiled), and report size, latency and peak memory for each."""
    if skip_existing and overwrite:
        raise InputError("--skip-existing and --overwrite contradict each other: pick one")
    if (runtime is Runtime.onnxruntime) != (onnx_model is not None):
        raise InputError("--runtime onnxruntime and --model FILE.onnx go together")
    options = dict(
        inputs=list(inputs), output=output, scale=scale, weights=None if weights is None else str(weights),
        variant=value(variant), device=device, precision=precision.value, attention_backend=attention_backend.value,
        recursive=recursive, ext=value(ext), quality=quality, png_compression=png_compression,
        existing="skip" if skip_existing else "overwrite" if overwrite else "fail", max_pixels=max_pixels,
        self_ensemble=self_ensemble,
    )
    if not no_worker and onnx_model is None:
        report = _via_worker({**options, "threads": threads}, as_json)
        if report is not None:
            _summary(report, as_json)
            return

    from ..inference.batch import upscale_paths
    from ..inference.runtime import set_threads

    set_threads(threads)
    progress = _progress(enabled=console.is_terminal and not as_json)

    def interrupted(report: BatchReport) -> None:  # the report so far, before the one-line message
        progress.stop()
        _summary(report, as_json)

    try:
        with progress:
            task = progress.add_task("upscaling", total=None)
            report = upscale_paths(
                **options, onnx=onnx_model,
                on_start=lambda n: progress.update(task, total=n),
                on_item=lambda item: _live(progress, task, item),
                on_warning=lambda text: progress.console.print(f"[yellow]warning:[/] {text}", highlight=False,
                                                               soft_wrap=True),
                on_interrupt=interrupted,
            )
    except KeyboardInterrupt as e:  # the CLI prints this one line and exits 130 (Ctrl-C) / 143 (SIGTERM)
        done = getattr(e, "report", None)
        if done is None:
            raise
        raise _stopped(e, done) from e
    _summary(report, as_json)


def _via_worker(options: dict, as_json: bool) -> BatchReport | None:
    """The job done by a running ``nalasr worker`` (events shown as they come); None when there is none, or it
    will not serve this command (said in one note), and this process should do it."""
    from ..inference.jobs import BatchReport, ItemResult
    from ..worker import client

    progress = _progress(enabled=console.is_terminal and not as_json)
    tasks = []  # the bar appears with the worker's first answer: none shows when no worker is running

    def on_event(message: dict) -> None:
        if not tasks:
            tasks.append(progress.add_task("upscaling (worker)", total=None))
        task = tasks[0]
        if message["event"] == "start":
            progress.update(task, total=message["n"])
        elif message["event"] == "item":
            _live(progress, task, ItemResult.from_dict(message["item"]))
        elif message["event"] == "warning":
            progress.console.print(f"[yellow]warning:[/] {message['text']}", highlight=False, soft_wrap=True)

    try:
        with progress:
            done = client.run_upscale(options, on_event)
    except client.Refused as e:
        console.print(f"[yellow]note:[/] the running worker does not serve this command ({e}); running it here",
                      highlight=False, soft_wrap=True)
        return None
    except KeyboardInterrupt as e:
        partial = getattr(e, "report_dict", None)
        if partial is None:
            raise
        report = BatchReport.from_dict(partial)
        _summary(report, as_json)
        raise _stopped(e, report) from e
    return None if done is None else BatchReport.from_dict(done["report"])


def _stopped(e: KeyboardInterrupt, done: BatchReport) -> KeyboardInterrupt:
    """The interrupt again, with the line the CLI prints (Terminated stays Terminated: exit 143)."""
    return type(e)(f"{'terminated (SIGTERM)' if isinstance(e, Terminated) else 'interrupted'}: "
                   f"{done.count('ok')} of {len(done.items)} written, the files in flight finished; run the same "
                   "command with --skip-existing to do the rest")


def _summary(report: BatchReport, as_json: bool) -> None:
    """The table (or JSON), the failures one line each, and the exit code: BatchReport.exit_code's rule."""
    if as_json:
        out.print(json.dumps(report.to_dict(), indent=2), markup=False, highlight=False, emoji=False, soft_wrap=True)
    else:
        out.print(_table(report))
    if report.interrupted:
        return  # the command re-raises the interrupt with its one line; the CLI exits 130 (Ctrl-C) or 143 (SIGTERM)
    failures = report.failures
    code = report.exit_code()
    if len(report.items) == 1 and failures:  # one input: its own one-line error and code
        error = NalasrError(failures[0].error or "failed")
        error.exit_code = code
        raise error
    for item in failures:
        console.print(f"[red]failed:[/] {item.error}", markup=True, highlight=False, soft_wrap=True)
    if failures:
        error = BatchFailures(f"{len(failures)} of {len(report.items)} inputs failed (listed above)")
        error.exit_code = code
        raise error


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not enabled,
    )


def _live(progress: Progress, task, item: ItemResult) -> None:  # noqa: ANN001 (rich's TaskID)
    """Advance the bar; notes (format limits, precision fallback) are said as they happen."""
    progress.advance(task)
    for note in item.notes:
        progress.console.print(f"[yellow]note:[/] {item.input}: {note}", highlight=False, soft_wrap=True)


def _table(report: BatchReport) -> Table:
    table = Table(title=f"nalasr upscale x{report.scale}", title_justify="left")
    # read and write times per image are in --json; the table keeps to 80 columns
    for col, justify in (("input", "left"), ("size", "left"), ("model ms", "right"), ("total ms", "right"),
                         ("peak mem", "right"), ("output", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    kinds = set()
    for item in report.items:
        sizes = f"{_wxh(item.input_size)}→{_wxh(item.output_size)}" if item.output_size else _wxh(item.input_size)
        if item.status == "ok":
            result = item.output or ""
            if item.fell_back:
                result += f" ({item.precision} fallback)"
        elif item.status == "skipped":
            result = f"skipped, exists: {item.output}"
        elif item.status == "interrupted":
            result = "[yellow]not done (interrupted)[/]"
        else:
            result = "[red]failed[/]"
        if item.memory_kind:
            kinds.add(item.memory_kind)
        table.add_row(item.input, sizes, _num(item.model_ms), _num(item.total_ms), _mem(item.peak_memory_bytes), result)
    counts = ", ".join(f"{report.count(s)} {s}" for s in ("ok", "skipped", "failed", "interrupted") if report.count(s)
                       or s != "interrupted")
    memory = {"cuda-allocated": "CUDA memory allocated during the forward", "cpu-peak-rss": "the process's peak RSS"}
    peak = f"; peak mem = {' / '.join(memory.get(k, k) for k in sorted(kinds))}" if kinds else ""
    rate = f" ({report.images_per_s:.2f} images/s)" if report.count("ok") > 1 else ""
    st = report.stage_totals_ms()
    stages = f"\nstages (summed, they overlap): read {st['read_ms'] / 1e3:.2f} s, device {st['device_ms'] / 1e3:.2f} s, " \
             f"write {st['write_ms'] / 1e3:.2f} s" if report.count("ok") > 1 else ""
    table.caption = f"{counts} in {report.wall_s:.2f} s{rate} on {report.device}, {report.precision}{peak}{stages}\n" \
                    f"weights: {report.weights or 'given model'}"
    return table


def _wxh(size: tuple[int, int] | None) -> str:
    return f"{size[0]}x{size[1]}" if size else "-"


def _num(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:,.1f}"


def _mem(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:,.1f} MiB"
