"""`histogram_quantile` over classic `le` buckets, computed here exactly as Prometheus 2.42 does.

The live diagnosis fetches a histogram family once, as bucket rates per (`le`, replica),
and derives every quantile from those arrays (each replica's, and the fleet's from
buckets summed across replicas) instead of asking Prometheus for `histogram_quantile`
once per quantile. That only holds if the numbers are Prometheus's own, so this module
follows `promql/quantile.go` (`bucketQuantile`, `coalesceBuckets`, `ensureMonotonic`) and
`funcHistogramQuantile` rule for rule, edge cases included, and a property test holds it
to a real Prometheus.

What Prometheus does with one group of bucket samples at one evaluation time:

- it groups series by all their labels except `le` (the metric name included) and
  returns one sample per group, without `le` and without the metric name; grouping is
  the caller's job here.
- a series whose `le` is missing or does not parse as a Go float is skipped
  (`parse_le` returns None for those; `le=""` is no label at all to Prometheus). A
  group left with no parsable bucket gives no sample at all.
- q NaN gives NaN, q < 0 gives -Inf, q > 1 gives +Inf, whatever the buckets.
- the buckets are sorted by upper bound; if the highest is not +Inf the answer is NaN.
  Buckets with the same bound (`"1"` and `"1.0"`) are merged by summing their counts;
  fewer than two buckets left is NaN.
- counts are made monotonic: one lower than the highest count before it is raised to
  it. NaN counts are never raised, and a NaN first count disables the raising.
- with observations the +Inf bucket's count (0 gives NaN) and rank = q * observations,
  a binary search (Go's `sort.Search`, over all but the +Inf bucket) finds the first
  bucket whose count >= rank. In the +Inf bucket: the second-highest bound. In the
  lowest bucket with a bound <= 0: that bound. Otherwise linear interpolation inside the
  bucket, from 0 for the lowest one.
- arithmetic is plain IEEE: a bucket with no observations where the rank lands gives
  0/0 = NaN, negative counts and infinite bounds go through the same formula.

"No result" and NaN are different answers and are kept apart. `has_result` says at
which times Prometheus returns a sample for the group at all (some bucket has a sample
then); `bucket_quantile` is NaN both where that sample is NaN (no +Inf bucket, no
observations, ...) and where there is no sample. A caller drops the times without a
result, as a range query would, and may then read NaN as missing.

In the arrays, NaN means "no sample", as everywhere in this package. A bucket series
can also hold a real NaN sample value, which Prometheus does use (a NaN count poisons
what it touches); a caller that can tell the two apart passes `present`.

One deliberate difference: a bound that parses to NaN (`le="NaN"`) compares neither
below nor above any other, so Prometheus's answer depends on the order its series
arrive in and on its sort's internals; no exporter writes one, and the answer here is
NaN wherever such a bucket has a sample.
"""

from __future__ import annotations

import math
import re

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_NAN = re.compile(r"nan\Z", re.IGNORECASE | re.ASCII)
_INFINITY = re.compile(r"[+-]?(?:inf|infinity)\Z", re.IGNORECASE | re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?=[0-9_]*\.?[0-9_]*[0-9])[0-9_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9][0-9_]*)?\Z")
_HEXADECIMAL = re.compile(
    r"[+-]?0[xX](?=[0-9a-fA-F_]*\.?[0-9a-fA-F_]*[0-9a-fA-F])[0-9a-fA-F_]*(?:\.[0-9a-fA-F_]*)?"
    r"[pP][+-]?[0-9][0-9_]*\Z"
)


