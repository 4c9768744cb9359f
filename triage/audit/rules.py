"""The alerting and recording rules a Prometheus evaluates, read for what the checklist asks of them.

Alert rules are read the way Prometheus evaluates them: an alert on `triage:ttft_p99_seconds`
is expanded through the recording rule that defines it, so a P99 recorded once and
alerted on elsewhere is still seen as a P99, and a mean hidden behind a recording rule
is still seen as a mean. The reading is done on the syntax tree (`triage.audit.promql`);
a rule the parser refuses is kept as `UnreadableRule`, so that the checks can say which
rule they could not read instead of judging without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from triage.audit.promql import (
    Expr,
    Node,
    PromQLError,
    Recordings,
    averaging,
    division,
    names_read,
    parse,
    parse_recordings,
    quantile_taken,
    render,
    selector_names,
    takes_quantile,
    walk,
)

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

    `names` are the metric and recorded names it reads (the recorded names and what
    they record); `quantiles` maps a latency kind to the highest quantile it takes of
    it; `means` are (kind, how) for each latency it reads as a mean: a `_sum` divided
    by its `_count`, `avg` of a latency that is not a quantile, or a gauge that is a
    mean by its name. `expanded` is the query with recorded names written out.
    """

    rule: Rule
    expanded: str
    names: frozenset[str]
    quantiles: Mapping[str, float]
    means: tuple[tuple[LatencyKind, str], ...]

    @property
    def label(self) -> str:
        return f"{self.rule.name} ({self.rule.where})"


@dataclass(frozen=True)
class UnreadableRule:
    """A rule the parser refuses: Prometheus evaluates it (newer syntax, say), the audit cannot read it."""

    rule: Rule
    message: str

    @property
    def evidence(self) -> str:
        return (
            f"the {self.rule.kind} rule {self.rule.name} ({self.rule.where}) does not parse: {self.message}"
        )


_MEAN_WORD = re.compile(r"(?:^|[_:])(?:avg|mean|average)(?:[_:]|$)")


def analyse_alert(rule: Rule, recordings: Mapping[str, str]) -> AlertFacts:
    """Which latencies an alert takes a quantile of, and which it reads as a mean.

    `recordings` maps a recorded name to the expression recording it; one that does not
    parse is not expanded. PromQLError when the alert itself does not parse.
    """
    return _analyse(rule, parse(rule.query), parse_recordings(recordings))


def _analyse(rule: Rule, tree: Expr, recordings: Recordings) -> AlertFacts:
    root = Node(tree)
    nodes = list(walk(root, recordings))
    names = frozenset(name for node in nodes for name in selector_names(node.expr))
    return AlertFacts(
        rule,
        render(root, recordings),
        names,
        _quantiles(nodes, names, recordings),
        _means(nodes, names, recordings),
    )


def _quantiles(nodes: Sequence[Node], names: frozenset[str], recordings: Recordings) -> dict[str, float]:
    """Latency kind -> the highest quantile taken of it, by a quantile function or a recorded `pNN` name."""
    out: dict[str, float] = {}

    def note(kind: str, q: float) -> None:
        out[kind] = max(q, out.get(kind, 0.0))

    for node in nodes:
        q = quantile_taken(node.expr)
        if q is None:
            continue
        for name in names_read(node, recordings):
            kind = latency_kind(name)
            if kind is not None:
                note(kind, q)
    for name in names:
        kind, level = latency_kind(name), _plevel(name)
        if kind is not None and level is not None:
            note(kind, level)
    return out


def _means(
    nodes: Sequence[Node], names: frozenset[str], recordings: Recordings
) -> tuple[tuple[LatencyKind, str], ...]:
    """(kind, how) for each latency read as a mean: `_sum` divided by its `_count`, by name, or by `avg`."""
    means: list[tuple[LatencyKind, str]] = []
    families: set[str] = set()
    for node in nodes:
        operands = division(node, recordings)
        if operands is not None:
            dividend, divisor = (names_read(n, recordings) for n in operands)
            sums = {n.removesuffix("_sum") for n in dividend if n.endswith("_sum")}
            families |= {family for family in sums if f"{family}_count" in divisor}
    for family in sorted(families):
        kind = latency_kind(family)
        if kind is not None:
            means.append((kind, f"{family}_sum / {family}_count"))
    for name in sorted(names):
        kind = latency_kind(name)
        if kind is not None and _MEAN_WORD.search(name.lower()):
            means.append((kind, name))
    for node in nodes:
        function = averaging(node.expr)
        if function is None:
            continue
        inner = list(walk(node, recordings))
        inner_names = {name for n in inner for name in selector_names(n.expr)}
        if any(takes_quantile(n.expr) for n in inner) or any(_plevel(n) is not None for n in inner_names):
            continue
        for name in sorted(inner_names):
            kind = latency_kind(name)
            if kind is not None and not name.endswith(("_bucket", "_count")):
                means.append((kind, f"{function}({name})"))
                break
    return tuple(dict.fromkeys(means))


@dataclass(frozen=True)
class RulesView:
    """The alerting rules of a server, analysed; recording rules by recorded name; what could not be read.

    `recordings` holds every expression recording a name (several rules may record one).
    `broken` names the rules Prometheus itself reports unhealthy; `unreadable` the rules
    the parser refuses, which are kept (as evidence) rather than dropped.
    """

    alerts: tuple[AlertFacts, ...]
    recordings: Mapping[str, tuple[str, ...]]
    broken: tuple[str, ...]
    unreadable: tuple[UnreadableRule, ...] = ()

    @property
    def hiding(self) -> tuple[UnreadableRule, ...]:
        """The unreadable rules that may hide what the alerts read: alerts, and recordings an alert reads."""
        read = {name for alert in self.alerts for name in alert.names}
        return tuple(u for u in self.unreadable if u.rule.kind == "alerting" or u.rule.name in read)

    @staticmethod
    def of(data: Mapping[str, Any]) -> RulesView:
        rules = parse_rules(data)
        trees: list[tuple[Rule, Expr]] = []
        unreadable: list[UnreadableRule] = []
        for rule in rules:
            try:
                trees.append((rule, parse(rule.query)))
            except PromQLError as exc:
                unreadable.append(UnreadableRule(rule, exc.message))
        texts: dict[str, tuple[str, ...]] = {}
        recorded: dict[str, tuple[Expr, ...]] = {}
        for rule in rules:
            if rule.kind == "recording":
                texts[rule.name] = (*texts.get(rule.name, ()), rule.query)
        for rule, tree in trees:
            if rule.kind == "recording":
                recorded[rule.name] = (*recorded.get(rule.name, ()), tree)
        alerts = tuple(_analyse(rule, tree, recorded) for rule, tree in trees if rule.kind == "alerting")
        broken = tuple(f"{r.name} ({r.where})" for r in rules if r.health not in ("ok", "unknown"))
        return RulesView(alerts, texts, broken, tuple(unreadable))


__all__ = [
    "AlertFacts",
    "LatencyKind",
    "Rule",
    "RulesView",
    "UnreadableRule",
    "analyse_alert",
    "latency_kind",
    "parse_rules",
]
