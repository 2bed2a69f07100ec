"""Start-up time of the CLI and the package, each case a new process (issue 38 item 3: `nalasr --help` <= 0.5 s).

    python benchmarks/cli_startup.py --label after            # writes benchmarks/results/cli_startup.md

Every case runs once untimed (file cache), then --runs times; the median wall time of the whole process
(interpreter start to exit, output to /dev/null) is reported, with min and max. The "heavy modules" column
comes from one more run of an equivalent in-process program that prints which of torch / numpy / cv2 / PIL
were in sys.modules when it finished (what the start-up paid for).

The last case is a whole `nalasr upscale` of one 32x24 PNG (x2, small variant) that a running `nalasr worker`
serves: the script starts one on the CPU in a private XDG_RUNTIME_DIR first and stops it at the end, so the
row is what a command costs beside the worker's job (its in-job ``wall_s`` is a few tens of ms here).

The results file keeps one section per --label (a new run with the same label replaces its section), so a
"before" and an "after" run sit side by side. Every child process gets this script's checkout first on
PYTHONPATH, so a copy of an older commit with this script (and resident_worker.py) in its benchmarks/ measures
that commit with the same interpreter and packages ("before": ``git archive HEAD | tar -x -C /tmp/before``, copy
the two files in, run it there with ``--out`` pointing back here).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from resident_worker import private_runtime, resident_worker

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "numpy", "cv2", "PIL")
MARK = "@@heavy:"
# the checkout this script sits in comes first for every child (an editable install points elsewhere)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}

# The equivalent program's epilogue: which heavy top-level packages got imported.
_REPORT = (f"import sys; print({MARK!r} + ','.join(sorted({{m.split('.')[0] for m in sys.modules}}"
           f" & {set(HEAVY)!r})), flush=True)")


def _cli_probe(argv: list[str]) -> str:
    return f"from nalasr.cli import run; run({argv!r}); {_REPORT}"


def cases(python: str, script: str, commands: list[str], served: list[str]) -> list[tuple[str, list[str], str]]:
    """(label, command line, equivalent -c program that reports the heavy modules); ``served`` is the argv of
    the upscale a worker serves."""
    out = [
        ("python -c pass (interpreter alone)", [python, "-c", "pass"], f"pass; {_REPORT}"),
        ("nalasr --help", [script, "--help"], _cli_probe(["--help"])),
        ("nalasr upscale --help", [script, "upscale", "--help"], _cli_probe(["upscale", "--help"])),
        ("python -m nalasr --help", [python, "-m", "nalasr", "--help"],
         "import runpy, sys; sys.argv = ['nalasr', '--help']\ntry:\n    runpy.run_module('nalasr', run_name='__main__')"
         f"\nexcept SystemExit:\n    pass\n{_REPORT}"),
        ('python -c "import nalasr"', [python, "-c", "import nalasr"], f"import nalasr; {_REPORT}"),
        ('python -c "import nalasr; nalasr.upscale" (first use)', [python, "-c", "import nalasr; nalasr.upscale"],
         f"import nalasr; nalasr.upscale; {_REPORT}"),
    ]
    for cmd in commands:
        if cmd != "upscale":
            out.append((f"nalasr {cmd} --help", [script, *cmd.split(), "--help"], _cli_probe([*cmd.split(), "--help"])))
    out.append(("nalasr upscale one 32x24 PNG, served by a worker", [script, *served], _cli_probe(served)))
    return out


def served_job(work: Path) -> list[str]:
    """The argv of one upscale (a 32x24 PNG written into ``work``, x2, small) for the worker to serve."""
    from PIL import Image  # here only: the children are what is measured

    Image.new("RGB", (32, 24), (40, 120, 200)).save(work / "in.png")
    return ["upscale", str(work / "in.png"), "--scale", "2", "--variant", "small", "--device", "cpu",
            "-o", str(work / "out.png"), "--overwrite", "--json"]


def registered_commands() -> list[str]:
    """Every command and sub-command name of the app, asked in a child process (this one stays light)."""
    prog = ("import typer; from nalasr.cli import app\n"
            "def walk(c, pre):\n"
            "    for n, sub in sorted(getattr(c, 'commands', {}).items()):\n"
            "        print(' '.join([*pre, n])); walk(sub, [*pre, n])\n"
            "walk(typer.main.get_command(app), [])")
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=ROOT, env=ENV,
                         check=True)
    return res.stdout.split("\n")[:-1]


def time_case(argv: list[str], runs: int) -> list[float]:
    def once() -> float:
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=ENV,
                       check=False)
        return time.perf_counter() - t0

    once()  # untimed: the file cache
    return [once() for _ in range(runs)]


def heavy_modules(program: str) -> str:
    res = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, env=ENV,
                         check=False)
    lines = [line for line in res.stdout.splitlines() if line.startswith(MARK)]
    return (lines[-1][len(MARK):] or "none") if lines else f"? (exit {res.returncode})"


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "-"

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "-"
    return (f"{model}, {cores} usable cores; {platform.platform()}; Python {platform.python_version()}; "
            f"torch {version('torch')}, numpy {version('numpy')}, typer {version('typer')}, "
            f"rich {version('rich')}; load average at start {load}")


def write_section(path: Path, label: str, section: str) -> None:
    header = ("# CLI and package start-up time\n\n"
              "Each row is a new process; median (min-max) wall time. The machine was shared with other jobs (the load "
              "average of each run is given): the\nbefore and after runs were made back to back, under a similar load. "
              "Target (issue 38 item 3): `nalasr --help` <= 0.5 s on the 2-core machine, without importing torch.\n")
    sections: dict[str, str] = {}
    if path.is_file():
        for chunk in path.read_text().split("\n## ")[1:]:
            sections[chunk.split("\n", 1)[0].strip()] = "## " + chunk.rstrip() + "\n"
    sections[label] = section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join("\n" + s for s in sections.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9, help="timed runs per case (after one untimed)")
    ap.add_argument("--label", default="latest", help="section of the results file these numbers go in")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cli_startup.md")
    ap.add_argument("--only-listed", action="store_true", help="skip the --help of the other commands")
    args = ap.parse_args()

    script = str(Path(sys.executable).parent / "nalasr")
    commands = [] if args.only_listed else registered_commands()
    desc = machine()
    print(desc, flush=True)
    work = Path(tempfile.mkdtemp(prefix="nalasr_startup_"))
    served = served_job(work)
    # every case runs with ENV; pointing it at a private runtime folder keeps the worker to this benchmark
    ENV.update(private_runtime(work / "rt"))
    rows = []
    with resident_worker(["--device", "cpu", "--scale", "2", "--variant", "small"], cwd=ROOT, env=ENV):
        measured = [(label, time_case(argv, args.runs), heavy_modules(probe))
                    for label, argv, probe in cases(sys.executable, script, commands, served)]
    for label, times, heavy in measured:
        med = statistics.median(times)
        rows.append(f"| {label} | **{med:.3f}** ({min(times):.3f}-{max(times):.3f}) | {heavy} |")
        print(f"{label:55s} {med:7.3f} s  ({min(times):.3f}-{max(times):.3f})  heavy: {heavy}", flush=True)

    command = shlex.join(["python", "benchmarks/cli_startup.py", *sys.argv[1:]])
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    section = (f"## {args.label}\n\n`{command}`, {when}, median of {args.runs} runs after one untimed.\n"
               f"Machine: {desc}.\n\n"
               "| command (new process) | wall s, median (min-max) | heavy modules imported |\n|---|---|---|\n"
               + "\n".join(rows) + "\n")
    write_section(args.out, args.label, section)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
