"""The Typer application and the one place where errors and signals become exit codes.

Command modules register on ``app``; they only parse arguments and call library functions. At module level a
command module imports only the standard library, typer, rich and torch-free nalasr modules (this one,
:mod:`nalasr.errors`, :mod:`.choices`): library imports go inside the command's body, so ``nalasr --help`` and
``nalasr CMD --help`` start without torch (tests/test_cli_startup.py, benchmarks/cli_startup.py).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import typer
from rich.console import Console

from ..errors import INTERRUPTED_EXIT_CODE, TERMINATED_EXIT_CODE, NalasrError, Terminated

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


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`~nalasr.errors.Terminated` in the main thread (cleanup runs as
    on Ctrl-C); the previous handler is back afterwards.

    Only the first SIGTERM raises: a repeat (a process manager signalling the whole group, then the process)
    while the cleanup runs is ignored, so the cleanup finishes; SIGKILL still ends the process. Outside the
    main thread (where Python cannot install handlers) this does nothing.
    """
    fired = False

    def handler(signum: int, frame: object) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread of the main interpreter
        yield
        return
    try:
        yield
    finally:
        # None: a handler not installed from Python; the default is the closest thing to put back
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _interrupt_of(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (or Terminated) behind ``exc``: Typer turns an interrupt into ``Exit(130)`` (older
    versions into ``Abort``, exit 1) raised from it, then into SystemExit, so it is found on the chain."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _stopped(interrupt: KeyboardInterrupt) -> int:
    """One line on stderr and the exit code: ``interrupted`` and 130 (Ctrl-C), ``terminated (SIGTERM)`` and 143.

    A command with more to say (how many files it wrote) re-raises the interrupt's own type with that line as
    its argument (``raise type(e)("interrupted: 3 of 8 written ...") from e``); it is printed instead.
    """
    terminated = isinstance(interrupt, Terminated)
    message = str(interrupt) or ("terminated (SIGTERM)" if terminated else "interrupted")
    console.print(message, style="yellow", markup=False, soft_wrap=True)
    return TERMINATED_EXIT_CODE if terminated else INTERRUPTED_EXIT_CODE


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` and return the exit code (the table: :data:`nalasr.errors.EXIT_CODES`).

    Typer/Click handle usage errors themselves (exit 2, with the usage line); library errors arrive here.
    Ctrl-C returns 130 and SIGTERM 143, each with one line, after the cleanup of whatever was being written:
    while the command runs, SIGTERM raises :class:`~nalasr.errors.Terminated` (a KeyboardInterrupt).
    """
    with sigterm_raises():
        try:
            try:
                app(args=argv, prog_name="nalasr")
            except SystemExit as e:
                interrupt = _interrupt_of(e)
                if interrupt is not None:
                    return _stopped(interrupt)
                return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except NalasrError as e:
                error_line(str(e))
                interrupt = _interrupt_of(e.__context__)  # an error while cleaning up after an interrupt
                return e.exit_code if interrupt is None else _stopped(interrupt)
        except KeyboardInterrupt as e:  # from the command, or while an error above was being reported
            return _stopped(e)
    return 0
