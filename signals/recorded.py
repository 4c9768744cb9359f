"""The `triage:*` series that `triage rules` records, read before the raw catalog.

A Prometheus that evaluates the rules of `triage rules` already holds every signal as
`triage:<signal>` (the fleet's view) and `triage:<signal>:replica` (per replica), grouped
as the catalog's queries group, beside the fleet labels. Reading those costs Prometheus a
lookup instead of rates over every bucket. The fleet views of one scope are read by ONE
query (a regular expression on the metric name); each per-replica view by a query of its
own, so the series cap (`signals.prometheus.replies`) bounds it as it bounds the raw view: in
one query, a fleet of a thousand replicas would have most signals' replicas cut for the
first few's. A view is read this way only when:

- its name is among the server's metric names, and the catalog resolves the signal on this
  server (kube-state-metrics' Endpoints addresses aside, which the rules do not record per
  fleet);
- the recorded series match the view's own scope (the same matchers: a recorded series
  lacks the labels a fleet's GPU or pod matchers name, and so is not read for a fleet
  scoped that way) and carry the labels the view groups by;
- they cover the window: a sample at its first and at its last step (a rule added an hour
  ago, or one no longer evaluated, is stale for a two-hour window);
- the fleet view holds one series per group (with more, several recorded fleets answered:
  an unscoped diagnosis of a Prometheus with many fleets);
- the series cap cut nothing from its answer (the raw read then says what it cut).

Anything else counts as absent and that view is read from the raw catalog. Only the labels
the view groups by are kept (the fleet labels dropped), so the views read as the raw ones.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import replace

from signals.plan import ViewPlan
from signals.prometheus import QueryResult, SeriesData
from signals.views import RenderedView

RECORD_PREFIX = "triage:"
REPLICA_SUFFIX = ":replica"
UNRECORDED_EXPORTERS = frozenset({"kube_endpoint"})


def record_name(signal: str, view: str) -> str:
    """The recorded series of a signal's view: `triage:<signal>` or `triage:<signal>:replica`."""
    return RECORD_PREFIX + signal + (REPLICA_SUFFIX if view == "replica" else "")


def recorded_plans(
    views: Mapping[str, RenderedView], names: set[str], keys: Collection[str]
) -> dict[str, ViewPlan]:
    """`signal/view` -> the plan reading its recorded series, for every rendered view of `keys`
    (the round's plan) that has one."""
    wanted: dict[tuple[str, str, str], list[tuple[str, str, tuple[str, ...]]]] = {}
    for key, view in views.items():
        name = record_name(view.signal, view.view)
        if key not in keys or view.spec.exporter in UNRECORDED_EXPORTERS or name not in names:
            continue
        label = view.scope.replica_label if view.view == "replica" else ""
        # Per replica, a view of its own (a batch of them would share one series cap).
        batch_of = name if label else ""
        wanted.setdefault((view.selector, label, batch_of), []).append((key, name, view.grouping))
    out: dict[str, ViewPlan] = {}
    for (selector, label, _), members in wanted.items():
        pattern = "|".join(re.escape(name) for _, name, _ in members)
        matchers = ",".join(m for m in (f'__name__=~"{pattern}"', selector.strip("{}")) if m)
        batch = "{" + matchers + "}"
        for key, name, labels in members:
            out[key] = ViewPlan(key, name + selector, (batch,), replica_label=label, grouping=labels)
    return out


def usable(plan: ViewPlan, result: QueryResult, first: float, last: float) -> QueryResult | None:
    """The recorded answer of one view (out of its batch) reduced to the labels the view groups
    by, or None when it counts as absent (a failed or capped answer among them)."""
    if result.error is not None or result.capped:
        return None
    name = _name(plan)
    kept: dict[tuple[str, ...], SeriesData] = {}
    for labels, times, values in result.series:
        if labels.get("__name__") != name or not len(times):
            continue
        if any(label not in labels for label in plan.grouping):
            return None
        group = tuple(labels[label] for label in plan.grouping)
        if group in kept:
            if not plan.replica_label:
                return None  # one fleet view answered by several recorded fleets
            continue
        kept[group] = (dict(zip(plan.grouping, group, strict=True)), times, values)
    if not kept:
        return None
    if min(t[0] for _, t, _ in kept.values()) > first or max(t[-1] for _, t, _ in kept.values()) < last:
        return None
    return QueryResult(plan.query, list(kept.values()), result.warnings, None, 0, None, result.infos)


def read_recorded(
    plans: Mapping[str, ViewPlan], answers: Mapping[str, QueryResult], first: float, last: float
) -> dict[str, QueryResult]:
    """`signal/view` -> its recorded answer, for the views of `plans` whose recorded series are
    usable; each batch's series split by metric name once, not once per view."""
    split: dict[str, dict[str, QueryResult]] = {}
    for query in {plan.reads[0] for plan in plans.values()}:
        result = answers[query]
        by_name: dict[str, list[SeriesData]] = {}
        for series in result.series:
            by_name.setdefault(series[0].get("__name__", ""), []).append(series)
        # A view none of whose series came back reads an empty answer (with the batch's error).
        split[query] = {"": replace(result, series=[])}
        split[query].update({name: replace(result, series=members) for name, members in by_name.items()})
    out: dict[str, QueryResult] = {}
    for key, plan in plans.items():
        own = split[plan.reads[0]]
        found = usable(plan, own.get(_name(plan), own[""]), first, last)
        if found is not None:
            out[key] = found
    return out


def _name(plan: ViewPlan) -> str:
    return plan.query.split("{", 1)[0]
