"""The Typer application and the one place where errors become exit codes.

Command modules register on ``app``; they only parse arguments and call library functions.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from ..errors import NalasrError

app = typer.Typer(
    name="nalasr",
    help="Whole-image super-resolution (x2, x3, x4) with NaLa global linear attention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, highlight=False)
out = Console(highlight=False)  # stdout: tables and --json


@app.callback()
def _root() -> None:
    """Whole-image super-resolution (x2, x3, x4) with NaLa global linear attention."""


def error_line(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", soft_wrap=True)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` and return the exit code (0 ok, 1 partial failure, 2 bad input, ...).

    Typer/Click handle usage errors themselves (exit 2, with the usage line); library errors arrive here.
    """
    try:
        app(args=argv, prog_name="nalasr")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except NalasrError as e:
        error_line(str(e))
        return e.exit_code
    except KeyboardInterrupt:
        error_line("interrupted")
        return 130
    return 0


def main() -> None:
    sys.exit(run())
