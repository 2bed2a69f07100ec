"""``nalasr`` command line: a Typer app (:mod:`.app`) and one module per command group.

Each command only parses its arguments and calls one library function. Importing a command module registers
its commands on ``app``; COMMANDS below is the one list of them (a new command = a new module named here, with
the top-level names it registers). :func:`run` imports only the module of the command it runs: typer builds
every registered command's parameters from its signature on each call, so ``nalasr upscale`` (served by a
worker in a fraction of a second) does not pay for ``train``'s, ``bench``'s and ``eval``'s imports and options.
Fixed choices are the Enum classes of :mod:`.choices`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module

from .app import app
from .app import run as _run

COMMANDS: dict[str, tuple[str, ...]] = {  # module -> the top-level commands it registers, in help order
    "info": ("models",), "upscale": ("upscale",), "evaluate": ("eval", "datasets"), "train": ("train",),
    "bench": ("bench",), "export": ("export",), "diagnose": ("diagnose",), "worker": ("worker",),
}


def load_commands(argv: Sequence[str] | None = None) -> None:
    """Register on ``app`` what ``argv`` runs: the module of its command when argv[0] names one, else every module
    (None, the top-level help, an unknown name: the listing and Click's suggestions need them all)."""
    first = argv[0] if argv else None
    modules = [m for m, names in COMMANDS.items() if first in names] or list(COMMANDS)
    for module in modules:
        import_module(f"{__name__}.{module}")


def run(argv: Sequence[str] | None = None) -> int:
    """The CLI on ``argv`` (default: this process's arguments): the exit code, as :func:`nalasr.cli.app.run`."""
    args = list(sys.argv[1:] if argv is None else argv)
    load_commands(args)
    return _run(args)


def main() -> None:
    sys.exit(run())


__all__ = ["COMMANDS", "app", "load_commands", "main", "run"]
