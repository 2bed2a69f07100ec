"""``nalasr`` command line: a Typer app (:mod:`.app`) and one module per command group.

Each command only parses its arguments and calls one library function. Importing a command module registers
its commands on ``app``: COMMANDS below is the one list of them (a new command = a new module named here).
Fixed choices are the Enum classes of :mod:`.choices`.
"""

from importlib import import_module

from .app import app, main, run

COMMANDS = ("info", "upscale", "evaluate", "train", "bench", "export", "diagnose", "worker")

for _name in COMMANDS:
    import_module(f"{__name__}.{_name}")

__all__ = ["COMMANDS", "app", "main", "run"]
