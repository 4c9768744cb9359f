"""A process's memory as Linux counts it in /proc/<pid>/status, for the benchmarks.

`VmHWM` is the peak resident memory of the process's own address space. A child's
`getrusage(RUSAGE_SELF).ru_maxrss` is not that: Linux carries the parent's peak across the
fork and the exec, so a child started by a benchmark that holds gigabytes (the raw series
it has just generated) reports the benchmark's peak as its own.
"""

from __future__ import annotations

import math
from pathlib import Path


def status_mb(field: str, pid: int | str = "self") -> float:
    """A `kB` field of the process's status (`VmRSS`, `VmHWM`, ...) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def peak_rss_mb(pid: int | str = "self") -> float:
    """The process's peak resident memory (`VmHWM`) in MB; NaN once it has exited."""
    try:
        return status_mb("VmHWM", pid)
    except (OSError, RuntimeError):
        return math.nan
