"""Benchmark of fleets in one Prometheus: discovery, and the cost of diagnosing one fleet among many.

Two scraped-and-backfilled clusters (tools/cluster) are built in the same run:

  many   `--fleets` fleets of `--replicas` replicas each (vLLM Deployments, 70B
         LeaderWorkerSets of leader + worker with 4 GPUs per pod, SGLang, KubeAI), all
         in one Prometheus, each with its own incident;
  alone  the first of those fleets (the vLLM Deployment under KV pressure) with the
         same replicas and the same story, alone in its own Prometheus.

Then:

  triage fleets         the command end to end (process start, discovery, text), median of runs
  diagnose one fleet    `triage diagnose --fleet` on the many-fleet server, and the same
                        diagnosis (unscoped: it is the only fleet) on the alone server; the
                        Prometheus process's CPU seconds (utime + stime from /proc) spent
                        answering each, median of runs, and their ratio

Targets: `triage fleets` <= 2 s; one fleet's diagnosis costs Prometheus <= 1.3x its cost
when the fleet is alone.
Run: python -m bench.fleets [--fleets 10 --replicas 100 --duration 75m --runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from signals.fleets import discover
from signals.fleets.inventory import fetch_inventory
from signals.prometheus import PrometheusSource
from signals.timeparse import format_instant
from tools.cluster import Scenario, three_fleets

TRIAGE = str(Path(sys.executable).parent / "triage")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a process so far, from /proc (fields 14 and 15 of stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-800:]}")
    return elapsed


def prometheus_cost(scenario: Scenario, args: list[str], runs: int) -> tuple[float, float]:
    """Median Prometheus CPU seconds and median wall seconds of running `args`."""
    assert scenario.prometheus is not None and scenario.prometheus.pid is not None
    pid = scenario.prometheus.pid
    cpu, wall = [], []
    timed(args)  # warm the head and the page cache once, as a dashboard refresh would find it
    for _ in range(runs):
        before = cpu_seconds(pid)
        wall.append(timed(args))
        time.sleep(0.5)  # let the last request's accounting land
        cpu.append(cpu_seconds(pid) - before)
    return statistics.median(cpu), statistics.median(wall)


def discover_seconds(url: str, at: float) -> float:
    """Fetching the label sets and joining them, without the process start."""
    started = time.perf_counter()
    with PrometheusSource(url, timeout=30.0) as prometheus:
        found = discover(fetch_inventory(prometheus, at, 3600.0))
    assert found.fleets
    return time.perf_counter() - started


def series_count(scenario: Scenario) -> int:
    assert scenario.history is not None
    return len(scenario.history.series)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fleets", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--duration", default="75m", help="history per cluster (75m: the shortest story)")
    parser.add_argument("--step", default="30s")
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()

    started = time.monotonic()
    with (
        three_fleets(
            fleets=opts.fleets, replicas=opts.replicas, duration=opts.duration, step=opts.step
        ) as many,
        three_fleets(fleets=1, replicas=opts.replicas, duration=opts.duration, step=opts.step) as alone,
    ):
        assert many.truth is not None and alone.truth is not None
        built = time.monotonic() - started
        target = many.truth.fleet("vllm", "llm")
        at = format_instant(target.at)
        pods = sum(len(f.pods) for f in many.truth.fleets)
        gpus = sum(len(p.gpus) for f in many.truth.fleets for p in f.pods)
        replicas = sum(1 for f in many.truth.fleets for p in f.pods if p.role == "engine")

        fleets_cmd = [TRIAGE, "fleets", "--prometheus", many.url, "--at", at]
        fleets_wall = statistics.median(timed(fleets_cmd) for _ in range(opts.runs))
        discovery = statistics.median(discover_seconds(many.url, target.at) for _ in range(opts.runs))
        startup = statistics.median(timed([TRIAGE, "--version"]) for _ in range(opts.runs))

        scoped = [
            TRIAGE,
            "diagnose",
            "--prometheus",
            many.url,
            "--at",
            at,
            "--fleet",
            "namespace=llm,workload=vllm",
            "--symptom",
            "tpot_slow",
            "--format",
            "json",
        ]
        lone = [
            TRIAGE,
            "diagnose",
            "--prometheus",
            alone.url,
            "--at",
            format_instant(alone.truth.fleet("vllm").at),
            "--symptom",
            "tpot_slow",
            "--format",
            "json",
        ]
        many_cpu, many_wall = prometheus_cost(many, scoped, opts.runs)
        alone_cpu, alone_wall = prometheus_cost(alone, lone, opts.runs)

    ratio = many_cpu / alone_cpu if alone_cpu > 0 else float("inf")
    print(
        f"clusters built in {built:.0f} s: many = {opts.fleets} fleets, {replicas} replicas, {pods} pods, "
        f"{gpus} GPUs, {series_count(many)} series; alone = 1 fleet of {opts.replicas} replicas, "
        f"{series_count(alone)} series; history {opts.duration} at {opts.step}"
    )
    print()
    print("| measure | figure | target |")
    print("| --- | --- | --- |")
    print(f"| `triage fleets`, end to end (median of {opts.runs}) | {fleets_wall:.2f} s | <= 2 s |")
    print(f"| of which: discovery (inventory queries + joins, in process) | {discovery:.2f} s | - |")
    print(f"| of which: process start (`triage --version`) | {startup:.2f} s | - |")
    print(f"| diagnose one fleet among {opts.fleets}: Prometheus CPU | {many_cpu:.3f} s | - |")
    print(f"| the same fleet alone: Prometheus CPU | {alone_cpu:.3f} s | - |")
    print(f"| ratio | {ratio:.2f}x | <= 1.3x |")
    print(f"| diagnose one fleet among {opts.fleets}: wall | {many_wall:.2f} s | - |")
    print(f"| the same fleet alone: wall | {alone_wall:.2f} s | - |")


if __name__ == "__main__":
    main()
