"""``nalasr`` command line. Importing the command modules registers their commands on ``app``."""

from . import info  # noqa: F401  (registers commands)
from .app import app, main, run

for _module in ("upscale", "evaluate", "train", "bench"):
    try:
        __import__(f"{__name__}.{_module}")
    except ModuleNotFoundError as _e:  # a command whose module is not written yet
        if _e.name != f"{__name__}.{_module}":
            raise

__all__ = ["app", "main", "run"]
