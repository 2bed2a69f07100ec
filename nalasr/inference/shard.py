"""A batch shared out over several devices: one worker process each, results merged into one report.

Why processes: each GPU needs its own feeding thread, CUDA graphs and host cores for encoding, and a process
per device keeps them from contending for one interpreter. The parent decides every output name first (in
input order, so the rules of :mod:`.jobs` hold across workers), deals the images out round-robin, and merges
what the workers send back in input order. Ctrl-C reaches the workers with the terminal's signal (or is passed
on by the parent): each finishes its files in flight and reports, as a single-device run does.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import errors
from .jobs import ItemResult, Job, Outputs, claim_early, input_of
from .pipeline import Stages, WriteOptions, host_cores, run_jobs
from .runtime import resolve_dtype

_POLL_S = 0.2


@dataclass(frozen=True)
class _Task:
    device: str
    entries: list[tuple[int, Job]]  # (index in the batch, job with its output name decided where known)
    outputs: Outputs  # the parent's, after its claims
    choice: object  # batch.ModelChoice (not imported: batch imports this module)
    write: WriteOptions
    max_pixels: int
    threads: int | None  # torch threads for a CPU worker (the cores shared out)
    cores: int  # host cores this worker's readers and writers may take


def run_sharded(
    entries: list[Job | ItemResult],
    outputs: Outputs,
    devices: list[torch.device],
    choice,  # noqa: ANN001 (batch.ModelChoice)
    write: WriteOptions,
    max_pixels: int,
    on_item: Callable[[int, ItemResult], None],
) -> list[ItemResult]:
    """Process ``entries`` on ``devices`` (one worker process each) and return one result per entry, in order."""
    results: list[ItemResult | None] = [None] * len(entries)
    shards: list[list[tuple[int, Job]]] = [[] for _ in devices]
    n = 0
    for i, entry in enumerate(entries):
        job = entry if isinstance(entry, Job) else None
        decided = _decide(entry, outputs) if job is not None else entry
        if isinstance(decided, ItemResult):
            results[i] = decided
            on_item(i, decided)
            continue
        shards[n % len(devices)].append((i, decided))
        n += 1
    cores = max(1, host_cores() // len(devices))
    ctx = mp.get_context("spawn")  # fork after CUDA (or torch's thread pools) is not safe
    inbox = ctx.Queue()
    procs = []
    for k, (dev, shard) in enumerate(zip(devices, shards)):
        if not shard:
            continue
        task = _Task(str(dev), shard, outputs, choice, write, max_pixels, cores if dev.type == "cpu" else None, cores)
        # the name keys the worker's messages: unique even when a device is listed twice ("cpu,cpu")
        p = ctx.Process(target=_worker, args=(task, inbox), name=f"nalasr-worker{k}-{dev}", daemon=True)
        p.start()
        procs.append(p)
    try:
        _gather(inbox, procs, results, on_item)
        for i, entry in enumerate(entries):  # never a silent drop: an input no worker reported is a failure
            if results[i] is None:
                results[i] = _unreported(entry)
                on_item(i, results[i])
    except KeyboardInterrupt as e:
        for p in procs:  # the terminal's Ctrl-C reached them already; a SIGTERM of the parent did not
            if p.is_alive():
                os.kill(p.pid, signal.SIGINT)
        _gather(inbox, procs, results, on_item, interrupted=True)
        for i, entry in enumerate(entries):
            if results[i] is None:
                results[i] = ItemResult(input_of(entry), status="interrupted")
        e.partial_results = list(results)  # type: ignore[attr-defined]
        raise
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    return [r for r in results if r is not None]


def _unreported(entry: Job | ItemResult) -> ItemResult:
    text = input_of(entry)
    return ItemResult(text, error=f"{text}: its worker ended without reporting it; run again on one device",
                      exit_code=errors.NalasrError.exit_code)


def _decide(job: Job, outputs: Outputs) -> Job | ItemResult:
    """Claim the output now when its name does not depend on the content; a skip or refusal is final here."""
    item = ItemResult(str(job.source))
    if claim_early(outputs, job, item):
        return item
    if item.output is None:
        return job  # the worker names it after decoding
    return Job(job.source, job.out_dir, Path(item.output))


def _gather(inbox, procs, results, on_item, interrupted: bool = False) -> None:  # noqa: ANN001
    """Take the workers' messages until each has said it is done (or died)."""
    waiting = {p.name for p in procs}
    while waiting:
        try:
            kind, name, payload = inbox.get(timeout=_POLL_S)
        except queue.Empty:
            dead = [p for p in procs if p.name in waiting and not p.is_alive()]
            for p in dead:  # exited without its "done": killed, or crashed in the interpreter
                waiting.discard(p.name)
                if not interrupted:
                    raise errors.NalasrError(f"worker {p.name} stopped (exit code {p.exitcode}) before it finished; "
                                             "run again on one device with --device cuda:0 to see why")
            continue
        if kind == "item":
            i, item = payload
            results[i] = item
            on_item(i, item)
        elif kind == "done":
            waiting.discard(name)
        elif kind == "error":  # the whole worker failed (weights, device): the run does
            code, message = payload
            waiting.discard(name)
            if not interrupted:
                error = errors.NalasrError(message)
                error.exit_code = code
                raise error


def _worker(task: _Task, inbox) -> None:  # noqa: ANN001 (a multiprocessing queue)
    """One device's share: the single-device pipeline, its results sent back as they finish."""
    name = mp.current_process().name
    signal.signal(signal.SIGINT, _interrupt_once)
    try:
        device = torch.device(task.device)
        if device.type == "cuda":
            torch.cuda.set_device(device)  # CUDA graphs and streams follow the thread's current device
        if task.threads:
            torch.set_num_threads(task.threads)
        net = task.choice.load(device)  # type: ignore[attr-defined]
        dtype = resolve_dtype(task.choice.precision, device)  # type: ignore[attr-defined]
        index = [i for i, _ in task.entries]
        entries: list[Job | ItemResult] = [job for _, job in task.entries]
        run_jobs(entries, task.outputs, net, dtype, task.write, max_pixels=task.max_pixels,
                 stages=Stages.for_device(device, cores=task.cores), worker=task.device,
                 on_item=lambda k, item: inbox.put(("item", name, (index[k], item))))
    except KeyboardInterrupt:
        pass  # the pipeline finished its files in flight and sent their results
    except errors.NalasrError as e:
        inbox.put(("error", name, (e.exit_code, str(e))))
        return
    inbox.put(("done", name, None))


def _interrupt_once(signum, frame) -> None:  # noqa: ANN001
    """The first Ctrl-C stops the worker's pipeline; later ones (the parent passes it on) must not cut its
    cleanup short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt

