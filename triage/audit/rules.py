"""The alerting and recording rules a Prometheus evaluates, read for what the checklist asks of them.

Alert rules are read the way Prometheus evaluates them: an alert on `triage:ttft_p99_seconds`
is expanded through the recording rule that defines it, so a P99 recorded once and
alerted on elsewhere is still seen as a P99, and a mean hidden behind a recording rule
is still seen as a mean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from triage.audit.promql import calls, clean, expand, metric_names_in

LatencyKind = Literal["ttft", "tpot", "latency"]
_HIST_SUFFIX = re.compile(r"_(?:bucket|sum|count)$")
_PLEVEL = re.compile(r"(?:^|[_:])p(\d{2,4})(?:[_:]|$)")


def latency_kind(name: str) -> LatencyKind | None:
    """Whether a metric or recorded name measures a latency, and which one.

    TTFT and TPOT (inter-token latency, time per output token) are told apart because the
    checklist wants each alerted on; any other latency (e2e, queue, a gateway's request
    time) is `latency`. A count of tokens or requests is not a latency.
    """
    low = _HIST_SUFFIX.sub("", name).lower()
    if "time_to_first_token" in low or re.search(r"(?:^|[_:])ttft(?:[_:]|$)", low):
        return "ttft"
    if (
        "inter_token_latency" in low
        or "time_per_output_token" in low
        or re.search(r"(?:^|[_:])(?:tpot|itl)(?:[_:]|$)", low)
    ):
        return "tpot"
    if any(word in low for word in ("latency", "e2e", "duration_seconds", "queue_time", "response_time")):
        return "latency"
    return None


def _plevel(name: str) -> float | None:
    """The quantile a recorded name says it holds: `triage:ttft_p99_seconds` -> 0.99, `p999` -> 0.999."""
    match = _PLEVEL.search(name.lower())
    if match is None:
        return None
    digits = str(match.group(1))
    return float(int(digits)) / float(10 ** len(digits))


@dataclass(frozen=True)
class Rule:
    """One rule from `/api/v1/rules`."""

    kind: Literal["alerting", "recording"]
    name: str
    query: str
    group: str
    file: str
    health: str = "ok"

    @property
    def where(self) -> str:
        file = self.file.rsplit("/", 1)[-1] if self.file else ""
        return f"{file}:{self.group}" if file else self.group


def parse_rules(data: Mapping[str, Any]) -> list[Rule]:
    """Rules from the `data` of `/api/v1/rules` (entries that are not rules are skipped)."""
    out: list[Rule] = []
    groups = data.get("groups")
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        for rule in group.get("rules") or []:
            if not isinstance(rule, dict) or rule.get("type") not in ("alerting", "recording"):
                continue
            name, query = rule.get("name"), rule.get("query")
            if not isinstance(name, str) or not isinstance(query, str):
                continue
            out.append(
                Rule(
                    rule["type"],
                    name,
                    query,
                    str(group.get("name") or ""),
                    str(group.get("file") or ""),
                    str(rule.get("health") or "ok"),
                )
            )
    return out


@dataclass(frozen=True)
class AlertFacts:
    """What one alerting rule reads once recording rules are expanded.

    `names` are the metric and recorded names it reads (before and after expansion);
    `quantiles` maps a latency kind to the highest quantile it takes of it; `means` are
    (kind, how) for each latency it reads as a mean: `_sum` over `_count`, `avg` of a
    latency that is not a quantile, or a gauge that is a mean by its name.
    """

    rule: Rule
    expanded: str
    names: frozenset[str]
    quantiles: Mapping[str, float]
    means: tuple[tuple[LatencyKind, str], ...]

    @property
    def label(self) -> str:
        return f"{self.rule.name} ({self.rule.where})"


_QUANTILE_FUNCTIONS: Final = ("histogram_quantile", "quantile_over_time", "quantile")
_MEAN_WORD = re.compile(r"(?:^|[_:])(?:avg|mean|average)(?:[_:]|$)")


def analyse_alert(rule: Rule, recordings: Mapping[str, str]) -> AlertFacts:
    """Which latencies an alert takes a quantile of, and which it reads as a mean."""
    expanded = expand(rule.query, recordings)
    names = metric_names_in(expanded) | metric_names_in(rule.query)
    text, _ = clean(expanded)
    quantiles: dict[str, float] = {}

    def note(kind: str, q: float) -> None:
        quantiles[kind] = max(q, quantiles.get(kind, 0.0))

    for _, first, inner in calls(text, _QUANTILE_FUNCTIONS):
        try:
            q = float(first)
        except ValueError:
            continue
        for name in metric_names_in(inner):
            kind = latency_kind(name)
            if kind is not None:
                note(kind, q)
    for name in names:
        kind, level = latency_kind(name), _plevel(name)
        if kind is not None and level is not None:
            note(kind, level)
    means: list[tuple[LatencyKind, str]] = []
    families = sorted({_HIST_SUFFIX.sub("", n) for n in names if n.endswith(("_sum", "_count"))})
    for family in families:
        kind = latency_kind(family)
        if kind is not None and f"{family}_sum" in names and f"{family}_count" in names:
            means.append((kind, f"{family}_sum / {family}_count"))
    for name in sorted(names):
        kind = latency_kind(name)
        if kind is not None and _MEAN_WORD.search(name.lower()):
            means.append((kind, name))
    for function, _, inner in calls(text, ("avg", "avg_over_time")):
        inner_names = metric_names_in(inner)
        quantile = bool(calls(inner, _QUANTILE_FUNCTIONS)) or any(_plevel(n) is not None for n in inner_names)
        if quantile:
            continue
        for name in sorted(inner_names):
            kind = latency_kind(name)
            if kind is not None and not name.endswith(("_bucket", "_count")):
                means.append((kind, f"{function}({name})"))
                break
    return AlertFacts(rule, expanded, names, quantiles, tuple(dict.fromkeys(means)))


@dataclass(frozen=True)
class RulesView:
    """The alerting rules of a server, analysed; recording rules by recorded name."""

    alerts: tuple[AlertFacts, ...]
    recordings: Mapping[str, str]
    broken: tuple[str, ...]

    @staticmethod
    def of(data: Mapping[str, Any]) -> RulesView:
        rules = parse_rules(data)
        recordings: dict[str, str] = {}
        for rule in rules:
            if rule.kind == "recording":
                recordings[rule.name] = (
                    f"{recordings[rule.name]} or {rule.query}" if rule.name in recordings else rule.query
                )
        alerts = tuple(analyse_alert(r, recordings) for r in rules if r.kind == "alerting")
        broken = tuple(f"{r.name} ({r.where})" for r in rules if r.health not in ("ok", "unknown"))
        return RulesView(alerts, recordings, broken)


__all__ = ["AlertFacts", "LatencyKind", "Rule", "RulesView", "analyse_alert", "latency_kind", "parse_rules"]
