"""What a read returns, and the parsing and validation of a reply's `data` into it.

A query's data is checked at this edge (result types, sample pairs, NaN/Inf strings,
native histograms refused) and becomes plain arrays; callers never parse query JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class ApiReply:
    """The `data` object of a JSON API reply, or the one-line reason there is none."""

    data: Mapping[str, Any] | None
    error: str | None


def _parse_names(data: object) -> set[str]:
    if not isinstance(data, list) or not all(isinstance(name, str) for name in data):
        raise _malformed("label values are not a list of strings")
    return set(data)


def _parse_series(data: object) -> list[SeriesData]:
    """`data` of a query reply as `(labels, times, values)`; NaN/Inf strings become floats.

    Scalars become one series without labels. Native-histogram samples have no float
    value to give; a series made only of them is refused rather than read as empty.
    """
    if not isinstance(data, dict):
        raise _malformed("no data object")
    result_type, result = data.get("resultType"), data.get("result")
    if result_type == "scalar":
        return [({}, *_samples([result]))]
    if result_type not in ("matrix", "vector") or not isinstance(result, list):
        raise _malformed(f"unsupported result type {result_type!r}")
    key = "values" if result_type == "matrix" else "value"
    out: list[SeriesData] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise _malformed("series without a metric object")
        if key not in item:
            what = "native histogram samples" if _has_histograms(item) else f"a series without {key!r}"
            raise _malformed(f"{what}: not supported")
        labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
        samples = item[key] if result_type == "matrix" else [item[key]]
        out.append((labels, *_samples(samples)))
    return out


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
