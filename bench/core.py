"""Benchmark of the diagnosis core on the 64-replica, 6-hour fixture; prints a table.

Measures, each in a fresh process so caches and memory start cold:
  load            read + validate + build the frame (target <= 5 s)
  first diagnosis the first diagnosis after load, cold view caches, verdict and first
                  movers included (target <= 100 ms)
  warm diagnosis  median of 20 more diagnoses at other moments
  replay 1m       a full `replay --every 1m`: 360 diagnoses (target <= 10 s)
  peak RSS        of the process that did all of the above (target <= 600 MB)

Run: python -m bench.core [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.big_fixture import PATH, fresh_runs

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, statistics, sys, time
from bench.procstat import peak_rss_mb
from signals.fixture import load_fixture
from triage.sources import load_graph
from triage.core.walk import diagnose
from triage.replay import timeline

graph = load_graph()
t0 = time.perf_counter()
fixture = load_fixture(sys.argv[1])
load = time.perf_counter() - t0
frame = fixture.frame
t0 = time.perf_counter()
d = diagnose(graph, frame, "tpot_slow", fixture.at)
first = time.perf_counter() - t0
warm = []
for i in range(20):
    at = frame.start + (frame.end - frame.start) * (0.5 + i / 40)
    t0 = time.perf_counter()
    diagnose(graph, frame, "tpot_slow", at)
    warm.append(time.perf_counter() - t0)
t0 = time.perf_counter()
steps = timeline(graph, frame, "tpot_slow", 60.0)
replay = time.perf_counter() - t0
rss_mb = peak_rss_mb()
values = sum(int((s.values == s.values).sum()) for s in frame.series)
print(json.dumps({"load": load, "first": first, "warm": statistics.median(warm), "replay": replay,
                  "steps": len(steps), "rss_mb": rss_mb, "top": d.causes[0].cause if d.causes else None,
                  "series": len(frame.series), "values": values}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="fresh processes to run (default 3)")
    args = parser.parse_args()
    runs = fresh_runs(CHILD, args.runs)
    t0 = time.perf_counter()
    cli = subprocess.run(
        [sys.executable, "-m", "triage.cli.main", "replay", str(PATH), "--every", "1m", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    cli_seconds = time.perf_counter() - t0
    assert json.loads(cli.stdout)["summary"]["top_cause"] == "kv_pressure"

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    first = runs[0]
    print(
        f"fixture: {PATH.name}, {PATH.stat().st_size / 1e6:.1f} MB, {first['series']} series, "
        f"{first['values']:,} values; top cause {first['top']}; {args.runs} fresh runs, median shown"
    )
    rows = [
        ("load (read, validate, build frame)", f"{med('load'):.2f} s", "<= 5 s", med("load") <= 5),
        ("first diagnosis after load", f"{med('first') * 1000:.0f} ms", "<= 100 ms", med("first") <= 0.1),
        ("warm diagnosis (median of 20)", f"{med('warm') * 1000:.0f} ms", "", True),
        (
            f"replay --every 1m ({first['steps']} diagnoses)",
            f"{med('replay'):.2f} s",
            "<= 10 s",
            med("replay") <= 10,
        ),
        (
            "peak RSS (load + diagnose + replay)",
            f"{max(r['rss_mb'] for r in runs):.0f} MB",
            "<= 600 MB",
            max(r["rss_mb"] for r in runs) <= 600,
        ),
        ("`triage replay --every 1m` end to end", f"{cli_seconds:.2f} s", "", True),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>10}  {'target':>10}  ok")
    for name, value, target, ok in rows:
        print(f"{name:<{width}}  {value:>10}  {target:>10}  {'yes' if ok else 'NO'}")
    print(f"(this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
