"""Generate the benchmark fixture: 64 replicas x 20 per-replica signals, 6 hours at 15 s.

About 1.8 M values (64 x 20 x 1441), with noise on every series and a KV-pressure
incident in the sixth hour, so the walk has real work to do. Written to bench/out/.
Run: python -m bench.big_fixture
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from signals.timeparse import format_duration, parse_duration
from tools.synth import Fleet

OUT = Path(__file__).resolve().parent / "out"
PATH = OUT / "big-64x20x6h.yaml"


def kv_pressure(f: Fleet, onset: str) -> Fleet:
    """The benchmarks' incident: KV fills from `onset`, then preemption, TPOT, TTFT and the queue follow."""
    start = parse_duration(onset)

    def after(minutes: int) -> str:
        return format_duration(start + 60 * minutes)

    f.step("kv_usage_ratio", after(0), to=0.985, ramp="6m")
    f.step("preemption_rate", after(2), to=2.5, ramp="3m")
    f.step("tpot_p99_seconds", after(3), factor=2.6, ramp="3m")
    f.step("ttft_p99_seconds", after(4), factor=2.2, ramp="3m")
    f.step("queue_waiting", after(4), to=6, ramp="3m")
    return f


def build() -> Path:
    OUT.mkdir(exist_ok=True)
    f = Fleet(
        "bench-64-replicas-6h",
        "Benchmark: 64 replicas, 20 per-replica signals, 6 hours at 15 s; KV pressure in the sixth hour.",
        replicas=64,
        duration="6h",
        seed=64,
        gpu_signals=False,
        kube_signals=False,
        info_signals=False,
        omit=("e2e_p99_seconds",),
    )
    kv_pressure(f, "5h10m")
    f.write(str(PATH), "tpot_slow", expect={"cause": "kv_pressure", "forbidden": ["scale_out"]})
    return PATH


def fresh_runs(child: str, runs: int) -> list[dict[str, Any]]:
    """Run a measuring script `runs` times, each in a fresh process, on the benchmark fixture.

    A fresh process per run keeps caches and memory cold, as a person running the command
    would find them; the script prints one JSON object of its figures.
    """
    if not PATH.exists():
        build()
    out = []
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-c", child, str(PATH)],
            capture_output=True,
            text=True,
            cwd=PATH.parent.parent.parent,
            check=True,
        )
        out.append(json.loads(result.stdout))
    return out


if __name__ == "__main__":
    path = build()
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    sys.exit(0)
