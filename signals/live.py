"""A SignalFrame from a live Prometheus: resolve the catalog, fetch every signal in one round.

One request asks which metric names exist; the catalog then resolves each signal to a
source per view and each view is rendered once (`signals.views.render_views`); the plan
(`signals.plan`) and the recorded series (`signals.recorded`) work from those renderings
alone; every query of the round runs concurrently as a range query over the baseline and
incident windows, within one deadline. A signal whose query fails is left
out of the frame (so the diagnosis lists it as missing, never as zero) and its one-line
reason is kept in the report.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from signals.catalog import Catalog, QueryOptions, Resolution, Scope, resolve
from signals.dcgm import is_blank
from signals.errors import SignalError
from signals.frame import Series, SignalFrame, labels_of
from signals.gcpause import collection_paused
from signals.plan import Plan, answer, digests, on_grid, plan_round, round_grid, unshared
from signals.prometheus import PrometheusSource, QueryResult
from signals.recorded import read_recorded, recorded_plans
from signals.timeparse import format_instant
from signals.views import RenderedView, render_views
from signals.vocabulary import REPLICA_LABEL, SIGNALS


@dataclass(frozen=True)
class SignalStatus:
    """What became of one signal in a fetch: its sources, or why it is missing."""

    signal: str
    replica_source: str | None
    fleet_source: str | None
    series: int = 0
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    deprecated_in_use: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()
    """The views read from the series `triage rules` records (`signals.recorded`)."""

    @property
    def blind(self) -> bool:
        return self.replica_source is None and self.fleet_source is None


RECORDING_PAYS_REPLICAS = 100
"""From this many replicas, a read of raw series is worth recording with `triage rules`.
Measured (docs/benchmarks.md, `bench/live.py`): at 200 replicas a raw read costs Prometheus
1.33× a refresh of vLLM's dashboard and takes 3.7 s, the recorded read 0.09× and 0.8 s; at
1,000 replicas 21 s against 3.2 s. At 32 replicas both are under a second."""


@dataclass(frozen=True)
class FetchReport:
    """Everything a fetch round learned, for the CLI, the diagnosis notes and the benchmark."""

    server: str
    statuses: dict[str, SignalStatus]
    queries: dict[str, str] = field(default_factory=dict)
    """`signal/view` -> the PromQL the view stands for (a recorded series' name where one was read)."""
    http_requests: int = 0
    sent: int = 0
    """Distinct queries sent (a histogram family's bucket rates serve all its quantiles and views)."""
    replicas: int = 0
    """The replicas the frame holds a series of."""

    @property
    def recorded_views(self) -> int:
        """How many views were read from the series `triage rules` records."""
        return sum(len(s.recorded) for s in self.statuses.values())

    def recording_would_pay(self) -> bool:
        """A fleet this large read from raw series alone: `triage rules` would make it far
        cheaper (`RECORDING_PAYS_REPLICAS`). Said by the front ends, never acted on."""
        return self.replicas >= RECORDING_PAYS_REPLICAS and not self.recorded_views

    def problems(self) -> dict[str, str]:
        """Signal -> one-line reason, for signals that could not be read or came back partial."""
        out = {}
        for s in self.statuses.values():
            reasons = [*s.problems, *(f"partial data: {w}" for w in s.warnings)]
            if reasons:
                out[s.signal] = "; ".join(reasons)
        return out


def build_queries(views: Mapping[str, RenderedView]) -> dict[str, str]:
    """`signal/replica` and `signal/fleet` -> PromQL, for every rendered view."""
    return {key: view.query for key, view in views.items()}


def engine_names(
    prometheus: PrometheusSource, options: QueryOptions, start: float | None = None, end: float | None = None
) -> set[str] | None:
    """The metric names the engine series of the fleet `options` is scoped to carry (None when
    unscoped): resolved against the server's whole list, a fleet would get the sources of a
    newer release running beside it, and then nothing to read."""
    return engine_names_of(prometheus, [options], start, end)[0]


def engine_names_of(
    prometheus: PrometheusSource,
    scopes: Sequence[QueryOptions],
    start: float | None = None,
    end: float | None = None,
) -> list[set[str] | None]:
    """`engine_names` of each scope, in order, read in one round of the source."""
    selectors = {
        str(i): f"{{{options.scope('engine').selector}}}"
        for i, options in enumerate(scopes)
        if options.scopes.get("engine")
    }
    found = prometheus.metric_names_matching(selectors, start, end) if selectors else {}
    return [found.get(str(i)) for i in range(len(scopes))]


def resolve_scoped(
    catalog: Catalog,
    prometheus: PrometheusSource,
    options: QueryOptions,
    start: float | None = None,
    end: float | None = None,
) -> tuple[set[str], dict[str, Resolution]]:
    """The server's metric names, and the catalog resolved for the scope `options` names (its
    engine sources against the fleet's own names, `engine_names`)."""
    names = prometheus.metric_names(start=start, end=end)
    own = engine_names(prometheus, options, start, end)
    return names, resolve(catalog, names, options.engine, options.orchestrator, options, own)


def stand_ins(resolutions: Mapping[str, Resolution]) -> dict[str, str]:
    """Signal -> what its chosen source really measures, for the sources that stand in for it."""
    out: dict[str, str] = {}
    for name, res in resolutions.items():
        said = [s.stands_in for s in (res.replica, res.fleet) if s is not None and s.stands_in]
        if said:
            out[name] = "; ".join(dict.fromkeys(said))
    return out


def query_scopes(views: Mapping[str, RenderedView]) -> dict[str, Scope]:
    """`signal/view` -> the scope its query was rendered with (its replica label, its renames,
    the exporter whose series it reads)."""
    return {key: view.scope for key, view in views.items()}


def frame_from_results(
    results: dict[str, QueryResult],
    grid: np.ndarray,
    step: float,
    replica_label: str,
    source: str,
    scopes: Mapping[str, Scope] | None = None,
) -> tuple[SignalFrame, dict[str, list[str]]]:
    """Series on the grid, the replica label renamed to `instance`; problems per signal.

    `scopes` gives a query its own replica label and renames (an exporter scoped to a
    fleet); a query without one reads `replica_label`. In a DCGM signal's answer, a value
    that can only be one of DCGM's blanks (`signals.dcgm`) is no sample: the catalog filters
    them in PromQL, this catches a source that does not.
    """
    series: list[Series] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    problems: dict[str, list[str]] = {}
    for key in sorted(results):
        signal, view = key.rsplit("/", 1)
        result = results[key]
        if result.error:
            problems.setdefault(signal, []).append(f"{view}: {result.error}")
            continue
        scope = (scopes or {}).get(key)
        label = scope.replica_label if scope is not None else replica_label
        renames = scope.renames if scope is not None else {}
        for labels, times, values in result.series:
            labels = {k: v for k, v in labels.items() if k != "__name__"}
            if view == "replica":
                name = labels.pop(label, None)
                if name is None:
                    continue
                labels.pop(REPLICA_LABEL, None)
                labels[REPLICA_LABEL] = renames.get(name, name)
            else:
                labels.pop(REPLICA_LABEL, None)
                labels.pop(label, None)
            canonical = labels_of(labels)
            if (signal, canonical) in seen:
                continue
            placed = _placed(times, values, grid, step, scope is not None and scope.exporter == "gpu")
            if placed is None:
                continue
            seen.add((signal, canonical))
            series.append(Series(signal, canonical, placed))
    return SignalFrame(grid, series, source=source), problems


def _placed(
    times: np.ndarray, values: np.ndarray, grid: np.ndarray, step: float, gpu: bool
) -> np.ndarray | None:
    """A series' row on the grid, ±Inf and (for a DCGM signal) DCGM's blanks made NaN; None
    when only blanks remain. A series with a finite sample at every step is its own row, not
    copied (a thousand replicas' rows are tens of megabytes), so it must not be written to."""
    values = np.asarray(values, dtype=np.float64)
    row = on_grid(np.asarray(times, dtype=np.float64), values, grid, step)
    bad = ~np.isfinite(row)
    blanks = bool(gpu and (blank := is_blank(row)).any())
    if bad.any() or blanks:
        row = row.copy() if row is values else row
        row[bad] = np.nan
        if blanks:
            row[blank] = np.nan
            if not np.isfinite(row).any():
                return None
    return row


def frame_from_round(
    results: dict[str, QueryResult],
    start: float,
    at: float,
    step: float,
    options: QueryOptions,
    server: str,
    scopes: Mapping[str, Scope] | None = None,
) -> tuple[SignalFrame, dict[str, list[str]]]:
    """The frame of one round of range queries over [start, at]; SignalError when it holds nothing."""
    if all(r.error for r in results.values()):
        first = next(iter(results.values()))
        raise SignalError(f"{server}: no query could be answered ({first.error})")
    grid = round_grid(start, at, step)
    frame, problems = frame_from_results(results, grid, step, options.replica_label, server, scopes)
    if not frame.signals():
        scope = f" matching {{{options.selector}}}" if options.selector else ""
        raise SignalError(
            f"{server}: the queries answered, but no series{scope} holds a sample "
            f"between {format_instant(start)} and {format_instant(at)}"
        )
    return frame, problems


@collection_paused()
def fetch_frame(
    prometheus: PrometheusSource,
    catalog: Catalog,
    options: QueryOptions,
    at: float,
    lookback: float,
    step: float,
    replica_histograms: Collection[str] | None = None,
) -> tuple[SignalFrame, FetchReport]:
    """Fetch every resolvable signal over [at - lookback, at]; SignalError when nothing at all can be read.

    `replica_histograms` names the histogram signals wanted per replica (a diagnosis: those
    its checks read per replica, `triage.core.reads`); None fetches every view.

    The round sends the plan's queries (`signals.plan`), reading a view's recorded series
    instead where `triage rules` recorded it (`signals.recorded`); the views whose recorded
    series turn out absent or stale are read from the raw catalog in a second round. The
    cyclic garbage collector is paused throughout (`signals.gcpause`): the replies and the
    frame are millions of objects, none of them in a cycle. What the read freed is handed
    back to the system at its end (`signals.malloc.trim`), so a process that reads again and
    again (the service, the TUI) holds its frames, not the rounds that made them.
    """
    names, resolutions = resolve_scoped(catalog, prometheus, options, at - lookback, at)
    views = render_views(resolutions, options)
    plan = plan_round(views, replica_histograms)
    if not plan.views:
        raise SignalError(
            f"{prometheus.url}: none of the catalog's metrics exist there "
            f"({len(names)} metric names); check the URL and the selector"
        )
    start = at - lookback
    grid = round_grid(start, at, step)
    recorded = recorded_plans(views, names, plan.views)
    first = Plan({key: recorded.get(key, view) for key, view in plan.views.items()})
    digest = digests(plan, grid, step)
    answers = dict(prometheus.range_queries({q: q for q in first.queries}, start, at, step, digest))
    results = read_recorded(recorded, answers, grid[0], grid[-1])
    read_recorded_views = set(results)
    # Everything else raw, the recorded views found absent or stale with it, and the fleet
    # views whose replica answer failed or was capped on their own (a second round for those
    # of their queries the first did not send).
    raw = unshared(Plan({key: view for key, view in plan.views.items() if key not in results}), answers)
    missing = [q for q in raw.queries if q not in answers]
    if missing:
        answers.update(prometheus.range_queries({q: q for q in missing}, start, at, step, digest))
    results.update(answer(raw, answers, grid, step, digest))
    scopes = query_scopes(views)
    frame, problems = frame_from_round(results, start, at, step, options, prometheus.url, scopes)
    frame = replace(frame, stand_ins=stand_ins(resolutions))
    statuses: dict[str, SignalStatus] = {}
    for name in SIGNALS:
        res = resolutions[name]
        warnings = tuple(
            w
            for view in ("replica", "fleet")
            for w in (results[f"{name}/{view}"].warnings if f"{name}/{view}" in results else [])
        )
        statuses[name] = SignalStatus(
            signal=name,
            replica_source=res.replica.source if res.replica else None,
            fleet_source=res.fleet.source if res.fleet else None,
            series=len(frame.rows(name)),
            problems=tuple(problems.get(name, [])),
            warnings=warnings,
            deprecated_in_use=res.deprecated_in_use,
            recorded=tuple(v for v in ("replica", "fleet") if f"{name}/{v}" in read_recorded_views),
        )
    requests = 1 + sum(r.http_requests for r in answers.values())
    queries = {key: raw.views.get(key, view).query for key, view in first.views.items()}
    report = FetchReport(
        prometheus.url, statuses, queries, requests, len(answers), replicas=len(frame.replica_names())
    )
    del answers, results
    from signals.malloc import trim  # ctypes, loaded by the commands that read

    trim()
    return frame, report
