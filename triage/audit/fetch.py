"""The IO of `triage audit`: one bounded read of everything the checklist audit looks at.

Four rounds, each concurrent and under the source's deadline (`--timeout`):

1. the metric names (which exporters and engine flavours exist);
2. `GET /api/v1/rules` and `GET /api/v1/targets`;
3. the instant queries `triage.audit.queries.instant_queries` asks for (the full label set of
   `vllm:cache_config_info`, request-length histograms over the window, GPU nodes, DCGM
   series);
4. the catalog's range queries for the `SignalFrame`.

Nothing here raises for a Prometheus that answers badly: each read that fails becomes a
one-line reason in `Fetched.problems`, and the items that needed it come out `unknown`
with that reason. When the metric names fail because the server cannot be reached (or
refuses us), the rest is not tried: it would fail the same way, after another deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from signals.catalog import Catalog, QueryOptions, Scope, resolve
from signals.errors import SignalError
from signals.frame import SignalFrame
from signals.live import build_queries, engine_names, frame_from_round, query_scopes
from signals.prometheus import ApiReply, PrometheusError, PrometheusSource, QueryResult
from signals.views import render_views
from triage.audit.engine import audit
from triage.audit.model import AuditReport, AuditSettings, Fetched, Sample
from triage.audit.queries import instant_queries

_NOT_WORTH_RETRYING = frozenset({"unreachable", "tls", "auth", "timeout"})
"""Kinds of failure of the first read after which every other read would fail the same way."""


def run_audit(
    source: PrometheusSource,
    catalog: Catalog,
    options: QueryOptions,
    at: float,
    settings: AuditSettings | None = None,
) -> AuditReport:
    """Fetch (within the source's deadline, twice) and audit every checklist item at `at`."""
    settings = settings or AuditSettings()
    return audit(fetch_audit_inputs(source, catalog, options, at, settings), catalog, options, settings)


def fetch_audit_inputs(
    source: PrometheusSource,
    catalog: Catalog,
    options: QueryOptions,
    at: float,
    settings: AuditSettings,
) -> Fetched:
    """Everything `triage.audit.engine.audit` reads; failures become `problems`, never exceptions."""
    problems: dict[str, str] = {}
    names: frozenset[str] | None
    try:
        names = frozenset(source.metric_names())
    except PrometheusError as exc:
        problems["metric_names"] = str(exc)
        if exc.kind in _NOT_WORTH_RETRYING:
            for key in ("rules", "targets", "signals"):
                problems[key] = f"not tried: {exc}"
            return Fetched(source.url, at, None, None, None, None, {}, problems, settings.lookback)
        names = None

    replies = source.api_lists(
        {
            "rules": ("/api/v1/rules", {}, "groups"),
            "targets": ("/api/v1/targets", {"state": "active"}, "activeTargets"),
        }
    )
    queries = instant_queries(names or frozenset(), options, settings.lookback)
    answers = source.instant_queries(queries, at) if queries else {}
    start = at - settings.lookback
    resolutions = {}
    if names is not None:
        try:
            own = engine_names(source, options, start, at)
        except PrometheusError as exc:
            problems["metric_names"] = f"the fleet's own metric names could not be read: {exc}"
            own = None
        resolutions = resolve(catalog, set(names), options.engine, options.orchestrator, options, own)
    views = render_views(resolutions, options)
    ranges = build_queries(views)
    results = source.range_queries(ranges, start, at, settings.step) if ranges else {}

    rules = _object(replies["rules"], "rules", problems)
    targets = _object(replies["targets"], "targets", problems)
    instant: dict[str, list[Sample]] = {}
    for key in queries:
        result = answers[key]
        if result.error is not None:
            problems[f"instant:{key}"] = result.error
            continue
        instant[key] = [
            Sample(labels, float(values[-1])) for labels, _, values in result.series if len(values)
        ]
    frame = None
    if names is None:
        problems["signals"] = "not tried: the metric names are needed to choose the queries"
    elif not ranges:
        problems["signals"] = f"none of the catalog's metrics exist there ({len(names)} metric names)"
    else:
        scopes = query_scopes(views)
        frame = _frame(results, source.url, options, start, at, settings, problems, scopes)
    return Fetched(source.url, at, names, rules, targets, frame, instant, problems, settings.lookback)


def _frame(
    results: Mapping[str, QueryResult],
    server: str,
    options: QueryOptions,
    start: float,
    at: float,
    settings: AuditSettings,
    problems: dict[str, str],
    scopes: Mapping[str, Scope],
) -> SignalFrame | None:
    """The frame of the range results (as a live diagnosis builds it), or None with the reason."""
    try:
        frame, signal_problems = frame_from_round(
            dict(results), start, at, settings.step, options, server, scopes
        )
    except SignalError as exc:
        problems["signals"] = str(exc)
        return None
    for signal, reasons in sorted(signal_problems.items()):
        problems[f"signal:{signal}"] = "; ".join(reasons)
    return frame


def _object(reply: ApiReply, key: str, problems: dict[str, str]) -> Mapping[str, Any] | None:
    if reply.error is not None:
        problems[key] = reply.error
    return reply.data


__all__ = ["fetch_audit_inputs", "run_audit"]
