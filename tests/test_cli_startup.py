"""The CLI's entry: what ``--help`` imports, ``import nalasr``, ``python -m nalasr``, exit codes and signals.

Start-up *time* is measured by benchmarks/cli_startup.py (results in benchmarks/results/cli_startup.md); here
only what start-up imports is asserted: ``nalasr --help`` and every ``nalasr CMD --help`` build their help
without torch or numpy (issue 38). Each such check runs in a new interpreter, so nothing this test process
imported counts. The signal tests start ``python -m nalasr upscale`` on a CPU-sized image and stop it with
SIGTERM / SIGINT (issue 39: 143 / 130, one line, no temp file left); they wait generously and assert no timing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import typer
from importprofile import imported_packages

from nalasr import errors
from nalasr.cli import COMMANDS as COMMAND_MODULES, app, load_commands, run

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "numpy")
SCRIPT = Path(sys.executable).parent / "nalasr"


def _python(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout, **kw)


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and sub-command of the app, as argv prefixes (() is the top level)."""
    load_commands()  # every module's commands, as the top-level help registers them
    found: list[tuple[str, ...]] = [()]

    def walk(cmd, prefix: tuple[str, ...]) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            found.append((*prefix, name))
            walk(sub, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _command_paths()

# In a new interpreter: build the help of argv through the CLI's own entry, then say what got imported.
_PROBE = textwrap.dedent("""
    import json, sys
    from nalasr.cli import run
    code = run(sys.argv[1:])
    print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
""")


def _probe(*argv: str) -> dict:
    res = _python("-c", _PROBE, *argv)
    assert res.returncode == 0, res.stderr
    return {**json.loads(res.stdout.strip().splitlines()[-1]), "stdout": res.stdout, "stderr": res.stderr}


def _command_modules(modules: list[str]) -> set[str]:
    imported = set(modules)
    return {m for m in COMMAND_MODULES if f"nalasr.cli.{m}" in imported}


def _heavy(modules: list[str]) -> list[str]:
    return sorted({m for m in modules if m.split(".")[0] in HEAVY})


@pytest.mark.parametrize("argv", [("upscale", "--help"), ("eval", "--help"), ("datasets", "list", "--help"),
                                  ("worker", "status", "--help")], ids=" ".join)
def test_a_command_imports_only_its_own_module(argv):
    """Typer builds the options of every registered command on each call: a command registers its own module only."""
    r = _probe(*argv)
    assert r["code"] == 0 and "Usage" in r["stdout"]
    own = [m for m, names in COMMAND_MODULES.items() if argv[0] in names]
    assert _command_modules(r["modules"]) == set(own), r["modules"]


@pytest.mark.parametrize("argv", [("--help",), ()], ids=["--help", "no arguments"])
def test_the_top_level_help_lists_every_command(argv):
    r = _probe(*argv)
    assert _command_modules(r["modules"]) == set(COMMAND_MODULES)
    listed = r["stdout"] + r["stderr"]
    for names in COMMAND_MODULES.values():
        for name in names:
            assert re.search(rf"\b{name}\b", listed), (name, listed)


def test_an_unknown_command_is_a_usage_error_that_names_it():
    r = _probe("upscal", "photo.png")
    assert r["code"] == 2
    assert "'upscale'" in r["stderr"]  # Click's suggestion, from the full list
    assert _command_modules(r["modules"]) == set(COMMAND_MODULES)


def test_every_command_is_probed():
    names = {" ".join(c) for c in COMMANDS}
    assert {"", "upscale", "eval", "train", "bench", "models", "export", "diagnose", "datasets"} <= names, names


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "nalasr")
def test_help_imports_neither_torch_nor_numpy(command):
    report = _probe(*command, "--help")
    assert report["code"] == 0
    assert "Usage" in report["stdout"], report["stdout"]  # the help was printed
    assert _heavy(report["modules"]) == [], f"nalasr {' '.join(command)} --help imported {_heavy(report['modules'])}"


