"""``nalasr worker start|status|stop|run``: a resident process that later ``nalasr upscale`` commands hand their
jobs to (:mod:`nalasr.worker`). Imports no torch: ``start``, ``status`` and ``stop`` talk to the worker."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, console, out
from .choices import Variant, value

worker_app = typer.Typer(help="A resident worker that keeps the network loaded: later `nalasr upscale` commands "
                              "hand it their jobs and skip the start-up (imports, CUDA, weights, first forward).",
                         no_args_is_help=True)
app.add_typer(worker_app, name="worker")

DeviceOpt = Annotated[str, typer.Option("--device", help="Where the networks are warmed up: auto, cpu, cuda, cuda:N "
                                                         "(each job still runs on the --device it asks for).")]
IdleOpt = Annotated[float, typer.Option("--idle-minutes", min=0.05, help="Exit after this long without a job.")]
ScaleOpt = Annotated[list[int], typer.Option("--scale", "-s", help="Scales to load and warm up now (repeat: -s 2 -s 4).")]
VariantOpt = Annotated[Optional[Variant], typer.Option("--variant", show_default=False,
                                                       help="Which shipped model to warm up (default: the default variant).")]


def _run_args(device: str, idle_minutes: float, scale: list[int], variant: Variant | None) -> list[str]:
    args = ["--device", device, "--idle-minutes", str(idle_minutes), *(a for s in scale for a in ("--scale", str(s)))]
    return args + (["--variant", value(variant)] if variant is not None else [])


@worker_app.command("start")
def start_command(device: DeviceOpt = "auto", idle_minutes: IdleOpt = 15.0, scale: ScaleOpt = [4],  # noqa: B006
                  variant: VariantOpt = None,
                  log: Annotated[Optional[Path], typer.Option("--log", show_default=False,
                                                              help="The worker's log (default: beside its socket).")] = None
                  ) -> None:
    """Start a worker in the background and wait until it is ready (networks loaded, kernels warm)."""
    from ..worker import client, protocol

    path = protocol.socket_path()
    protocol.private_folder(path, create=True)
    log = log or path.with_name("worker.log")
    t0 = time.perf_counter()
    info = client.start(_run_args(device, idle_minutes, scale, variant), log)
    console.print(f"worker pid {info['pid']} ready in {time.perf_counter() - t0:.1f} s on {info['device']} "
                  f"({', '.join(info['networks'])}); it exits after {idle_minutes:g} min idle. Log: {log}",
                  soft_wrap=True, highlight=False)


@worker_app.command("run")
def run_command(device: DeviceOpt = "auto", idle_minutes: IdleOpt = 15.0, scale: ScaleOpt = [4],  # noqa: B006
                variant: VariantOpt = None) -> None:
    """Run a worker in this terminal (Ctrl-C stops it); `start` runs this in the background."""
    from ..inference.runtime import check_scale
    from ..worker.server import serve

    serve(device, idle_minutes * 60, tuple(check_scale(s) for s in scale), value(variant))


@worker_app.command("status")
def status_command(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Say whether a worker is running, and its pid, device, networks, jobs and memory (exit 1 when none)."""
    from ..worker import client

    info = client.status()
    if as_json:
        out.print_json(json.dumps(info))
    elif info is None:
        console.print("no worker is running (start one: nalasr worker start)")
    else:
        busy = f"busy for {info['busy_s']} s" if info.get("busy_s") is not None else "idle"
        memory = f", {info['cuda_reserved_bytes'] / 2**20:,.0f} MiB of CUDA memory held" \
            if info.get("cuda_reserved_bytes") else ""
        out.print(f"worker pid {info['pid']}: {busy}, up {info['uptime_s']:.0f} s, {info['jobs']} job(s), "
                  f"{info['images']} image(s); {', '.join(info['networks']) or 'no network loaded'}{memory}",
                  soft_wrap=True)
    if info is None:
        raise typer.Exit(1)


@worker_app.command("stop")
def stop_command() -> None:
    """Stop the worker (after the job it is running, if any)."""
    from ..worker import client

    info = client.stop()
    console.print("no worker was running" if info is None else
                  f"worker pid {info['pid']} stopped after {info['jobs']} job(s)", highlight=False)