def parse_le(text: str) -> float | None:
    """The bound an `le` value stands for, as Go's `strconv.ParseFloat(text, 64)` reads it.

    None where ParseFloat fails and Prometheus therefore skips the series: the empty
    string (a series without `le`), surrounding spaces, `+NaN`, a decimal or hexadecimal
    number out of float range (`1e400`: ParseFloat returns a range error). Accepted as
    Go accepts them: `+Inf`, `inf`, `Infinity` in any case and with a sign, `NaN`,
    hexadecimal floats with a `p` exponent (`0x1p-3`), and underscores between digits
    (`1_000`).
    """
    if _NAN.match(text):
        return math.nan
    if _INFINITY.match(text):
        return -math.inf if text.startswith("-") else math.inf
    hexadecimal = _HEXADECIMAL.match(text) is not None
    if not hexadecimal and _DECIMAL.match(text) is None:
        return None
    if "_" in text and not _underscores_ok(text):
        return None
    plain = text.replace("_", "")
    try:
        value = float.fromhex(plain) if hexadecimal else float(plain)
    except OverflowError:
        return None
    return None if math.isinf(value) else value


def _underscores_ok(text: str) -> bool:
    """Go's rule: an underscore only between two digits, or between a base prefix and a digit."""
    body = text[1:] if text[:1] in "+-" else text
    hexadecimal = body[:2].lower() == "0x"
    saw = "0" if hexadecimal else "^"
    for char in body[2:] if hexadecimal else body:
        if char.isdigit() or (hexadecimal and char.lower() in "abcdef"):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def has_result(counts: npt.ArrayLike, present: npt.ArrayLike | None = None) -> BoolArray:
    """Per time, whether Prometheus returns a sample for this group: some bucket has a sample.

    `counts` as for `bucket_quantile` (NaN is "no sample" unless `present` is given).
    Where this is False a range query has no point; where it is True the point may
    still be NaN.
    """
    _, present_array = _checked(counts, present)
    return np.asarray(present_array.any(axis=0), dtype=np.bool_)


