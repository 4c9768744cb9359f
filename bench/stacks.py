"""Benchmark of a Prometheus holding every serving stack at once, one fleet each.

The nine stack incidents (fixtures/stack-*-raw.yaml: Ray Serve LLM, Dynamo, KServe with an
LLMInferenceService beside it, TGI, trtllm-serve, Triton with the TensorRT-LLM backend,
vLLM 0.33, SGLang 0.5.23, DCGM with its default counters) are backfilled into ONE real
Prometheus: 12 fleets in all (the fixtures carry their confounders). Then, median of runs
after one warm-up, the three commands run in turns (each once, then again) so that load from
elsewhere on the machine falls on all of them alike:

  triage fleets               the command end to end (process start, discovery, text)
  triage diagnose --fleet     one stack's fleet, end to end (the Dynamo fleet: its frontend,
                              two pools and the most series of any)
  both, in one process        discovery, scoping and the diagnosis of that fleet as a
                              service or MCP call makes them, without process start
  process start               `triage --version`, what every command pays before any work

Target (issue: every serving stack): `triage fleets` plus one diagnosis <= 2 s.
Without cached bytecode (PYTHONDONTWRITEBYTECODE set, an editable install) every process also
compiles the modules it imports; the header says which it was (bench/startup.py).
Run: python -m bench.stacks [--runs 3] [--fleet dynamo]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.fleets import timed
from bench.startup import bytecode_note
from signals.catalog import QueryOptions, load_catalog
from signals.fixture import Fixture, load_fixture
from signals.fleets import discover
from signals.fleets.inventory import fetch_inventory
from signals.fleets.scope import scoped_options
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource
from signals.tempprom import OpenMetricsSeries, TemporaryPrometheus, to_openmetrics
from signals.timeparse import format_instant
from triage.core.reads import replica_reads
from triage.core.walk import diagnose
from triage.sources import load_graph

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = str(Path(sys.executable).parent / "triage")


def medians_in_turns(runs: int, commands: dict[str, list[str]]) -> dict[str, float]:
    """Each command's median wall time, the commands run in turns after one warm-up each."""
    for args in commands.values():
        timed(args)  # warm-up: the file cache and Prometheus's own
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, args in commands.items():
            times[name].append(timed(args))
    return {name: statistics.median(values) for name, values in times.items()}


def one_server(fixtures: list[Fixture]) -> Iterator[OpenMetricsSeries]:
    """Every fixture's series, each once (the stacks' shared kube-state-metrics series would
    otherwise be given twice)."""
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for f in fixtures:
        for s in f.frame.series:
            if (s.signal, s.labels) not in seen:
                seen.add((s.signal, s.labels))
                yield s.signal, dict(s.labels), s.values, f.frame.start, f.frame.step


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--fleet", default="dynamo", help="the stack whose fleet is diagnosed (fixture stack-<x>-raw)"
    )
    opts = parser.parse_args()

    paths = sorted((ROOT / "fixtures").glob("stack-*-raw.yaml"))
    fixtures = [load_fixture(str(p)) for p in paths]
    step = fixtures[0].frame.step
    text = to_openmetrics(one_server(fixtures))
    chosen = next(f for f, p in zip(fixtures, paths, strict=True) if p.stem == f"stack-{opts.fleet}-raw")
    assert chosen.expect is not None and chosen.expect.fleet is not None
    at, lookback = chosen.at, chosen.frame.end - chosen.frame.start
    series = sum(len(f.frame.series) for f in fixtures)
    with TemporaryPrometheus(text, lookback_delta=2 * step) as prometheus:
        url = prometheus.url
        when = ["--at", format_instant(at), "--lookback", f"{int(lookback)}s"]
        fleets_cmd = [TRIAGE, "fleets", "--prometheus", url, *when]
        diagnose_cmd = [TRIAGE, "diagnose", "--prometheus", url, "--fleet", chosen.expect.fleet, *when]
        diagnose_cmd += ["--format", "json"]
        walls = medians_in_turns(
            opts.runs, {"startup": [TRIAGE, "--version"], "fleets": fleets_cmd, "diagnose": diagnose_cmd}
        )
        startup, fleets_wall, diagnose_wall = walls["startup"], walls["fleets"], walls["diagnose"]

        graph, catalog = load_graph(), load_catalog()
        source = PrometheusSource(url)

        def in_process() -> tuple[float, int, str]:
            started = time.perf_counter()
            found = discover(fetch_inventory(source, at, lookback))
            fleet = found.one(chosen.expect.fleet if chosen.expect and chosen.expect.fleet else "", url)
            options = scoped_options(fleet, QueryOptions())
            frame, _ = fetch_frame(
                source, catalog, options, at, lookback, step, replica_reads(graph.knowledge)
            )
            found_cause = diagnose(graph, frame, "auto", frame.end)
            top = found_cause.top.cause if found_cause.top else found_cause.verdict
            return time.perf_counter() - started, len(found.fleets), top

        in_process()
        runs = [in_process() for _ in range(opts.runs)]
        both = statistics.median(r[0] for r in runs)
        fleets, top = runs[0][1], runs[0][2]

    print(
        f"{len(fixtures)} stacks in one Prometheus: {fleets} fleets, {series} series, "
        f"{int(lookback // 60)} minutes at {int(step)} s; diagnosed: {chosen.expect.fleet} -> {top}"
    )
    print(f"median of {opts.runs} runs in turns · {bytecode_note()}")
    print()
    print("| measure | figure | target |")
    print("| --- | --- | --- |")
    print(f"| `triage fleets`, end to end | {fleets_wall:.2f} s | - |")
    print(f"| `triage diagnose --fleet`, end to end | {diagnose_wall:.2f} s | - |")
    print(f"| **both commands** | **{fleets_wall + diagnose_wall:.2f} s** | <= 2 s |")
    print(f"| of which: process start, twice (`triage --version`) | {2 * startup:.2f} s | - |")
    print(f"| discovery + one diagnosis in one process | {both:.2f} s | <= 2 s |")


if __name__ == "__main__":
    main()
