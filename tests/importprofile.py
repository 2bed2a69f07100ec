"""Read the import profile a process writes with ``-X importtime`` (or PYTHONPROFILEIMPORTTIME=1).

Shared by the startup tests (tests/test_cli_startup.py, tests/test_worker.py), which assert what a real
command imports rather than what a module-level ``sys.modules`` check in this process would show.
"""

from __future__ import annotations

import re

# One line per import: "import time: <self us> | <cumulative us> | <indent><dotted.name>".
_LINE = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|\s*(\S+)\s*$", flags=re.M)


def imported_packages(stderr: str) -> set[str]:
    """The top-level packages named in an import profile; empty when ``stderr`` holds none."""
    return {name.split(".")[0] for name in _LINE.findall(stderr)}
