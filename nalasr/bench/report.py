"""Reports of :mod:`nalasr.bench` records: the environment, the issue's targets checked against the
measurements, JSON, a markdown table and a PNG plot (matplotlib, an optional extra)."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import __version__
from ..errors import NalasrError
from ..io.fsutil import atomic_path, atomic_write_bytes
from .sweep import BenchRecord, GIB, RANDOM_WEIGHTS_NOTE, triton_ok


def load_average() -> float | None:
    """The 1-minute load average (other processes compete for a small CPU: worth recording)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def environment(records: Iterable[BenchRecord] = (), load_at_start: float | None = None) -> dict[str, Any]:
    """What the numbers were measured on: CPU, GPUs used, versions, load before and after, date."""
    import datetime
    from importlib import metadata

    def version(pkg: str) -> str | None:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    gpus = {}
    for dev in dict.fromkeys(r.device for r in records if r.device.startswith("cuda")):
        props = torch.cuda.get_device_properties(torch.device(dev))
        gpus[dev] = {"name": props.name, "memory_gib": round(props.total_memory / GIB, 1)}
    return {
        "cpu": cpu,
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "load_average_1min_at_start": load_at_start,
        "load_average_1min_at_end": load_average(),  # includes the benchmark itself
        "gpus": gpus,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": version("triton"),
        "triton_kernels": triton_ok()[0] if gpus else None,
        "nalasr": __version__,
        "python": platform.python_version(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
    }


def machine_line(env: dict[str, Any]) -> str:
    gpu = ", ".join(f"{g['name']} ({g['memory_gib']} GiB)" for g in env.get("gpus", {}).values())
    load = env.get("load_average_1min_at_start")
    cpu = (f"{env['cpu']}, {env['cpu_cores']} cores, {env['torch_threads']} torch threads, {env['ram_gib']} GiB RAM"
           + (f", load average {load} before the run" if load is not None else ""))
    soft = f"torch {env['torch']}" + (f", triton {env['triton']}" if env.get("triton") else "")
    return "; ".join(s for s in (gpu, cpu, soft) if s)


@dataclass
class TargetCheck:
    target: str
    measured: str
    passed: bool | None  # None: the cases it needs did not run


def _ok(records: Iterable[BenchRecord], **match: Any) -> list[BenchRecord]:
    return [r for r in records if r.status == "ok" and not r.find_max
            and all(getattr(r, k) == v for k, v in match.items())]


def check_targets(records: Sequence[BenchRecord]) -> list[TargetCheck]:
    """Issue 6's targets, for whichever of their cases are among ``records`` (x4, default variant)."""
    checks: list[TargetCheck] = []
    base = dict(attention="nala-auto", variant="default", scale=4)
    gpu = [r for r in records if r.device.startswith("cuda")]

    def best(size: tuple[int, int], precisions: tuple[str, ...], key: str) -> BenchRecord | None:
        rs = [r for r in _ok(gpu, **base) if (r.lr_h, r.lr_w) == size and r.precision in precisions]
        return min(rs, key=lambda r: getattr(r, key)) if rs else None

    def present(size: tuple[int, int], attention: str = "nala-auto", pool: Sequence[BenchRecord] = gpu) -> bool:
        return any((r.lr_h, r.lr_w) == size and r.attention == attention and r.variant == "default"
                   and r.scale == 4 for r in pool)

    half = ("fp16", "bf16")
    for size, ms, gib in (((192, 256), 10.0, 0.25), ((540, 960), 40.0, 1.5)):
        if not present(size):
            continue
        name = f"{size[0]}x{size[1]} LR, fp16/bf16"
        r = best(size, half, "median_ms")
        checks.append(TargetCheck(f"{name}: <= {ms:g} ms", f"{r.median_ms:.1f} ms ({r.precision})" if r else "did not run",
                                  r.median_ms <= ms if r else False))
        if size == (540, 960):
            checks.append(TargetCheck(f"{name}: >= 5x faster than Omni-SR (95 ms) -> <= 19 ms",
                                      f"{r.median_ms:.1f} ms" if r else "did not run",
                                      r.median_ms <= 19.0 if r else False))
        r = best(size, half, "peak_gib")
        checks.append(TargetCheck(f"{name}: <= {gib:g} GiB peak", f"{r.peak_gib:.3f} GiB ({r.precision})" if r else "did not run",
                                  r.peak_gib <= gib if r else False))
    if present((1080, 1920)):
        r = best((1080, 1920), half, "median_ms")
        checks.append(TargetCheck("1080x1920 LR (8K out): runs whole, peak reported",
                                  f"{r.median_ms:.0f} ms, {r.peak_gib:.2f} GiB ({r.precision})" if r else "did not run",
                                  r is not None))
    for prec in half:
        nala = {(r.lr_h, r.lr_w): r for r in _ok(gpu, precision=prec, **base)}
        mats = [r for r in gpu if r.attention == "softmax-materialised" and r.precision == prec
                and r.variant == "default" and r.scale == 4 and (r.lr_h, r.lr_w) == (192, 256)]
        if mats and (192, 256) in nala:
            m, n = mats[0], nala[(192, 256)]
            if m.status == "ok" and m.peak_gib:
                saved = 1 - n.peak_gib / m.peak_gib
                checks.append(TargetCheck(f"192x256 {prec}: >= 90% less peak memory than materialised softmax",
                                          f"{saved:.1%} ({n.peak_gib:.3f} vs {m.peak_gib:.2f} GiB)", saved >= 0.9))
            else:
                checks.append(TargetCheck(f"192x256 {prec}: >= 90% less peak memory than materialised softmax",
                                          f"materialised {m.status}: {m.message}", None))
        sdpa = {(r.lr_h, r.lr_w): r for r in _ok(gpu, attention="softmax-sdpa", precision=prec, variant="default", scale=4)}
        pairs = sorted((k for k in nala if k in sdpa and k[0] * k[1] >= 49152), key=lambda k: k[0] * k[1])
        if pairs:
            text = ", ".join(f"{h}x{w}: {nala[(h, w)].median_ms:.1f} vs {sdpa[(h, w)].median_ms:.1f} ms" for h, w in pairs)
            checks.append(TargetCheck(f"{prec}: faster than SDPA softmax from ~50K tokens (192x256) up", text,
                                      all(nala[k].median_ms < sdpa[k].median_ms for k in pairs)))
    cpu = [r for r in records if r.device == "cpu"]
    if present((256, 256), pool=cpu):
        rs = _ok(cpu, precision="fp32", lr_h=256, lr_w=256, **base)
        r = min(rs, key=lambda r: r.median_ms) if rs else None
        checks.append(TargetCheck("CPU 256x256 LR x4 default, fp32: <= 3 s",
                                  f"{r.median_ms / 1e3:.2f} s, peak RSS +{r.peak_gib:.2f} GiB" if r else "did not run",
                                  r.median_ms <= 3000 if r else False))
    return checks


def comparison_rows(records: Sequence[BenchRecord]) -> list[dict[str, Any]]:
    """NaLa (auto backend) beside softmax in the same network, per device, precision, variant, scale, size."""
    rows = []
    groups: dict[tuple, dict[str, BenchRecord]] = {}
    for r in records:
        if not r.find_max:
            groups.setdefault((r.device, r.precision, r.variant, r.scale, r.lr_h, r.lr_w), {})[r.attention] = r
    for key, by in groups.items():
        nala = by.get("nala-auto")
        if nala is None or not ({"softmax-sdpa", "softmax-materialised"} & set(by)):
            continue
        rows.append({"key": key, "nala": nala, "sdpa": by.get("softmax-sdpa"), "materialised": by.get("softmax-materialised")})
    return rows


def _cell_ms(r: BenchRecord | None) -> str:
    if r is None:
        return "-"
    return f"{r.median_ms:.1f}" if r.status == "ok" and r.median_ms is not None else r.status.upper()


def _cell_gib(r: BenchRecord | None) -> str:
    if r is None:
        return "-"
    return f"{r.peak_gib:.3f}" if r.status == "ok" and r.peak_gib is not None else r.status.upper()


def status_text(r: BenchRecord) -> str:
    text = {"ok": "ok", "oom": "OOM", "skipped": "skipped", "error": "error"}[r.status]
    return f"{text}: {r.message}" if r.message else text


def to_json(records: Sequence[BenchRecord], env: dict[str, Any], command: str = "") -> str:
    return json.dumps({
        "meta": {**env, "command": command,
                 "weights": sorted({r.weights for r in records}) or ["random"],
                 "note": RANDOM_WEIGHTS_NOTE if all(r.weights == "random" for r in records) else ""},
        "records": [r.to_dict() for r in records],
        "targets": [dataclasses.asdict(c) for c in check_targets(records)],
    }, indent=1)


def to_markdown(records: Sequence[BenchRecord], env: dict[str, Any], command: str = "") -> str:
    random_weights = all(r.weights == "random" for r in records)
    lines = [
        "# NaLaSR benchmark", "",
        f"- machine: {machine_line(env)}",
        f"- date (UTC): {env['date_utc']}; nalasr {env['nalasr']}",
        f"- {RANDOM_WEIGHTS_NOTE}" if random_weights else f"- weights: {', '.join(sorted({r.weights for r in records}))}",
        "- latency: median over the repeats after warm-up, batch 1, whole image; CUDA events on GPU, wall clock on CPU;"
        " 'graph' after the runs: they replayed a CUDA graph, as upscale does for a size it has seen (nalasr.inference.graphs)",
        "- peak: memory growth above the weights and the input during the forward (output included); "
        "CUDA max_memory_allocated, CPU resident set (sampled)",
    ]
    if command:
        lines.append(f"- command: `{command}`")
    lines += ["", "## Results", "",
              "| attention | op | variant | scale | precision | device | LR (HxW) | output | tokens | median ms | MP/s | peak GiB | runs | status |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        ok = r.status == "ok"
        lines.append(
            f"| {r.attention}{' (max)' if r.find_max else ''} | {r.backend} | {r.variant} | x{r.scale} | {r.precision} | {r.device}"
            f" | {r.size} | {r.out_h}x{r.out_w} | {r.tokens:,} | {_cell_ms(r)}"
            f" | {f'{r.mpix_per_s:.1f}' if ok else '-'} | {_cell_gib(r)}"
            f" | {(str(r.repeats) + (' graph' if r.cuda_graphs else '')) if ok else '-'}"
            f" | {status_text(r).replace('|', '/')} |")
    rows = comparison_rows(records)
    if rows:
        lines += ["", "## NaLa against softmax attention in the same network", "",
                  "| device | precision | variant | scale | LR | tokens | NaLa ms | SDPA ms | SDPA / NaLa | NaLa GiB | SDPA GiB"
                  " | materialised ms | materialised GiB | memory saved vs materialised |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in rows:
            dev, prec, var, scale, h, w = row["key"]
            n, s, m = row["nala"], row["sdpa"], row["materialised"]
            speed = (f"{s.median_ms / n.median_ms:.2f}x" if s and s.status == n.status == "ok" else "-")
            saved = (f"{1 - n.peak_gib / m.peak_gib:.1%}" if m and m.status == n.status == "ok" and m.peak_gib else "-")
            lines.append(f"| {dev} | {prec} | {var} | x{scale} | {h}x{w} | {h * w:,} | {_cell_ms(n)} | {_cell_ms(s)} | {speed}"
                         f" | {_cell_gib(n)} | {_cell_gib(s)} | {_cell_ms(m)} | {_cell_gib(m)} | {saved} |")
    checks = check_targets(records)
    if checks:
        lines += ["", "## Targets (issue 6)", "", "| target | measured | met |", "|---|---|---|"]
        for c in checks:
            met = "n/a" if c.passed is None else ("yes" if c.passed else "**no**")
            lines.append(f"| {c.target} | {c.measured.replace('|', '/')} | {met} |")
    return "\n".join(lines) + "\n"


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise NalasrError("--plot needs matplotlib: pip install 'nalasr[plot]' (or drop --plot)") from None


def write_plot(records: Sequence[BenchRecord], path: str | os.PathLike) -> None:
    """PNG: median latency and peak memory against LR token count, log-log, one line per configuration.
    Cases that did not run (OOM, skipped, error) are crosses along the top edge."""
    require_matplotlib()
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.transforms import blended_transform_factory

    fig = Figure(figsize=(13, 5), layout="constrained")
    ax_ms, ax_mem = fig.subplots(1, 2)
    series: dict[str, list[BenchRecord]] = {}
    for r in records:
        label = f"{r.attention} {r.variant} x{r.scale} {r.precision}" + (f" {r.device}" if len({x.device for x in records}) > 1 else "")
        series.setdefault(label, []).append(r)
    cycle = [c["color"] for c in matplotlib.rcParams["axes.prop_cycle"]]
    markers = "osD^v<>ph*"
    for i, (label, rs) in enumerate(series.items()):
        color, marker = cycle[i % len(cycle)], markers[(i // len(cycle)) % len(markers)]
        ok = sorted((r for r in rs if r.status == "ok"), key=lambda r: r.tokens)
        bad = [r for r in rs if r.status != "ok"]
        for ax, key in ((ax_ms, "median_ms"), (ax_mem, "peak_gib")):
            if ok:
                ax.plot([r.tokens for r in ok], [max(getattr(r, key), 1e-4) for r in ok], marker=marker, color=color,
                        label=label, linewidth=1.2, markersize=4)
            if bad:
                top = blended_transform_factory(ax.transData, ax.transAxes)
                ax.scatter([r.tokens for r in bad], [0.97] * len(bad), marker="x", color=color, transform=top,
                           label=None if ok else label, s=30)
    for ax, ylabel in ((ax_ms, "median latency (ms)"), (ax_mem, "peak memory above input (GiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("LR tokens (H x W)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    note = " (random weights)" if all(r.weights == "random" for r in records) else ""
    fig.suptitle(f"NaLaSR whole-image forward, batch 1{note}; x = did not run (OOM / skipped)")
    ax_mem.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    with atomic_path(path) as tmp:
        fig.savefig(str(tmp), dpi=120, format="png")


def write_reports(
    records: Sequence[BenchRecord],
    *,
    json_path: str | os.PathLike | None = None,
    markdown_path: str | os.PathLike | None = None,
    plot_path: str | os.PathLike | None = None,
    command: str = "",
    load_at_start: float | None = None,
) -> dict[str, Any]:
    """Write whichever reports are asked for (atomically, parents created); returns the environment used."""
    env = environment(records, load_at_start)
    for path, text in ((json_path, lambda: to_json(records, env, command)),
                       (markdown_path, lambda: to_markdown(records, env, command))):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, text().encode())
    if plot_path is not None:
        Path(plot_path).parent.mkdir(parents=True, exist_ok=True)
        write_plot(records, plot_path)
    return env
