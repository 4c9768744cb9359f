"""Cumulative histogram buckets read the way Prometheus reads them.

The request-length checks take quantiles, shares above a threshold and the longest
observation from `sum by (le) (increase(..._bucket[window]))`, so these follow
`histogram_quantile`: linear interpolation within a bucket, the +Inf bucket as the total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from triage.audit.model import Sample


def buckets_of(samples: Sequence[Sample]) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) sorted by bound, +Inf last; samples without `le` are ignored."""
    out: list[tuple[float, float]] = []
    for s in samples:
        le = s.labels.get("le")
        if le is None or not math.isfinite(s.value):
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        out.append((bound, s.value))
    out.sort()
    return out


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative buckets: linear within a bucket."""
    if not buckets or not math.isinf(buckets[-1][0]):
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                return buckets[i - 1][0] if i > 0 else None
            if i == 0 and bound <= 0:
                return bound
            width = count - prev_count
            return prev_bound + (bound - prev_bound) * ((rank - prev_count) / width if width > 0 else 1.0)
        prev_bound, prev_count = bound, count
    return None


def share_above(threshold: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The share of observations above `threshold`, interpolating within its bucket."""
    if not buckets or not math.isinf(buckets[-1][0]) or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if threshold <= bound:
            if math.isinf(bound):
                below = prev_count
            else:
                span = bound - prev_bound
                below = prev_count + (count - prev_count) * (
                    (threshold - prev_bound) / span if span > 0 else 1
                )
            return max(0.0, 1.0 - below / total)
        prev_bound, prev_count = bound, count
    return 0.0


def max_bound(buckets: Sequence[tuple[float, float]]) -> tuple[float, bool] | None:
    """The longest observation as (bound, exact): `le` of the first bucket holding every one.

    When the +Inf bucket holds some, the bound is the largest finite edge and `exact` is
    False: the longest was above it.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    finite = [(b, c) for b, c in buckets if math.isfinite(b)]
    for bound, count in finite:
        if count >= total:
            return bound, True
    return (finite[-1][0], False) if finite else None


__all__ = ["bucket_quantile", "buckets_of", "max_bound", "share_above"]
