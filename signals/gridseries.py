"""Series on a regular grid, as both ways into a temporary Prometheus take them.

`to_openmetrics` (text for promtool's backfill) and `remotewrite.push` (the remote-write
receiver) accept the same tuples and refuse the same mistakes, here, before either writes
anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

OpenMetricsSeries = tuple[str, Mapping[str, str], Sequence[float] | npt.NDArray[np.float64], float, float]
"""(metric name, labels, values with NaN for "no sample", start epoch seconds, step seconds).

Values may be a list or a float64 array (a `SignalFrame` row), so frames need no copy.
"""

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


def checked_series(series: Iterable[OpenMetricsSeries]) -> Iterator[OpenMetricsSeries]:
    """The series as given, each checked before it is passed on: `ValueError` for an invalid
    metric or label name, a step that is not a positive number, or the same series twice
    (both ways into a temporary Prometheus would refuse it as duplicate samples)."""
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for name, labels, values, start, step in series:
        if not _METRIC_NAME.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        if not (step > 0 and math.isfinite(step)):
            raise ValueError(f"{name}: step must be a positive number of seconds, got {step!r}")
        for label in labels:
            if not _LABEL_NAME.match(label) or label.startswith("__"):
                raise ValueError(f"{name}: invalid label name {label!r}")
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ValueError(f"{name}{dict(labels)}: the same series is given twice")
        seen.add(key)
        yield name, labels, values, start, step