def bucket_quantile(
    q: float, uppers: npt.ArrayLike, counts: npt.ArrayLike, *, present: npt.ArrayLike | None = None
) -> FloatArray:
    """Prometheus 2.42's `histogram_quantile(q, ...)` for one group of classic buckets, per time.

    `uppers`: the bound of each bucket series (`parse_le` of its `le`), in any order,
    repeats allowed. `counts`: shape (buckets, times), each bucket's cumulative count or
    rate; NaN is "this series has no sample at this time", unless `present` (same shape,
    bool) says which values are samples, so that a NaN sample value can be told from a
    missing one. Returns one value per time: Prometheus's answer over the buckets that
    have a sample then, NaN where that answer is NaN and NaN where Prometheus returns
    nothing (tell the two apart with `has_result`).

    Vectorised over time. With monotonic counts the search is a count of the buckets
    below the rank; with NaN samples (which break the order) Go's bisection is replayed,
    probe for probe, at all times at once.
    """
    counts_array, present_array = _checked(counts, present)
    nan_samples = present is not None
    bounds = np.asarray(uppers, dtype=np.float64).reshape(-1)
    if bounds.shape[0] != counts_array.shape[0]:
        raise ValueError(f"{bounds.shape[0]} upper bounds for {counts_array.shape[0]} bucket rows")
    times = counts_array.shape[1]
    out = np.full(times, np.nan)
    seen = present_array.any(axis=0)
    q = float(q)
    if math.isnan(q) or not seen.any():
        return out
    if q < 0 or q > 1:
        out[seen] = -np.inf if q < 0 else np.inf
        return out

    unordered = np.isnan(bounds)
    poisoned: BoolArray = np.zeros(times, dtype=np.bool_)
    if unordered.any():
        poisoned = np.asarray(present_array[unordered].any(axis=0), dtype=np.bool_)
        bounds, counts_array, present_array = (
            bounds[~unordered],
            counts_array[~unordered],
            present_array[~unordered],
        )
    if bounds.shape[0] == 0:
        return out

    if not (bounds[1:] >= bounds[:-1]).all():
        order = np.argsort(bounds, kind="stable")
        bounds, counts_array, present_array = bounds[order], counts_array[order], present_array[order]
    distinct = np.concatenate(([True], bounds[1:] != bounds[:-1]))
    if not distinct.all():
        starts = np.flatnonzero(distinct)
        # -0.0 is the one additive identity that leaves every count, -0.0 included, as it was.
        counts_array = np.add.reduceat(np.where(present_array, counts_array, -0.0), starts, axis=0)
        present_array = np.logical_or.reduceat(present_array, starts, axis=0)
        bounds = bounds[starts]

    cols = np.arange(times)
    upper: FloatArray
    complete = bool(present_array.all()) or bool(present_array[:, seen].all())
    # A missing sample becomes +Inf, so it can neither pass for a NaN sample nor break monotonicity.
    count = counts_array if complete else np.where(present_array, counts_array, np.inf)
    if complete:
        size = np.full(times, bounds.shape[0])
        upper = np.broadcast_to(bounds[:, np.newaxis], count.shape)
    else:
        # Per time, the buckets with a sample first, in bound order: row i is the i-th one present.
        rows = np.argsort(~present_array, axis=0, kind="stable")
        upper = bounds[rows]
        count = count.ravel()[rows * times + cols]
        size = present_array.sum(axis=0)
    last = np.maximum(size - 1, 0)
    valid = seen & ~poisoned & (size >= 2) & (upper[last, cols] == np.inf)
    if not valid.any():
        return out

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        with_nan = nan_samples and bool(np.isnan(count[:, valid]).any())
        if with_nan:
            envelope = np.fmax.accumulate(count, axis=0)
            raised = np.where(count < envelope, envelope, count)
            count = np.where(np.isnan(count[0]), count, raised)
        elif not (count[1:] >= count[:-1]).all():
            envelope = np.maximum.accumulate(count, axis=0)
            count = np.where(count < envelope, envelope, count)

        observations = count[last, cols]
        valid &= observations != 0
        rank = q * observations
        if with_nan:
            found = _search(count, rank, last, cols)
        else:
            # Monotonic counts: sort.Search's answer is the number of buckets below the rank.
            below = count.shape[0] - 1 - np.count_nonzero(count[:-1] >= rank, axis=0)
            found = np.minimum(below, last)

        before = np.maximum(found - 1, 0)
        inner = found > 0
        start = np.where(inner, upper[before, cols], 0.0)
        end = upper[found, cols]
        width = np.where(inner, count[found, cols] - count[before, cols], count[found, cols])
        into = np.where(inner, rank - count[before, cols], rank)
        interpolated = start + (end - start) * (into / width)

    second_highest = upper[np.maximum(size - 2, 0), cols]
    lowest = upper[0, cols]
    value = np.where(
        found == last, second_highest, np.where((found == 0) & (lowest <= 0), lowest, interpolated)
    )
    out[valid] = value[valid]
    return out


def _search(
    count: FloatArray, rank: FloatArray, last: npt.NDArray[np.intp], cols: npt.NDArray[np.intp]
) -> npt.NDArray[np.intp]:
    """Go's `sort.Search(last, count[i] >= rank)` at every time at once, step for step.

    With NaN counts the predicate is not monotonic and the answer depends on where the
    bisection probes, so it is bisected here exactly as Go does, not found by counting.
    """
    low = np.zeros(rank.shape[0], dtype=np.intp)
    high = last.copy()
    while True:
        searching = low < high
        if not searching.any():
            return low
        middle = (low + high) >> 1
        reached = count[middle, cols] >= rank
        low = np.where(searching & ~reached, middle + 1, low)
        high = np.where(searching & reached, middle, high)


def _checked(counts: npt.ArrayLike, present: npt.ArrayLike | None) -> tuple[FloatArray, BoolArray]:
    counts_array = np.asarray(counts, dtype=np.float64)
    if counts_array.ndim != 2:
        raise ValueError(f"counts must be 2-D (buckets, times), got shape {counts_array.shape}")
    if present is None:
        return counts_array, ~np.isnan(counts_array)
    present_array = np.asarray(present, dtype=np.bool_)
    if present_array.shape != counts_array.shape:
        raise ValueError(f"present has shape {present_array.shape}, counts {counts_array.shape}")
    return counts_array, present_array
