"""Where a live diagnosis's Prometheus CPU goes: each query of its round, alone; prints a table.

On the same data as `bench.live` (its raw vLLM V1 + DCGM + kube-state-metrics fleet of
`--replicas` replicas, backfilled into a temporary Prometheus; generated into bench/out on
first use), the round a live diagnosis sends (`signals.plan.plan_round`, the per-replica
histograms its checks read) is sent one query at a time over the diagnosis' window (2 h at
a 30 s step). Each query is run once to warm Prometheus's caches, then measured `--runs`
times (the median kept: a single run of one query moves by half its cost): the Prometheus
process's CPU seconds (utime + stime from /proc), the wall time, the series and points it
answers, and the views that read it (`signal/view`). Heaviest first, with the
total and the share of the per-replica reads (a view per replica, or a histogram's buckets
by replica).

The sum over queries alone is close to a whole round's cost (`bench.live`), which sends them
concurrently; it says which reads a cheaper round must change.
Run: python -m bench.live_queries [--replicas 200] [--top 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
from typing import cast

from bench.live import LOOKBACK, STEP, measure, openmetrics
from signals.catalog import QueryOptions, load_catalog
from signals.live import resolve_scoped
from signals.plan import Plan, plan_round
from signals.prometheus import PrometheusSource, QueryResult
from signals.tempprom import TemporaryPrometheus
from signals.views import render_views
from triage.core.reads import replica_reads
from triage.sources import load_graph

Measured = tuple[float, float, int, int, str, tuple[str, ...]]
"""(Prometheus CPU s, wall s, series, points, query, the views that read it)."""


def plan_of(source: PrometheusSource, at: float) -> Plan:
    """The round a live diagnosis would send at `at` over the benchmark's window."""
    options = QueryOptions()
    _, resolutions = resolve_scoped(load_catalog(), source, options, at - LOOKBACK, at)
    return plan_round(render_views(resolutions, options), replica_reads(load_graph().knowledge))


def measure_each(source: PrometheusSource, pid: int, plan: Plan, at: float, runs: int) -> list[Measured]:
    rows: list[Measured] = []
    for query in plan.queries:

        def ask(query: str = query) -> QueryResult:
            answer = source.range_queries({query: query}, at - LOOKBACK, at, STEP)[query]
            assert answer.error is None, f"{query}: {answer.error}"
            return answer

        ask()  # warm
        cpu, wall, last = measure(pid, runs, ask)
        answer = cast(QueryResult, last)
        points = sum(len(times) for _, times, _ in answer.series)
        views = tuple(key for key, view in plan.views.items() if query in view.reads)
        rows.append((cpu, wall, len(answer.series), points, query, views))
    return sorted(rows, key=lambda row: -row[0])


def per_replica(row: Measured) -> bool:
    """A read of every replica: it answers one series (or a histogram's buckets) per replica."""
    return any(view.endswith("/replica") for view in row[5])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=200, help="fleet size (default 200)")
    parser.add_argument("--top", type=int, default=20, help="queries listed, heaviest first (default 20)")
    parser.add_argument("--runs", type=int, default=3, help="measured runs of each query (default 3)")
    args = parser.parse_args()
    data, at, samples = openmetrics(args.replicas)
    with TemporaryPrometheus(data, startup_timeout=3600) as prometheus:
        pid = prometheus.pid
        assert pid is not None
        with PrometheusSource(prometheus.url, timeout=120.0) as source:
            plan = plan_of(source, at)
            rows = measure_each(source, pid, plan, at, args.runs)
    total = sum(r[0] for r in rows)
    replica = sum(r[0] for r in rows if per_replica(r))
    print(
        f"{args.replicas} replicas, {samples:,} samples; {len(rows)} queries, one at a time, "
        f"over {LOOKBACK / 3600:g} h at {STEP:g} s, median of {args.runs}"
    )
    print(
        f"Prometheus CPU, all queries: {total:.2f} s; "
        f"read per replica: {replica:.2f} s ({replica / total:.0%})"
    )
    print()
    print("| Prometheus CPU | wall | series | points | query | views |")
    print("| --- | --- | --- | --- | --- | --- |")
    for cpu, wall, series, points, query, views in rows[: args.top]:
        shown = query if len(query) <= 90 else query[:87] + "..."
        print(f"| {cpu:.2f} s | {wall:.2f} s | {series:,} | {points:,} | `{shown}` | {', '.join(views)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
