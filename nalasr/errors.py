"""The exceptions the library raises for a user's mistake or a missing resource.

Each carries the process exit code the CLI uses; the CLI maps them in one place (``nalasr.cli.app``).
Messages are one line: what is wrong, then what to do.
"""

from __future__ import annotations


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
