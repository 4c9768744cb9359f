"""The plan of one fetch round: the fewest queries that answer every signal view, and the math
that turns their answers into each view's series.

A diagnosis needs, per signal, a per-replica view and a fleet view. Asked as written,
every histogram family is evaluated four times (P50 and P99, per replica and for the fleet)
and every fleet sum twice. A shaped source (`signals.catalog.SourceSpec.shape`) says how its
views are made, so the plan asks Prometheus once per underlying sum and computes the rest
here:

- a histogram family: ONE query of its bucket rates, sent as they are (Prometheus would
  spend as much again grouping them `by (le, <replica>)` as computing them; the grouping is
  done here); every quantile of every view is `signals.quantile.bucket_quantile` of those
  buckets, the fleet's of the buckets merged over replicas. A family nobody reads per
  replica is asked for the fleet alone, `sum by (le)`;
- a sum: `sum by (<replica>)`; the fleet's is the sum of the replicas';
- a ratio: the numerator's and the denominator's `sum by (<replica>)`, shared with any other
  signal that sums the same thing (vLLM's request counter is the denominator of three);
- a source written out as PromQL whose fleet view aggregates its replica view (`avg(R)`,
  `max(X)` beside `max by (instance, gpu) (X)`, `signals.across`): the replica view's
  query, aggregated here.

The plan reads the views as `signals.views.render_views` filled them in (every text it
sends comes from there), and fills in no template itself.

Merging keeps the series that lack the replica label (Prometheus groups them under an empty
value), so a fleet view computed here sums exactly what `sum(...)` would. A source written out
as PromQL is otherwise sent as it is. Each view's answer keeps the PromQL it stands for, so
the report and the errors read as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from signals.across import aggregate, aggregation_of
from signals.prometheus import QueryResult, SeriesData
from signals.quantile import bucket_quantile, parse_le
from signals.views import RenderedView

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ViewPlan:
    """How one `signal/view` is answered: the queries it reads and the computation over them."""

    key: str
    query: str
    """The PromQL the view stands for (the catalog's, as rendered): shown in reports and errors."""
    reads: tuple[str, ...]
    """The queries sent for it (a shaped view's underlying sums; else its own query)."""
    shape: str | None = None
    replica_label: str = ""
    quantile: float | None = None
    round_to: float | None = None
    merge: bool = False
    """Fleet view computed from per-replica answers (merged over the replica label)."""
    grouping: tuple[str, ...] = ()
    """The labels a recorded view's series are kept with (`signals.recorded`)."""
    across: str = ""
    """A fleet view computed as this aggregation (`sum`, `max`, ...) of its replica view's
    series at each step (`signals.across`); its one read is the replica view's query."""


@dataclass(frozen=True)
class Plan:
    views: dict[str, ViewPlan] = field(default_factory=dict)

    @property
    def queries(self) -> list[str]:
        """The distinct queries the round sends, in a stable order."""
        return list(dict.fromkeys(q for v in self.views.values() for q in v.reads))

    def readers(self) -> dict[str, list[ViewPlan]]:
        """Query -> the views that read it, in the plan's order."""
        out: dict[str, list[ViewPlan]] = {}
        for view in self.views.values():
            for query in view.reads:
                out.setdefault(query, []).append(view)
        return out


def view_plan(view: RenderedView, per_replica: bool | None = None) -> ViewPlan:
    """The plan of one rendered view.

    `per_replica` False plans a shaped fleet view from the fleet's own sums even where the
    source has a per-replica view (a histogram whose per-replica quantiles nobody reads:
    its buckets summed by `le` alone are a few series, by replica hundreds).
    """
    key, query, spec = view.key, view.query, view.spec
    shape = spec.shape
    if shape is None:
        if view.replica_query is not None:
            op = aggregation_of(query, view.replica_query)
            if op is not None:
                return ViewPlan(key, query, (view.replica_query,), across=op)
        return ViewPlan(key, query, (query,))
    if per_replica is None or spec.replica is None:
        per_replica = spec.replica is not None
    # Per replica, a histogram's bucket rates are sent as they are and summed by (le, replica)
    # here: Prometheus would spend as much again on that grouping as on the rates.
    reads = view.shaped_reads[per_replica]
    if shape == "sum" and view.view == "replica":
        # The per-replica sum IS the query sent: answered as it is.
        return ViewPlan(key, query, reads)
    return ViewPlan(
        key,
        query,
        reads,
        shape=shape,
        replica_label=view.scope.replica_label if per_replica else "",
        quantile=spec.quantile,
        round_to=spec.round_to,
        merge=view.view == "fleet" and per_replica,
    )


def plan_round(views: Mapping[str, RenderedView], replica_histograms: Collection[str] | None = None) -> Plan:
    """Every rendered view of every signal (`signals.views.render_views`), planned.

    `replica_histograms`, when given, names the histogram signals whose per-replica views
    are wanted; the others are planned for the fleet alone (their per-replica buckets are
    most of what Prometheus would otherwise encode). None: every view.
    """
    per_replica_families = {
        view.histogram
        for view in views.values()
        if view.view == "replica" and view.histogram is not None
        if replica_histograms is None or view.signal in replica_histograms
    }
    planned: dict[str, ViewPlan] = {}
    for key, view in views.items():
        # A family fetched per replica for one signal serves all its quantiles at no cost.
        wanted = view.histogram is None or view.histogram in per_replica_families
        if view.view == "replica" and not wanted:
            continue
        planned[key] = view_plan(view, per_replica=None if wanted else False)
    return Plan(planned)


# ------------------------------------------------------------------ computing the views


def round_grid(start: float, at: float, step: float) -> Array:
    """The steps of a range query over [start, at]: where Prometheus puts its points."""
    return start + step * np.arange(round((at - start) / step) + 1, dtype=np.float64)


def _steps(times: Array, grid: Array, step: float) -> tuple[npt.NDArray[np.int64], Mask]:
    """Each sample's step on the round's grid, and which samples fall on it."""
    index = np.rint((np.asarray(times, dtype=np.float64) - grid[0]) / step).astype(np.int64)
    return index, (index >= 0) & (index < len(grid))


def place(times: Array, values: Array, grid: Array, step: float) -> Array:
    """Samples on the round's grid (NaN where a step has none); samples off the grid dropped."""
    out = np.full(len(grid), np.nan)
    if len(times) == 0:
        return out
    index, keep = _steps(times, grid, step)
    out[index[keep]] = np.asarray(values, dtype=np.float64)[keep]
    return out


def _across(op: str, result: QueryResult, grid: Array, step: float) -> list[SeriesData]:
    """The fleet view as the aggregation `op` of the replica view's series: a sample whose value
    is NaN is still a sample here (PromQL's `sum` of it is NaN), unlike on the frame's rows."""
    if not result.series:
        return []
    values = np.full((len(result.series), len(grid)), np.nan)
    present = np.zeros(values.shape, dtype=np.bool_)
    for row, (_, times, samples) in enumerate(result.series):
        index, keep = _steps(times, grid, step)
        values[row, index[keep]] = np.asarray(samples, dtype=np.float64)[keep]
        present[row, index[keep]] = True
    out, some = aggregate(op, values, present)
    return [_sparse({}, out, grid, some)] if some.any() else []


Rows = list[tuple[dict[str, str], Array]]


def _sparse(labels: Mapping[str, str], row: Array, grid: Array, present: Mask) -> SeriesData:
    """A computed row as a series; one with a value at every step keeps the grid as its times
    and the row itself (both made for this round), so a thousand replicas' views copy nothing."""
    if present.all():
        return dict(labels), grid, row
    return dict(labels), grid[present], row[present]


def on_grid(times: Array, values: Array, grid: Array, step: float) -> Array:
    """`place`, without a copy when the series already holds a sample at every step of the
    grid (most do): the values are then the row. Only for readers that never write to it."""
    if len(times) == len(grid) and len(grid) and times[0] == grid[0] and times[-1] == grid[-1]:
        return np.asarray(values, dtype=np.float64)
    return place(times, values, grid, step)


def _total(rows: Sequence[Array]) -> Array:
    """Sum of the present values per step; NaN (no sample) where no row has one."""
    stack = np.vstack(rows)
    present = ~np.isnan(stack)
    total: Array = np.where(present, stack, 0.0).sum(axis=0)
    total[~present.any(axis=0)] = np.nan
    return total


def _groups(rows: Rows, label: str) -> dict[str, Rows]:
    """Rows by the value of the replica label ("" where a series lacks it, as Prometheus groups)."""
    out: dict[str, Rows] = {}
    for labels, row in rows:
        out.setdefault(labels.get(label, ""), []).append((labels, row))
    return out


def _buckets(rows: Rows, round_to: float | None) -> tuple[Array, Array] | None:
    """One group's bucket rows summed by `le` (rounded as PromQL's `round(v, to)` does, when
    the source asks): the upper bounds and a buckets × steps matrix, NaN where absent."""
    by_le: dict[str, list[Array]] = {}
    for labels, row in rows:
        by_le.setdefault(labels.get("le", ""), []).append(row)
    uppers, counts = [], []
    for le, members in by_le.items():
        upper = parse_le(le)
        if upper is None:
            continue
        total = _total(members)
        if round_to is not None:
            total = np.floor(total * (1 / round_to) + 0.5) / (1 / round_to)
        uppers.append(upper)
        counts.append(total)
    if not uppers:
        return None
    return np.asarray(uppers, dtype=np.float64), np.vstack(counts)


class _Arrays:
    """What the views of one round share: each answer's rows on the grid, and each histogram
    family's buckets per group, made once however many quantiles and views read them."""

    def __init__(
        self, answers: Mapping[str, QueryResult], grid: Array, step: float, digested: Collection[str] = ()
    ) -> None:
        self.answers, self.grid, self.step = answers, grid, step
        self.digested = frozenset(digested)
        self._rows: dict[str, Rows] = {}
        self._buckets: dict[tuple[str, str, bool, float | None], dict[str, tuple[Array, Array]]] = {}

    def rows(self, query: str) -> Rows:
        if query not in self._rows:
            self._rows[query] = [
                (
                    {k: v for k, v in labels.items() if k != "__name__"} if "__name__" in labels else labels,
                    on_grid(times, values, self.grid, self.step),
                )
                for labels, times, values in self.answers[query].series
            ]
        return self._rows[query]

    def forget(self, query: str) -> None:
        """Let go of what was made from one query's answer (no view reads it any more)."""
        self._rows.pop(query, None)
        for key in [key for key in self._buckets if key[0] == query]:
            del self._buckets[key]

    def buckets(self, plan: ViewPlan) -> dict[str, tuple[Array, Array]]:
        """Group name ("" for the merged fleet) -> its summed buckets."""
        key = (plan.reads[0], plan.replica_label, plan.merge, plan.round_to)
        if key not in self._buckets:
            groups = _bucket_groups(self.rows(plan.reads[0]), plan)
            found = {name: _buckets(members, plan.round_to) for name, members in groups.items()}
            self._buckets[key] = {name: b for name, b in found.items() if b is not None}
        return self._buckets[key]


def _bucket_groups(rows: Rows, plan: ViewPlan) -> dict[str, Rows]:
    """A histogram view's bucket rows by group: per replica, or all of them for the merged fleet."""
    label = plan.replica_label
    return _groups(rows, label) if label and not plan.merge else {"": rows} if rows else {}


def _quantile(plan: ViewPlan, name: str, uppers: Array, counts: Array, grid: Array) -> SeriesData | None:
    """A histogram view's series for one group's summed buckets; None where no step has a count."""
    assert plan.quantile is not None
    present: Mask = np.any(~np.isnan(counts), axis=0)
    if not present.any():
        return None
    labels = {plan.replica_label: name} if name and not plan.merge else {}
    return _sparse(labels, bucket_quantile(plan.quantile, uppers, counts), grid, present)


def _compute(plan: ViewPlan, arrays: _Arrays) -> QueryResult:
    """The view's answer from the answers to the queries it reads, as Prometheus would give it."""
    read = [arrays.answers[q] for q in plan.reads]
    warnings = list(dict.fromkeys(w for r in read for w in r.warnings))
    failed = next((r for r in read if r.error is not None), None)
    if failed is not None:
        return QueryResult(plan.query, [], warnings, failed.error, 0, failed.error_kind)
    if plan.across:
        series = _across(plan.across, read[0], arrays.grid, arrays.step)
        return QueryResult(plan.query, series, warnings, None, 0, None, read[0].infos)
    if plan.shape is None:
        only = read[0]
        return QueryResult(plan.query, only.series, warnings, None, 0, None, only.infos)
    label, grid = plan.replica_label, arrays.grid
    out: list[SeriesData] = []
    if plan.reads[0] in arrays.digested:
        out = [
            ({k: v for k, v in labels.items() if k != DIGESTED}, times, values)
            for labels, times, values in read[0].series
            if labels.get(DIGESTED) == plan.key
        ]
    elif plan.shape == "histogram":
        for name, (uppers, counts) in arrays.buckets(plan).items():
            if (one := _quantile(plan, name, uppers, counts, grid)) is not None:
                out.append(one)
    elif plan.shape == "sum":
        rows = arrays.rows(plan.reads[0])
        if rows:
            values = _total([r for _, r in rows])
            present = ~np.isnan(values)
            if present.any():
                out.append(_sparse({}, values, grid, present))
    else:
        numerators, denominators = arrays.rows(plan.reads[0]), arrays.rows(plan.reads[1])
        pairs: list[tuple[dict[str, str], Array, Array]] = []
        if plan.merge or not label:
            if numerators and denominators:
                pairs.append(({}, _total([r for _, r in numerators]), _total([r for _, r in denominators])))
        else:
            by_n = {labels.get(label, ""): row for labels, row in numerators}
            pairs = [
                ({label: name} if name else {}, by_n[name], row)
                for labels, row in denominators
                if (name := labels.get(label, "")) in by_n
            ]
        for labels, n_row, d_row in pairs:
            with np.errstate(divide="ignore", invalid="ignore"):
                values = n_row / d_row
            present = ~np.isnan(n_row) & ~np.isnan(d_row) & (d_row > 0)
            if present.any():
                out.append(_sparse(labels, values, grid, present))
    return QueryResult(plan.query, out, warnings, None, 0, None)


def unshared(plan: Plan, answers: Mapping[str, QueryResult]) -> Plan:
    """The plan with each fleet view computed from a replica answer that failed, or that the
    series cap cut, asking its own query instead: the fleet's one series may still be read where
    the replicas' could not, and aggregated from part of the replicas it would read as the
    whole fleet."""

    def lacking(result: QueryResult | None) -> bool:
        return result is not None and (result.error is not None or result.capped)

    return Plan(
        {
            key: replace(view, reads=(view.query,), across="")
            if view.across and lacking(answers.get(view.reads[0]))
            else view
            for key, view in plan.views.items()
        }
    )


DIGESTED = "__view__"
"""The label each series of a digested answer carries: the key of the view it is."""


def digests(
    plan: Plan, grid: Array, step: float
) -> dict[str, Callable[[list[SeriesData]], list[SeriesData]]]:
    """Query -> its views computed from its series, for every query that only histogram
    views read: given to `PrometheusSource.range_queries(digest=...)`, it runs as the answer
    arrives, so a round holds a family's buckets (for a thousand replicas, some 20,000
    series) only until they are its quantiles. Each series is labelled with its view's
    key (`DIGESTED`), which `answer` reads back.

    Every view of `plan` that reads the query is computed, so a view that falls back to it
    later (a recorded view found stale) finds its series there. The computation is
    `answer`'s own, on that one answer, so the views are the same to the last bit.
    """
    return {
        query: _digest(query, tuple(views), grid, step)
        for query, views in plan.readers().items()
        if all(view.shape == "histogram" for view in views)
    }


def _digest(
    query: str, views: tuple[ViewPlan, ...], grid: Array, step: float
) -> Callable[[list[SeriesData]], list[SeriesData]]:
    # the views that sum the buckets alike share each group's sums, made one group at a time
    alike: dict[tuple[str, bool, float | None], list[ViewPlan]] = {}
    for view in views:
        alike.setdefault((view.replica_label, view.merge, view.round_to), []).append(view)

    def digest(series: list[SeriesData]) -> list[SeriesData]:
        rows = _Arrays({query: QueryResult(query, series)}, grid, step).rows(query)
        out: list[SeriesData] = []
        for members in alike.values():
            for name, group in _bucket_groups(rows, members[0]).items():
                found = _buckets(group, members[0].round_to)
                if found is None:
                    continue
                for view in members:
                    if (one := _quantile(view, name, found[0], found[1], grid)) is not None:
                        out.append(({**one[0], DIGESTED: view.key}, one[1], one[2]))
        return out

    return digest


def answer(
    plan: Plan,
    answers: Mapping[str, QueryResult],
    grid: Array,
    step: float,
    digested: Collection[str] = (),
) -> dict[str, QueryResult]:
    """Every view of the plan, from the answers to `plan.queries`; the answers to the
    queries named in `digested` already hold their views (`digests`).

    What the views of one query share (its rows on the grid, a histogram's buckets) is let
    go once the last view reading that query is computed, so a round holds one family's
    buckets at a time beside its answers, not all of them.
    """
    arrays = _Arrays(answers, grid, step, digested)
    left = {query: len(views) for query, views in plan.readers().items()}
    out: dict[str, QueryResult] = {}
    # the views of one query one after the other, so what they share is made and let go once
    for key, view in sorted(plan.views.items(), key=lambda item: item[1].reads):
        out[key] = _compute(view, arrays)
        for query in view.reads:
            left[query] -= 1
            if not left[query]:
                arrays.forget(query)
    return {key: out[key] for key in plan.views}
