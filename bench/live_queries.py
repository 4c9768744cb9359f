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

With --steps (e.g. 30,60,120,300), the whole round is sent instead, concurrently as a
diagnosis sends it, at each of those steps over the same window, beside one refresh of vLLM's
Grafana dashboard at the diagnosis's step: what a coarser read of every view would save, and
the floor it approaches (every sample of the window is still decoded, whatever the step).

With --forms, one histogram family is read in the forms a round could ask it in, each alone:
its bucket rates per replica as the round sends them, the same with the zero rates left out,
the raw samples themselves (a range selector at one instant), the counters at each step, the
fleet's sum by `le`, and a count that decodes every sample and answers one number. What each
costs says where Prometheus's CPU goes: decoding the samples, evaluating each series at each
step, or writing the answer.
Run: python -m bench.live_queries [--replicas 200] [--top 20] [--runs 3] [--steps 30,60,120,300]
     [--forms vllm:time_to_first_token_seconds_bucket]
"""

from __future__ import annotations

import argparse
import sys
from typing import cast

from bench.live import LOOKBACK, STEP, dashboard_queries, measure, openmetrics, refresh
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


def measure_steps(
    source: PrometheusSource, pid: int, plan: Plan, at: float, runs: int, steps: list[float]
) -> list[tuple[str, float, float, int]]:
    """(what, Prometheus CPU s, wall s, points) of the dashboard's refresh and of the whole round
    at each step, each warmed once and measured `runs` times (median)."""
    rows: list[tuple[str, float, float, int]] = []
    panels = dashboard_queries()
    if panels is not None:
        refresh(source.url, panels, at)
        cpu, wall, _ = measure(pid, runs, lambda: refresh(source.url, panels, at))
        rows.append((f"dashboard refresh ({len(panels)} panels, {STEP:g} s)", cpu, wall, 0))
    queries = {q: q for q in plan.queries}
    for step in steps:

        def ask(step: float = step) -> dict[str, QueryResult]:
            return source.range_queries(queries, at - LOOKBACK, at, step)

        ask()  # warm
        cpu, wall, last = measure(pid, runs, ask)
        answers = cast(dict[str, QueryResult], last)
        points = sum(len(times) for a in answers.values() for _, times, _ in a.series)
        rows.append((f"the round, every view at {step:g} s ({len(queries)} queries)", cpu, wall, points))
    return rows


def measure_forms(
    source: PrometheusSource, pid: int, family: str, at: float, runs: int
) -> list[tuple[str, float, float, int]]:
    """(form, Prometheus CPU s, wall s, points) of one histogram family read in each form, each
    warmed once and measured `runs` times (median)."""
    window = f"{LOOKBACK + 300:g}s"  # the raw samples the rates of the first step read too
    rates = f"rate({family}[5m])"
    ranged = {
        "bucket rates per replica, as the round sends them": rates,
        "the same, zero rates left out (`!= 0`)": f"{rates} != 0",
        "the counters themselves at each step": family,
        "the fleet's `sum by (le)` of the rates": f"sum by (le) ({rates})",
    }
    instant = {
        f"the raw samples (`{family}[{window}]` at one instant)": f"{family}[{window}]",
        "every sample decoded, one number answered (`count(count_over_time(...))`)": (
            f"count(count_over_time({family}[{window}]))"
        ),
    }
    rows: list[tuple[str, float, float, int]] = []
    for what, query in [*ranged.items(), *instant.items()]:

        def ask(query: str = query, ranged: bool = what in ranged) -> QueryResult:
            if ranged:
                answer = source.range_queries({query: query}, at - LOOKBACK, at, STEP)[query]
            else:
                answer = source.instant_queries({query: query}, at)[query]
            assert answer.error is None, f"{query}: {answer.error}"
            return answer

        ask()  # warm
        cpu, wall, last = measure(pid, runs, ask)
        points = sum(len(times) for _, times, _ in cast(QueryResult, last).series)
        rows.append((what, cpu, wall, points))
    return rows


def print_forms(rows: list[tuple[str, float, float, int]]) -> None:
    print("| form | Prometheus CPU | wall | points |")
    print("| --- | --- | --- | --- |")
    for what, cpu, wall, points in rows:
        print(f"| {what} | {cpu:.2f} s | {wall:.2f} s | {points:,} |")


def print_steps(rows: list[tuple[str, float, float, int]]) -> None:
    peer = rows[0][1] if rows and rows[0][0].startswith("dashboard") else None
    print("| read | Prometheus CPU | against the dashboard | wall | points |")
    print("| --- | --- | --- | --- | --- |")
    for what, cpu, wall, points in rows:
        ratio = f"{cpu / peer:.2f}x" if peer else "-"
        print(f"| {what} | {cpu:.2f} s | {ratio} | {wall:.2f} s | {points:,} |")


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
    parser.add_argument(
        "--steps",
        help="comma-separated steps in seconds: send the whole round at each, beside the dashboard",
    )
    parser.add_argument(
        "--forms",
        metavar="FAMILY",
        help="a histogram's bucket series (e.g. vllm:time_to_first_token_seconds_bucket): read it "
        "in each form a round could ask it in",
    )
    args = parser.parse_args()
    try:
        steps = [float(s) for s in args.steps.split(",")] if args.steps else []
    except ValueError:
        parser.error(f"--steps takes seconds separated by commas, got {args.steps!r}")
    if any(not s > 0 for s in steps):
        parser.error(f"--steps must all be positive, got {args.steps!r}")
    data, at, samples = openmetrics(args.replicas)
    with TemporaryPrometheus(data, startup_timeout=3600) as prometheus:
        pid = prometheus.pid
        assert pid is not None
        with PrometheusSource(prometheus.url, timeout=120.0) as source:
            if args.forms:
                print(f"{args.replicas} replicas, {samples:,} samples; {args.forms}, median of {args.runs}")
                print_forms(measure_forms(source, pid, args.forms, at, args.runs))
                return 0
            plan = plan_of(source, at)
            if steps:
                window = f"over {LOOKBACK / 3600:g} h, median of {args.runs}"
                print(f"{args.replicas} replicas, {samples:,} samples; {window}")
                print_steps(measure_steps(source, pid, plan, at, args.runs, steps))
                return 0
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
