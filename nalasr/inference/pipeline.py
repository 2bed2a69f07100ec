"""One device's share of a batch as three overlapping stages: decode ahead, the network, encode and write.

Why: the network turns 960×540 into 4K in 17 ms on an H200, while decoding the input takes tens of ms and
encoding a 4K PNG hundreds; run one after the other, the device idles most of the time. Here decoding runs on
``readers`` threads ahead of the device, the forward runs on the calling thread, and finished images go to
``writers`` threads (OpenCV and zlib release the GIL while they encode, and Pillow does when it encodes into a
file, as ``write_image`` has it do, so threads scale with cores; benchmarks/results/gil_encode_cpu.md). Both
queues are bounded, so memory stays flat on a folder of any length: at most ``lookahead`` decoded inputs and
``writers + 1`` outputs are held at once.

The scheduling thread makes every decision that depends on order (output names, skips, "already written in this
run"), in input order, so the report is the same whatever finishes first.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import InputError, NalasrError
from ..io.imageio import Picture, read_image, write_image
from .ensemble import SelfEnsemble
from .jobs import ItemResult, Job, Outputs, claim_early, input_of
from .runtime import process_peak_rss
from .staging import Deferred, HostStaging
from .upscaling import upscale_deferred
from ..model import NaLaSR


@dataclass(frozen=True)
class Stages:
    readers: int  # decoding threads
    writers: int  # encoding threads
    lookahead: int  # inputs decoded (or being decoded) ahead of the device, at most

    @classmethod
    def for_device(cls, device: torch.device, cores: int | None = None) -> "Stages":
        """On CUDA the host's cores encode (all but the two that feed the device); on the CPU the forward takes
        every core, and one writer and one reader only fill the gaps between forwards."""
        cores = cores or host_cores()
        if device.type == "cuda":
            return cls(readers=2, writers=max(1, min(12, cores - 2)), lookahead=4)
        return cls(readers=1, writers=1, lookahead=2)


@dataclass(frozen=True)
class WriteOptions:
    quality: int
    png_compression: int
    overwrite: bool


@dataclass
class _Decoded:
    picture: Picture
    read_ms: float
    t0: float  # when its read started (perf_counter)


def run_jobs(
    entries: list[Job | ItemResult],
    outputs: Outputs,
    net: NaLaSR | SelfEnsemble | Future,
    dtype: torch.dtype,
    write: WriteOptions,
    *,
    max_pixels: int,
    stages: Stages,
    worker: str | None = None,
    on_item: Callable[[int, ItemResult], None] | None = None,
) -> list[ItemResult]:
    """Process ``entries`` (jobs, or failed items passed through) and return one result per entry, in order.

    ``net`` may be a Future (the weights still loading): it is waited for before the first forward, and an
    error loading it ends the run. ``on_item(index, result)`` is called as each finishes (any order). On KeyboardInterrupt (Ctrl-C, and
    SIGTERM as the CLI maps it) no new image is started, the files being written are finished, the rest are
    marked "interrupted", ``results`` so far are kept in the exception's ``partial_results``, and it re-raises.
    """
    results: list[ItemResult | None] = [None] * len(entries)

    def finish(i: int, item: ItemResult) -> None:
        results[i] = item
        if on_item:
            on_item(i, item)

    readers = ThreadPoolExecutor(stages.readers, thread_name_prefix="nalasr-read")
    writers = ThreadPoolExecutor(stages.writers, thread_name_prefix="nalasr-write")
    reads: dict[int, tuple[ItemResult, Path | None, Future]] = {}
    writes: dict[Future, tuple[int, ItemResult, Path, float]] = {}  # → (index, item, output, its read's start)
    scheduled = 0
    staging: HostStaging | None = None  # made once the model's device is known

    def schedule(upto: int) -> None:
        """Start reads up to entry ``upto``; an output whose name is known is decided before reading."""
        nonlocal scheduled
        while scheduled < min(upto, len(entries)):
            i, entry = scheduled, entries[scheduled]
            scheduled += 1
            if isinstance(entry, ItemResult):
                finish(i, entry)
                continue
            item = ItemResult(str(entry.source), worker=worker)
            if claim_early(outputs, entry, item):
                finish(i, item)
                continue
            out = Path(item.output) if item.output else None
            reads[i] = (item, out, readers.submit(_read, entry.source, max_pixels))

    def collect_writes(block: bool) -> None:
        done, _ = wait(list(writes), return_when=FIRST_COMPLETED) if block else (
            [f for f in writes if f.done()], None)
        for f in done:
            i, item, out, t0 = writes.pop(f)
            try:
                notes, write_ms, t_end = f.result()
                item.notes += notes
                item.write_ms = round(write_ms, 3)
                item.status = "ok"
            except NalasrError as e:
                outputs.release(out)
                item.fail(e)
                t_end = time.perf_counter()
            item.total_ms = round((t_end - t0) * 1e3, 3)
            finish(i, item)

    try:
        for i, entry in enumerate(entries):
            schedule(i + stages.lookahead)
            if i not in reads:
                continue  # finished while scheduling (passed through, skipped or refused)
            if isinstance(net, Future):
                net = net.result()
            device = next(net.parameters()).device
            if staging is None and device.type == "cuda":
                staging = HostStaging(device)
            item, out, future = reads.pop(i)
            try:
                decoded = future.result()
                item.read_ms = round(decoded.read_ms, 3)
                picture = decoded.picture
                item.input_size, item.pixels, item.notes = picture.size, picture.describe(), list(picture.notes)
                if out is None:
                    assert isinstance(entry, Job)
                    out = outputs.path_for(entry, picture.format)
                    assert out is not None
                    item.output = str(out)
                    if not outputs.claim(out, entry.source):
                        item.status, item.total_ms = "skipped", round((time.perf_counter() - decoded.t0) * 1e3, 3)
                        finish(i, item)
                        continue
                t_dev = time.perf_counter()
                try:
                    sr, stats = upscale_deferred(picture.pixels, net, dtype, staging)
                except NalasrError:
                    outputs.release(out)
                    raise
                item.device_ms = round((time.perf_counter() - t_dev) * 1e3, 3)
            except NalasrError as e:
                item.fail(e)
                finish(i, item)
                continue
            _record_forward(item, stats, sr.shape, device)
            while len(writes) > stages.writers:  # bounded: one output waiting, the others being written
                collect_writes(block=True)
            carried = (picture.format, picture.icc, picture.exif)
            writes[writers.submit(_write, out, sr, carried, write)] = (i, item, out, decoded.t0)
            del sr, picture, decoded
            collect_writes(block=False)
        while writes:
            collect_writes(block=True)
    except BaseException as e:
        if not isinstance(e, KeyboardInterrupt):
            raise
        for _, _, future in reads.values():
            future.cancel()
        while writes:  # the files in flight are finished: a written file is never half there
            collect_writes(block=True)
        for i, entry in enumerate(entries):
            if results[i] is None:
                results[i] = ItemResult(input_of(entry), status="interrupted", worker=worker)
        e.partial_results = list(results)  # type: ignore[attr-defined]
        raise
    finally:
        readers.shutdown(wait=True, cancel_futures=True)
        writers.shutdown(wait=True, cancel_futures=True)
    return [r for r in results if r is not None]


def _read(path: Path, max_pixels: int) -> _Decoded:
    t0 = time.perf_counter()
    try:
        picture = read_image(path, max_pixels=max_pixels)
    except OSError as e:  # the decoders turn their own failures into InputError; this is the file system
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    return _Decoded(picture, (time.perf_counter() - t0) * 1e3, t0)


def _write(out: Path, pixels: Deferred, carried: tuple[str | None, bytes | None, bytes | None],
           opts: WriteOptions) -> tuple[list[str], float, float]:
    """Wait for ``pixels``, encode them with the input's (format, ICC, EXIF) and write atomically; (notes, ms, end
    time), the wait included. Every failure is one InputError line."""
    t0 = time.perf_counter()
    try:
        picture = Picture(pixels.result(), *carried)
    finally:
        pixels.discard()  # whatever happens, the staging slot is free for the next image
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out.parent}: cannot create the output folder ({e.strerror or e})") from None
    try:
        notes = write_image(out, picture, quality=opts.quality, png_compression=opts.png_compression,
                            overwrite=opts.overwrite)
    except FileExistsError:
        raise InputError(f"{out}: output appeared while this batch ran; pass --overwrite to replace it") from None
    except OSError as e:
        reason = e.strerror or str(e)
        raise InputError(f"{out}: cannot write ({reason}); check the folder's permissions and free space") from None
    t1 = time.perf_counter()
    return notes, (t1 - t0) * 1e3, t1


def _record_forward(item: ItemResult, stats, shape: tuple[int, ...], device: torch.device) -> None:  # noqa: ANN001
    item.output_size = (shape[1], shape[0])
    item.model_ms, item.precision, item.fell_back = round(stats.model_ms, 3), stats.dtype, stats.fell_back
    item.cuda_graph = stats.cuda_graph
    if device.type == "cuda":
        item.peak_memory_bytes, item.memory_kind = stats.peak_bytes, stats.memory_kind
    else:  # the CPU allocator keeps freed memory (runtime.keep_freed_memory): growth per image reads 0
        item.peak_memory_bytes, item.memory_kind = process_peak_rss(), "cpu-peak-rss"
    if stats.fell_back:
        item.notes.append("half precision gave non-finite values: recomputed in fp32")


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
