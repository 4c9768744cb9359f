"""What a read returns, and the parsing and validation of a reply's `data` into it.

A query's data is checked at this edge (result types, sample pairs, NaN/Inf strings,
native histograms refused) and becomes plain arrays; callers never parse query JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from signals.prometheus.errors import PrometheusBadReply
from signals.prometheus.transport import _Failure, _one_line

FloatArray = npt.NDArray[np.float64]
SeriesData = tuple[dict[str, str], FloatArray, FloatArray]
"""(labels including `__name__` when present, sample times in epoch seconds, values)."""


@dataclass(frozen=True)
class QueryResult:
    """The answer to one query of a round, successful or not.

    `series` holds `(labels, times, values)` with NaN/±Inf parsed from Prometheus's
    `"NaN"`/`"+Inf"` strings; an empty list means "no series", which is *absent*, not 0.
    Non-empty `warnings` mean the data may be partial. `error` is one line or None;
    `error_kind` is the matching `PrometheusError.kind`. `http_requests` counts the
    attempts this query made, retries included.
    """

    query: str
    series: list[SeriesData] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    http_requests: int = 0
    error_kind: str | None = None
    infos: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def partial(self) -> bool:
        return bool(self.warnings)

    @property
    def capped(self) -> bool:
        """Series were dropped by the series cap (`capped_warning`)."""
        return any(w.startswith(CAPPED) for w in self.warnings)


@dataclass(frozen=True)
class ApiReply:
    """The `data` object of a JSON API reply, or the one-line reason there is none."""

    data: Mapping[str, Any] | None
    error: str | None


def _parse_names(data: object) -> set[str]:
    if not isinstance(data, list) or not all(isinstance(name, str) for name in data):
        raise _malformed("label values are not a list of strings")
    return set(data)


# The series cap (`signals.vocabulary.DEFAULT_MAX_SERIES`, 2,000 per range query; 0 or None keeps them all). A
# selector that matches far more than a fleet (every replica of every model, a label gone
# wrong) can answer tens of thousands of series; past the cap the first ones in label order
# are kept and the rest dropped before anything else is made of them, and the answer says
# how many (`capped_warning`). A histogram's buckets count once (`le` aside), so a capped
# histogram loses whole replicas, never buckets, and fleets of up to 2,000 replicas fit.

STREAMED_REPLY_BYTES = 1024 * 1024
"""Replies larger than this are read as they stream in, series by series
(`signals.prometheus.streamed`). Parsed whole, a reply costs about ten times its size in
Python objects while it is parsed, and a round parses several at once: at 1,000 replicas,
with replies of 7 MB each parsed whole, a diagnosis peaked anywhere from 253 to 343 MB, and
at 186 MB every time once they were read as they stream in, in the same wall."""


class _Samples(NamedTuple):
    """A series' samples made arrays."""

    times: FloatArray
    values: FloatArray


class _Parsed(NamedTuple):
    """A series object checked and made arrays as its reply was read (`signals.prometheus.streamed`)."""

    labels: dict[str, str]
    samples: _Samples
    key: str
    """Where its samples were: `values` (a matrix) or `value` (a vector)."""


class ReplyArrays:
    """What the series of one reply share, kept once: their times and their label strings.

    A range query's series mostly hold a sample at every step, so their times are one array
    (at a thousand replicas, over 100 MB that would be held again and again); it is made
    read-only, so no reader can change another series' times through it. Label values
    repeat across series (the job, the model, a bucket's `le`) and are kept as one string.
    """

    def __init__(self) -> None:
        self._times: dict[tuple[int, float, float], FloatArray] = {}
        self._strings: dict[str, str] = {}

    def times(self, times: FloatArray) -> FloatArray:
        if not len(times):
            return times
        key = (len(times), float(times[0]), float(times[-1]))
        known = self._times.get(key)
        if known is not None and np.array_equal(known, times):
            return known
        times.flags.writeable = False
        self._times.setdefault(key, times)
        return times

    def labels(self, metric: Mapping[Any, Any]) -> dict[str, str]:
        strings = self._strings
        out: dict[str, str] = {}
        for name, value in metric.items():
            text = value if type(value) is str else str(value)
            out[name if type(name) is str else str(name)] = strings.setdefault(text, text)
        return out

    def series(self, item: object) -> object:
        """A parsed series object as `_Parsed`; anything else as it is, for `_parse_capped`
        to name what is wrong with it."""
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            return item
        if isinstance(item.get("values"), list):
            stamps, values = _samples(item["values"])
            return _Parsed(
                self.labels(item.get("metric", {})), _Samples(self.times(stamps), values), "values"
            )
        if isinstance(item.get("value"), list):
            return _Parsed(self.labels(item.get("metric", {})), _Samples(*_samples([item["value"]])), "value")
        return item


