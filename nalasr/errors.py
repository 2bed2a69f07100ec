"""The exceptions the library raises for a user's mistake or a missing resource, and the CLI's exit codes.

Each exception carries the process exit code the CLI uses; the CLI maps them in one place
(:func:`nalasr.cli.app.run`). Messages are one line: what is wrong, then what to do.

:data:`EXIT_CODES` is the one table of exit codes (code → meaning; the README's table is
:func:`exit_codes_markdown`, tests/test_cli_startup.py checks that they agree). The codes, with what carries each:

    0    ok
    1    some items of a batch failed; the others were processed   (BatchFailures; NalasrError itself)
    2    bad argument, path or image; also a usage error            (InputError; Typer/Click's usage errors)
    3    weights missing, corrupt, truncated, or of another architecture or scale   (WeightsError)
    4    unknown, missing, empty or inconsistent dataset            (DatasetError)
    5    the image does not fit on the device                       (DeviceMemoryError)
    6    download failed, was refused, or did not match its checksum   (DownloadError)
    130  interrupted (Ctrl-C, SIGINT)                               (KeyboardInterrupt)
    143  terminated (SIGTERM)                                       (Terminated, raised by the CLI's handler)

On 130 and 143 the output being written is removed (atomic writes clean up on any BaseException) and the
outputs already finished stay. Imports nothing: ``nalasr --help`` loads this module.
"""

from __future__ import annotations

INTERRUPTED_EXIT_CODE = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
TERMINATED_EXIT_CODE = 143  # SIGTERM: 128 + 15

EXIT_CODES: dict[int, str] = {
    0: "ok",
    1: "some items of a batch failed; the others were processed",
    2: "bad argument, path or image",
    3: "weights missing, corrupt, truncated, or of another architecture or scale",
    4: "unknown, missing, empty or inconsistent dataset",
    5: "the image does not fit on the device",
    6: "download failed, was refused, or did not match its checksum",
    INTERRUPTED_EXIT_CODE: "interrupted (Ctrl-C): no file is left half-written; a batch finishes the files in flight and prints its report",
    TERMINATED_EXIT_CODE: "terminated (SIGTERM): cleaned up as on Ctrl-C",
}


def exit_codes_markdown() -> str:
    """:data:`EXIT_CODES` as the README's markdown table."""
    return "\n".join(["| code | meaning |", "|---|---|", *(f"| {c} | {m} |" for c, m in EXIT_CODES.items())])


class NalasrError(Exception):
    """Base class: a clean, one-line, user-facing failure."""

    exit_code = 1


class InputError(NalasrError):
    """A bad argument, path or image (exit 2)."""

    exit_code = 2


class WeightsError(NalasrError):
    """Weights that cannot be loaded: missing, corrupt, truncated, another architecture or scale (exit 3)."""

    exit_code = 3


class DatasetError(NalasrError):
    """An unknown, missing, empty or inconsistent dataset (exit 4)."""

    exit_code = 4


class DeviceMemoryError(NalasrError):
    """The image does not fit on the device (exit 5)."""

    exit_code = 5


class DownloadError(NalasrError):
    """A download failed, was refused, or did not match its checksum (exit 6)."""

    exit_code = 6


class BatchFailures(NalasrError):
    """Some items of a batch failed; the others were processed (exit 1)."""

    exit_code = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while the CLI ran (exit 143 = 128 + SIGTERM); raised by the handler ``nalasr.cli.app.run``
    installs.

    A KeyboardInterrupt on purpose: whatever cleans up after Ctrl-C (``finally``, ``except BaseException``,
    ``except KeyboardInterrupt``) cleans up after SIGTERM too, and ``except Exception`` (a batch's per-item error
    handling) does not swallow it. Code that must tell the two apart tests ``isinstance(e, Terminated)``.
    Not a NalasrError: it is not a failure of the work.
    """

    exit_code = TERMINATED_EXIT_CODE
