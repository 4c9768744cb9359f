"""The `triage:*` series that `triage rules` records, read before the raw catalog.

A Prometheus that evaluates the rules of `triage rules` already holds every shaped signal
(`signals.catalog.SourceSpec.shape`: histogram quantiles, sums, ratios of sums) as
`triage:<signal>` (the fleet's view) and `triage:<signal>:replica` (per replica, beside
the fleet labels). Reading those costs Prometheus a lookup instead of a rate over every
bucket. A view is read this way only when:

- its name is among the server's metric names;
- the catalog resolves the signal to a shaped source of the engines or the edge (their
  views group by the replica label alone, and they carry the fleet labels, so the
  recorded series can be scoped by the same matchers as the raw ones);
- what comes back covers the window: a sample at its first and at its last step (a rule
  added an hour ago, or one no longer evaluated, is stale for a two-hour window), and, for
  the fleet view, exactly one series (with several, the recorded fleets are not the one
  being diagnosed, e.g. an unscoped diagnosis of a Prometheus with many fleets).

Anything else counts as absent and that view is read from the raw catalog. The fleet
labels a recorded series carries are dropped, so the views read as the raw ones do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from signals.catalog import QueryOptions, Resolution, render
from signals.plan import ViewPlan
from signals.prometheus import QueryResult

RECORD_PREFIX = "triage:"
REPLICA_SUFFIX = ":replica"
READ_EXPORTERS = frozenset({"engine", "gateway"})


def record_name(signal: str, view: str) -> str:
    """The recorded series of a signal's view: `triage:<signal>` or `triage:<signal>:replica`."""
    return RECORD_PREFIX + signal + (REPLICA_SUFFIX if view == "replica" else "")


def recorded_plans(
    resolutions: Mapping[str, Resolution], options: QueryOptions, names: set[str]
) -> dict[str, ViewPlan]:
    """`signal/view` -> the plan reading its recorded series, for every view that has one.

    The views of one kind (replica or fleet) and one scope are read by ONE query, a regular
    expression on the metric name, and told apart by it.
    """
    wanted: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for signal, res in resolutions.items():
        for view, spec in (("replica", res.replica), ("fleet", res.fleet)):
            name = record_name(signal, view)
            if spec is None or spec.shape is None or spec.exporter not in READ_EXPORTERS or name not in names:
                continue
            label = options.scope(spec.exporter).replica_label if view == "replica" else ""
            selector = render("{$sel}", options, spec.exporter)
            wanted.setdefault((selector, label), []).append((signal, view, name))
    out: dict[str, ViewPlan] = {}
    for (selector, label), members in wanted.items():
        pattern = "|".join(re.escape(name) for _, _, name in members)
        matchers = ",".join(m for m in (f'__name__=~"{pattern}"', selector.strip("{}")) if m)
        batch = "{" + matchers + "}"
        for signal, view, name in members:
            key = f"{signal}/{view}"
            out[key] = ViewPlan(key, name + selector, (batch,), replica_label=label)
    return out


def usable(plan: ViewPlan, result: QueryResult, first: float, last: float) -> QueryResult | None:
    """The recorded answer of one view (out of its batch) reduced to the raw view's labels, or
    None when it counts as absent."""
    if result.error is not None:
        return None
    name = plan.query.split("{", 1)[0]
    label = plan.replica_label
    kept = []
    for labels, times, values in result.series:
        if labels.get("__name__") != name or not len(times):
            continue
        if label:
            if label not in labels:
                continue
            kept.append(({label: labels[label]}, times, values))
        else:
            kept.append(({}, times, values))
    if not kept or (not label and len(kept) > 1):
        return None
    if min(t[0] for _, t, _ in kept) > first or max(t[-1] for _, t, _ in kept) < last:
        return None
    return QueryResult(plan.query, kept, result.warnings, None, 0, None, result.infos)