CAPPED = "capped: "


def capped_warning(kept: int, total: int) -> str:
    """The line a capped answer carries into the signal's status and the diagnosis."""
    return f"{CAPPED}{kept} of {total} series (the first {kept} by labels kept, {total - kept} dropped)"


def _parse_series(data: object) -> list[SeriesData]:
    """`data` of a query reply as `(labels, times, values)`; NaN/Inf strings become floats.

    Scalars become one series without labels. Native-histogram samples have no float
    value to give; a series made only of them is refused rather than read as empty.
    """
    return _parse_capped(data, None)[0]


def _group(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What the cap counts: the labels without `le`, so a histogram keeps whole replicas."""
    return tuple(sorted((k, v) for k, v in labels.items() if k != "le"))


def _parse_capped(data: object, max_series: int | None) -> tuple[list[SeriesData], int, int]:
    """`_parse_series` with at most `max_series` series (a histogram's buckets counting once),
    with how many were kept and how many there were, counted so; the samples of a dropped
    series are never converted (in a reply parsed whole).

    Past the cap, the series are sorted by their labels (`le` last) and the first
    `max_series` kept: the same ones whatever order the server answered in.
    """
    if not isinstance(data, dict):
        raise _malformed("no data object")
    result_type, result = data.get("resultType"), data.get("result")
    if result_type == "scalar":
        return [({}, *_samples([result]))], 1, 1
    if result_type not in ("matrix", "vector") or not isinstance(result, list):
        raise _malformed(f"unsupported result type {result_type!r}")
    key = "values" if result_type == "matrix" else "value"
    reply = ReplyArrays()
    labelled: list[tuple[dict[str, str], object]] = []
    for item in result:
        if isinstance(item, _Parsed):
            if item.key != key:
                raise _malformed(f"a series without {key!r}: not supported")
            labelled.append((item.labels, item.samples))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise _malformed("series without a metric object")
        if key not in item:
            what = "native histogram samples" if _has_histograms(item) else f"a series without {key!r}"
            raise _malformed(f"{what}: not supported")
        labelled.append((reply.labels(item.get("metric", {})), item[key]))
    groups = {_group(labels) for labels, _ in labelled}
    total = kept_count = len(groups)
    if max_series and total > max_series:
        kept_count = max_series
        kept = set(sorted(groups)[:max_series])
        chosen = [(labels, item) for labels, item in labelled if _group(labels) in kept]
        labelled = sorted(chosen, key=lambda pair: (_group(pair[0]), pair[0].get("le", "")))
    out: list[SeriesData] = []
    for labels, samples in labelled:
        if isinstance(samples, _Samples):
            out.append((labels, samples.times, samples.values))
        elif result_type == "matrix":
            stamps, values = _samples(samples)
            out.append((labels, reply.times(stamps), values))
        else:
            out.append((labels, *_samples([samples])))
    return out, kept_count, total


def _has_histograms(item: Mapping[str, object]) -> bool:
    return "histogram" in item or "histograms" in item


def _samples(pairs: object) -> tuple[FloatArray, FloatArray]:
    if not isinstance(pairs, list):
        raise _malformed("samples are not a list")
    if not pairs:
        return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)
    try:
        stamps, texts = zip(*pairs, strict=True)
        if None in stamps or None in texts:
            raise ValueError("not [time, value] pairs")
        times = np.array(stamps, dtype=np.float64)
        values = np.array(texts, dtype=np.float64)
        if times.ndim != 1 or values.ndim != 1:
            raise ValueError("not [time, value] pairs")
    except (ValueError, TypeError) as exc:
        raise _malformed(f"bad samples: {exc}") from exc
    return times, values


def _malformed(what: str) -> _Failure:
    return _Failure(f"malformed reply: {what}", kind="malformed", family=PrometheusBadReply)


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [_one_line(str(item)) for item in value]


PARTIAL = "partial response: some storage nodes did not answer (isPartial)"


def _warnings(envelope: Mapping[str, object]) -> list[str]:
    """The reply's warnings: Prometheus' `warnings`, and VictoriaMetrics' `isPartial: true`.

    The VictoriaMetrics cluster answers a query some of its storage nodes missed with a
    success flagged `isPartial` and no warning; it is partial data all the same.
    """
    found = _strings(envelope.get("warnings"))
    if envelope.get("isPartial") is True:
        found.append(PARTIAL)
    return found
