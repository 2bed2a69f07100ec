"""Benchmarks of the network: sweeps of sizes, precisions and attention kinds (:mod:`.sweep`) and their
reports (:mod:`.report`).

    >>> from nalasr.bench import BenchOptions, Sweep, run_sweeps, write_reports
"""

from .report import write_reports
from .sweep import BenchOptions, BenchRecord, Sweep, run_sweep, run_sweeps

__all__ = ["BenchOptions", "BenchRecord", "Sweep", "run_sweep", "run_sweeps", "write_reports"]
