"""ringbench_analysis: read ringbench HDF5 files, write reports, compare runs.

Command line: analysis/rb-analysis {report,compare,table} ... (see docs/analysis.md).
Library: from ringbench_analysis import reader; run = reader.load("run.h5").
"""
from ._version import __version__  # noqa: F401

__all__ = ["reader", "model", "report", "compare"]
