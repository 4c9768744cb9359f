"""Read a fixture: an incident recorded as series in promtool's notation.

A signal-level fixture names vocabulary signals; a raw one (`level: raw`) names what the
exporters expose (vLLM, SGLang, DCGM, kube-state-metrics), and its frame holds those raw
series until `signals.rawreplay` turns them into signals through a real Prometheus.

The format is the public contract of VOCABULARY.md ("Fixture format"). Structure and
the signal vocabulary are checked here, with file, line and key in every message;
symptom and cause ids are the triage layer's to check (it knows the playbooks), so the
parsed document travels with the fixture for it to locate its own errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from signals.errors import InputError
from signals.fixturefleet import FixtureFleet, fleets_in, read_expect_fleet, read_fleet, select_fleet
from signals.frame import Series, SignalFrame, labels_of
from signals.notation import NotationError, parse_values
from signals.selector import parse_selector
from signals.timeparse import parse_duration, parse_instant
from signals.vocabulary import SIGNALS, suggest
from signals.yamldoc import Document, read_yaml

TOP_KEYS = (
    "name",
    "description",
    "level",
    "interval",
    "start",
    "at",
    "symptom",
    "alert",
    "fleet",
    "input_series",
    "expect",
)
EXPECT_KEYS = ("fleet", "cause", "verdict", "also", "forbidden", "not_forbidden")
VERDICTS = ("cause", "ambiguous", "unexplained", "no_incident")
ALERT_KEYS = ("labels", "annotations")
SERIES_KEYS = ("series", "values")
MAX_STEPS = 2_000_000


@dataclass(frozen=True)
class Expect:
    """What a replay must conclude. `cause` None means no expectation on the top cause;
    `no_cause` means no cause may be ranked at all (`cause: none`). `fleet` names the fleet
    of a raw fixture holding several that the expectation is about (name or labels)."""

    cause: str | None
    no_cause: bool = False
    also: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    not_forbidden: tuple[str, ...] = ()
    fleet: str | None = None
    verdict: str | None = None
    """The verdict the diagnosis must reach (`cause`, `ambiguous`, `unexplained`,
    `no_incident`); None: not checked."""


@dataclass(frozen=True)
class Fixture:
    """One incident: metadata, its signal frame, and the document it came from."""

    path: str
    name: str
    description: str
    interval: float
    start: float
    at: float
    symptom: str | None
    alert_labels: Mapping[str, str]
    alert_annotations: Mapping[str, str]
    expect: Expect | None
    frame: SignalFrame
    document: Document = field(repr=False)
    level: str = "signal"
    fleet: FixtureFleet | None = None
    """Which fleet the incident is (`fleet:` at the top); for a replayed raw fixture, the fleet
    its replay diagnosed."""


def _unknown_keys(
    doc: Document, data: Mapping[str, Any], allowed: tuple[str, ...], path: tuple[str | int, ...]
) -> None:
    for key in data:
        if key not in allowed:
            raise doc.error(
                (*path, str(key)),
                f"unknown key{suggest(str(key), list(allowed))}; allowed: {', '.join(allowed)}",
            )


def _string(doc: Document, value: Any, path: tuple[str | int, ...]) -> str:
    if not isinstance(value, str):
        raise doc.error(path, f"expected a string, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _string_list(doc: Document, value: Any, path: tuple[str | int, ...]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise doc.error(path, f"expected a list of ids, got {_kind(value)}")
    return tuple(_string(doc, item, (*path, i)) for i, item in enumerate(value))


def _string_map(doc: Document, value: Any, path: tuple[str | int, ...]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(path, f"expected a mapping, got {_kind(value)}")
    out = {}
    for k, v in value.items():
        if isinstance(v, (dict, list)) or v is None:
            raise doc.error((*path, str(k)), f"expected a plain value, got {_kind(v)}")
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _read_expect(doc: Document, value: Any) -> Expect:
    path: tuple[str | int, ...] = ("expect",)
    if not isinstance(value, dict):
        raise doc.error(path, f"expected a mapping, got {_kind(value)}")
    _unknown_keys(doc, value, EXPECT_KEYS, path)
    cause = value.get("cause")
    if cause is not None:
        cause = _string(doc, cause, (*path, "cause"))
    verdict = value.get("verdict")
    if verdict is not None:
        verdict = _string(doc, verdict, (*path, "verdict"))
        if verdict not in VERDICTS:
            raise doc.error((*path, "verdict"), f"unknown verdict {verdict!r}; one of {', '.join(VERDICTS)}")
    return Expect(
        verdict=verdict,
        cause=None if cause in (None, "none") else cause,
        no_cause=cause == "none",
        also=_string_list(doc, value.get("also"), (*path, "also")),
        forbidden=_string_list(doc, value.get("forbidden"), (*path, "forbidden")),
        not_forbidden=_string_list(doc, value.get("not_forbidden"), (*path, "not_forbidden")),
        fleet=read_expect_fleet(doc, value["fleet"]) if value.get("fleet") is not None else None,
    )


def fixture_from_document(doc: Document) -> Fixture:
    """Validate a parsed fixture document and build its frame."""
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error((), f"a fixture is a mapping of keys, got {_kind(data)}")
    _unknown_keys(doc, data, TOP_KEYS, ())
    level = data.get("level", "signal")
    if level not in ("signal", "raw"):
        raise doc.error(("level",), "expected signal or raw")
    name = _string(doc, data.get("name", ""), ("name",)) if "name" in data else ""
    if not name:
        raise doc.error(("name",), "every fixture needs a unique name")
    description = str(data.get("description") or "")
    try:
        interval = parse_duration(_string(doc, data.get("interval", "15s"), ("interval",)))
    except ValueError as exc:
        raise doc.error(("interval",), str(exc)) from None
    if interval <= 0:
        raise doc.error(("interval",), "must be longer than zero")
    if "start" not in data:
        raise doc.error(("start",), "missing: the time of each series' first value (RFC 3339)")
    try:
        start = parse_instant(data["start"])
    except ValueError as exc:
        raise doc.error(("start",), str(exc)) from None

    raw_series = data.get("input_series")
    if raw_series is None:
        raise doc.error(("input_series",), "missing: a fixture needs at least one series")
    if not isinstance(raw_series, list) or not raw_series:
        raise doc.error(("input_series",), "expected a non-empty list of {series, values}")
    parsed: list[tuple[str, dict[str, str], np.ndarray]] = []
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for i, item in enumerate(raw_series):
        path: tuple[str | int, ...] = ("input_series", i)
        if not isinstance(item, dict):
            raise doc.error(path, f"expected a mapping with series and values, got {_kind(item)}")
        _unknown_keys(doc, item, SERIES_KEYS, path)
        if "series" not in item:
            raise doc.error(path, "missing key: series")
        try:
            metric, labels = parse_selector(_string(doc, item["series"], (*path, "series")))
        except ValueError as exc:
            raise doc.error((*path, "series"), str(exc)) from None
        if level == "signal" and metric not in SIGNALS:
            raise doc.error((*path, "series"), f"unknown signal '{metric}'{suggest(metric)}")
        key = (metric, labels_of(labels))
        if key in seen:
            raise doc.error((*path, "series"), f"the same series is also given at input_series[{seen[key]}]")
        seen[key] = i
        values_text = item.get("values")
        if values_text is None or (isinstance(values_text, str) and not values_text.strip()):
            raise doc.error((*path, "values"), "the series has no values")
        if isinstance(values_text, (int, float)) and not isinstance(values_text, bool):
            values_text = str(values_text)
        try:
            values = parse_values(_string(doc, values_text, (*path, "values")))
        except NotationError as exc:
            raise doc.error((*path, "values"), str(exc)) from None
        if len(values) > MAX_STEPS:
            raise doc.error((*path, "values"), f"more than {MAX_STEPS:,} samples")
        parsed.append((metric, labels, values))

    steps = max(len(v) for _, _, v in parsed)
    times = start + interval * np.arange(steps, dtype=np.float64)
    series = []
    for metric, labels, values in parsed:
        if len(values) < steps:
            values = np.concatenate([values, np.full(steps - len(values), np.nan)])
        series.append(Series(metric, labels_of(labels), values))
    frame = SignalFrame(times, series, source=doc.source)

    at = frame.end
    if data.get("at") is not None:
        raw_at = data["at"]
        try:
            if isinstance(raw_at, str) and is_offset(raw_at):
                at = start + parse_duration(raw_at)
            else:
                at = parse_instant(raw_at)
        except ValueError as exc:
            raise doc.error(("at",), str(exc)) from None
        if not frame.start <= at <= frame.end:
            raise doc.error(
                ("at",),
                f"outside the data: the series cover offsets 0s to "
                f"{int(frame.end - frame.start)}s from start",
            )

    symptom = data.get("symptom")
    if symptom is not None:
        symptom = _string(doc, symptom, ("symptom",))
    alert = data.get("alert") or {}
    if not isinstance(alert, dict):
        raise doc.error(("alert",), f"expected a mapping with labels and annotations, got {_kind(alert)}")
    _unknown_keys(doc, alert, ALERT_KEYS, ("alert",))
    expect = _read_expect(doc, data["expect"]) if data.get("expect") is not None else None
    record = read_fleet(doc, data["fleet"]) if data.get("fleet") is not None else None
    wanted = expect.fleet if expect is not None else None
    if level == "signal" and wanted is not None:
        raise doc.error(
            ("expect", "fleet"),
            "only a raw fixture (level: raw) holds several fleets; a signal-level fixture is one "
            "fleet, named by `fleet:` at the top",
        )
    if level == "raw" and (record is not None or expect is not None):
        found = fleets_in(((m, labels) for m, labels, _ in parsed), record)
        select_fleet(doc, found, record, wanted, expect is not None)
    return Fixture(
        path=doc.source,
        name=name,
        description=description,
        interval=interval,
        start=start,
        at=at,
        symptom=symptom,
        alert_labels=_string_map(doc, alert.get("labels"), ("alert", "labels")),
        alert_annotations=_string_map(doc, alert.get("annotations"), ("alert", "annotations")),
        expect=expect,
        frame=frame,
        document=doc,
        level=level,
        fleet=record,
    )


def load_fixture(path: str) -> Fixture:
    """Read, validate and build a fixture file; every problem is an InputError."""
    doc = read_yaml(path)
    return fixture_from_document(doc)


def is_offset(text: str) -> bool:
    """True for `40m`-style offsets, False for instants (RFC 3339 or epoch)."""
    try:
        parse_duration(text)
    except ValueError:
        return False
    return True


__all__ = ["Expect", "Fixture", "InputError", "fixture_from_document", "is_offset", "load_fixture"]