def _imported_by(env_extra: dict[str, str], argv: list[str]) -> set[str]:
    """The top-level packages a real process imported (``-X importtime`` lists every import on stderr)."""
    res = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1", **env_extra})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Usage" in res.stdout
    names = imported_packages(res.stderr)
    assert names, res.stderr[-2000:]  # the import profile was written
    return names


@pytest.mark.parametrize("entry", ["python -m nalasr", "nalasr"])
def test_real_entry_points_help_stay_light(entry):
    argv = [sys.executable, "-m", "nalasr", "--help"] if entry != "nalasr" else [str(SCRIPT), "--help"]
    if entry == "nalasr" and not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not installed (pip install -e .)")
    imported = _imported_by({}, argv)
    assert "nalasr" in imported and "typer" in imported
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_import_nalasr_is_light_and_exposes_its_api():
    prog = textwrap.dedent("""
        import json, sys
        import nalasr
        light = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'PIL', 'cv2', 'typer', 'rich'})
        listed = sorted(dir(nalasr))
        missing = [n for n in nalasr.__all__ if n not in listed]
        try:
            nalasr.no_such_name
            bad_attr = 'no AttributeError'
        except AttributeError as e:
            bad_attr = str(e)
        kinds = {n: type(getattr(nalasr, n)).__name__ for n in nalasr.__all__}  # first use imports torch
        print(json.dumps({"light": light, "missing": missing, "bad_attr": bad_attr, "kinds": kinds,
                          "torch_after": 'torch' in sys.modules, "version": nalasr.__version__,
                          "upscale_module": nalasr.upscale.__module__}))
    """)
    res = _python("-c", prog)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["light"] == [], f"import nalasr imported {r['light']}"
    assert r["missing"] == []
    assert "no attribute 'no_such_name'" in r["bad_attr"]
    assert r["kinds"]["upscale"] == "function" and r["kinds"]["load_model"] == "function"
    assert r["kinds"]["NalasrError"] == "type" and r["kinds"]["NaLaSR"] == "type"
    assert r["upscale_module"] == "nalasr.inference.upscaling"
    assert r["torch_after"] and r["version"]


