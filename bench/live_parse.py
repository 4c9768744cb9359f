"""What reading Prometheus's own form saves the client: a live read, each series parsed as JSON
against each series read in Prometheus's form (`signals.prometheus.canonical`); prints a table.

On the same data as `bench.live` (its raw vLLM V1 + DCGM + kube-state-metrics fleet of
`--replicas` replicas, generated into bench/out on first use, backfilled into a temporary
Prometheus; with --rules, `triage rules` evaluated over the window and loaded, as
`bench.live`'s "with rules" run), the read a live diagnosis makes (`signals.live.fetch_frame`,
the per-replica histograms its checks read) runs in this process `--runs` times each way, in
turns, after one read to warm Prometheus's caches. For each: the client's CPU (this process,
every thread: `time.process_time`), the read's wall, and Prometheus's CPU (utime + stime
from /proc). The frames of the two ways are compared series by series: Prometheus sums a
fleet's series in no fixed order, so two reads the same way may differ in the last bits of
a sum (and a quantile of those sums more), and that difference is printed beside the two
ways' own. The exactness itself is tested on the same bytes (tests/signals/test_canonical.py).

Run: python -m bench.live_parse [--replicas 1000] [--rules] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.live import LOOKBACK, STEP, cpu_seconds, openmetrics, rules_file
from signals.catalog import QueryOptions, load_catalog
from signals.frame import SignalFrame
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource, streamed
from signals.prometheus.canonical import canonical_series
from signals.tempprom import TemporaryPrometheus
from triage.core.reads import replica_reads
from triage.sources import load_graph

ZERO = 1e-9
WAYS = {
    "each series parsed as JSON": lambda piece, reply: None,
    "Prometheus's own form": canonical_series,
}


def read(
    url: str, pid: int, at: float, way: Callable[..., object]
) -> tuple[float, float, float, SignalFrame]:
    """One read the given way: (client CPU s, wall s, Prometheus CPU s, the frame)."""
    vars(streamed)["canonical_series"] = way
    wanted, catalog = replica_reads(load_graph().knowledge), load_catalog()
    server, client, began = cpu_seconds(pid), time.process_time(), time.perf_counter()
    with PrometheusSource(url, timeout=300.0) as source:
        frame, _ = fetch_frame(source, catalog, QueryOptions(), at, LOOKBACK, STEP, wanted)
    return time.process_time() - client, time.perf_counter() - began, cpu_seconds(pid) - server, frame


def largest_difference(a: SignalFrame, b: SignalFrame) -> float:
    """The largest difference between two frames' values, relative to the value (plus `ZERO`,
    so that sums that should be 0 and differ by rounding count as equal); inf when
    they hold other series or a value in one is missing in the other."""
    rows = {(s.signal, s.labels): s.values for s in b.series}
    if len(rows) != len(a.series):
        return float("inf")
    largest = 0.0
    for s in a.series:
        other = rows.get((s.signal, s.labels))
        if other is None or not np.array_equal(np.isnan(s.values), np.isnan(other)):
            return float("inf")
        both = ~np.isnan(s.values)
        gap = np.abs(s.values[both] - other[both]) / (np.abs(s.values[both]) + ZERO)
        largest = max(largest, float(gap.max(initial=0.0)))
    return largest


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=200, help="fleet size (default 200)")
    parser.add_argument(
        "--rules", action="store_true", help="load `triage rules`, as bench.live's second run"
    )
    parser.add_argument("--runs", type=int, default=3, help="reads each way, in turns (default 3)")
    args = parser.parse_args()
    data, at, samples = openmetrics(args.replicas)
    with TemporaryPrometheus(data, startup_timeout=3600) as prometheus, tempfile.TemporaryDirectory() as tmp:
        if args.rules:
            prometheus.backfill_rules(rules_file(Path(tmp)), at - LOOKBACK - 600, at + STEP, STEP)
        pid = prometheus.pid
        assert pid is not None
        read(prometheus.url, pid, at, canonical_series)
        figures: dict[str, list[tuple[float, float, float]]] = {way: [] for way in WAYS}
        frames: dict[str, list[SignalFrame]] = {way: [] for way in WAYS}
        for _ in range(args.runs):
            for name, way in WAYS.items():
                client, wall, server, frame = read(prometheus.url, pid, at, way)
                figures[name].append((client, wall, server))
                frames[name][1:] = [frame]  # the first and the latest, not every one held
                del frame
    vars(streamed)["canonical_series"] = canonical_series
    recorded = ", triage rules loaded" if args.rules else ", raw series"
    print(
        f"{args.replicas} replicas{recorded}, {samples:,} samples; "
        f"the read {args.runs} times each way, in turns"
    )
    print(f"{'read':<28} {'client CPU':>11} {'wall':>7} {'Prometheus CPU':>15}")
    for name, rows in figures.items():
        client, wall, server = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"{name:<28} {client:>10.2f}s {wall:>6.2f}s {server:>14.2f}s")
    json_frames, own_frames = frames.values()
    between = largest_difference(json_frames[-1], own_frames[-1])
    again = largest_difference(json_frames[0], json_frames[-1])
    print(f"frames, the two ways: largest relative difference {between:.1e}")
    print(f"frames, one way read twice (the server's own sums): {again:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