def test_star_import_gives_all():
    res = _python("-c", "from nalasr import *; import nalasr; "
                        "print(all(globals()[n] is getattr(nalasr, n) for n in nalasr.__all__))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "True"


def test_main_module_is_guarded():
    """A multiprocessing spawn worker imports the main module as __mp_main__: that must not run the CLI."""
    res = _python("-c", "import runpy, sys; runpy.run_module('nalasr', run_name='__mp_main__'); "
                        "print(sorted(m for m in sys.modules if m.startswith(('nalasr.cli', 'typer'))))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"  # nothing started, nothing imported
    assert res.stderr == ""
    res = _python("-m", "nalasr", "--help")
    assert res.returncode == 0 and "Usage" in res.stdout, res.stderr


# ------------------------------------------------------------------ exit codes, in one place


def test_exit_code_table_matches_the_exceptions():
    table = errors.EXIT_CODES
    assert table[0] == "ok"
    for cls, code in ((errors.NalasrError, 1), (errors.BatchFailures, 1), (errors.InputError, 2),
                      (errors.WeightsError, 3), (errors.DatasetError, 4), (errors.DeviceMemoryError, 5),
                      (errors.DownloadError, 6), (errors.Terminated, 143)):
        assert cls.exit_code == code and code in table, cls
    assert errors.INTERRUPTED_EXIT_CODE == 130 == 128 + signal.SIGINT and 130 in table
    assert errors.TERMINATED_EXIT_CODE == 143 == 128 + signal.SIGTERM
    assert issubclass(errors.Terminated, KeyboardInterrupt) and not issubclass(errors.Terminated, Exception)
    md = errors.exit_codes_markdown().splitlines()
    assert md[:2] == ["| code | meaning |", "|---|---|"] and len(md) == 2 + len(table)


def test_readme_exit_codes_agree_with_errors_py():
    """Every row of the README's exit-code table says what nalasr/errors.py says."""
    readme = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", readme, flags=re.M))
    assert sorted(map(int, rows)) == sorted(errors.EXIT_CODES), "README.md's exit-code table lacks codes"
    for code, meaning in rows.items():
        assert errors.EXIT_CODES.get(int(code)) == meaning, (code, meaning)


@pytest.fixture
def command():
    """Register a throw-away command on the app for one test; it is gone afterwards."""
    added: list = []

    def register(fn):
        before = list(app.registered_commands)
        app.command("test-only-command")(fn)
        added.append(before)
        return fn

    yield register
    for before in added:
        app.registered_commands[:] = before


def test_library_error_becomes_its_code_and_one_line(command, capsys):
    @command
    def _():
        raise errors.WeightsError("weights file x.safetensors is truncated: re-download it")

    assert run(["test-only-command"]) == 3
    err = capsys.readouterr().err
    assert err.strip() == "error: weights file x.safetensors is truncated: re-download it"


def test_usage_error_is_2(capsys):
    assert run(["upscale", "--no-such-flag"]) == 2
    assert "No such option" in capsys.readouterr().err


def test_ctrl_c_is_130_with_one_line(command, capsys):
    cleaned = []

    @command
    def _():
        try:
            raise KeyboardInterrupt
        finally:
            cleaned.append(True)

    assert run(["test-only-command"]) == 130
    assert cleaned == [True]
    assert capsys.readouterr().err.strip() == "interrupted"


def test_sigterm_is_143_after_cleanup_and_the_handler_is_put_back(command, capsys):
    cleaned = []
    before = signal.getsignal(signal.SIGTERM)

    @command
    def _():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 60  # the handler raises at the next bytecode; this only bounds a bug
            while time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            cleaned.append(True)

    assert run(["test-only-command"]) == 143
    assert cleaned == [True]
    assert capsys.readouterr().err.strip() == "terminated (SIGTERM)"
    assert signal.getsignal(signal.SIGTERM) == before


def test_interrupt_with_its_own_message(command, capsys):
    @command
    def _():
        try:
            raise errors.Terminated()
        except KeyboardInterrupt as e:
            raise type(e)("terminated (SIGTERM): 2 of 5 written") from e

    assert run(["test-only-command"]) == 143
    assert capsys.readouterr().err.strip() == "terminated (SIGTERM): 2 of 5 written"


# ------------------------------------------------------------------ real signals to a real process


@pytest.fixture(scope="module")
def slow_input(tmp_path_factory) -> Path:
    """An image the CPU takes seconds to upscale x4 (noise: its 4x PNG also takes a while to encode)."""
    import numpy as np
    from PIL import Image

    folder = tmp_path_factory.mktemp("slow")
    rng = np.random.default_rng(0)
    for i in range(2):
        Image.fromarray(rng.integers(0, 256, (256, 384, 3), dtype=np.uint8)).save(folder / f"noise{i}.png")
    return folder


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".tmp" in p.name)


@pytest.mark.parametrize("sig, code, line", [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                             (signal.SIGINT, 130, "interrupted")], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_upscale_cleanly(slow_input, tmp_path, sig, code, line):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nalasr", "upscale", str(slow_input), "-o", str(out), "-s", "4", "--device", "cpu",
         "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        # a shell that started pytest in the background may have left SIGINT ignored: the CLI must see it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # The output folder is made by the command, after the CLI installed its handlers and before the model
        # runs: from then on the signal is the CLI's. Give it a moment more to be inside the work.
        deadline = time.monotonic() + 300
        while not out.is_dir() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"finished before it could be stopped: {proc.communicate()}"
        assert out.is_dir(), "the command never made its output folder"
        time.sleep(0.5)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, (stdout[-2000:], stderr[-2000:])
    assert "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]  # upscale adds how far it got: "interrupted: 0 of 2 written, ..."
    assert last == line or last.startswith(line + ": ") and "written" in last, stderr
    assert _temps(out) == [] and _temps(slow_input) == []
    assert sorted(p.name for p in slow_input.iterdir()) == ["noise0.png", "noise1.png"]  # inputs untouched
