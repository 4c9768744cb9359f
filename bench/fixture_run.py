"""Benchmark of `triage test fixtures`: every bundled fixture replayed and checked, and where a
raw fixture's replay spends its time.

`triage test fixtures -q` runs end to end, with its default jobs and with `--jobs 1`, in
turns, median of runs after one warm-up each. Then each `level: raw` fixture is replayed
once in this process, phase by phase:

  load        the YAML read into a frame of exporter series
  start       an empty temporary Prometheus started (`TemporaryPrometheus` entered)
  write       the series written into it over remote write (`signals.remotewrite.push`)
  fetch       the catalog's queries answered (`signals.live.fetch_frame`)

and, for comparison, the way in that the remote write replaced, on the same series:

  text        the series written as OpenMetrics (`signals.tempprom.to_openmetrics`)
  backfill    `promtool tsdb create-blocks-from openmetrics` and the temporary Prometheus's
              start over the blocks

With --scorecard, `triage test fixtures -q --scorecard FILE` runs too, with the default jobs
and with `--jobs 1`: the scorecard replays each fixture's timeline (a diagnosis every minute
up to its moment), which the loading processes do beside the loads.

Target (issue: scale): `triage test fixtures` <= 20 s.
Run: python -m bench.fixture_run [--runs 3] [--scorecard]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.stacks import TRIAGE, medians_in_turns
from bench.startup import bytecode_note
from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource
from signals.remotewrite import push
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from triage.cli.handlers.testrun import default_jobs

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("load", "start", "write", "fetch", "text", "backfill")


def raw_paths() -> list[Path]:
    """The bundled `level: raw` fixtures, told by the `level:` line among each file's first lines."""
    found = []
    for path in sorted((ROOT / "fixtures").glob("*.yaml")):
        with path.open(encoding="utf-8") as head:
            if any(line.strip() == "level: raw" for _, line in zip(range(40), head, strict=False)):
                found.append(path)
    return found


def phases(path: Path) -> tuple[dict[str, float], int, int]:
    """Seconds per phase of one raw replay, the series and the OpenMetrics bytes of the old way."""
    took: dict[str, float] = {}
    started = time.perf_counter()
    fixture = load_fixture(str(path))
    frame = fixture.frame
    took["load"] = time.perf_counter() - started
    series = [(s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series]
    started = time.perf_counter()
    with TemporaryPrometheus(lookback_delta=2 * frame.step) as prometheus:
        took["start"] = time.perf_counter() - started
        started = time.perf_counter()
        push(prometheus.url, series)
        took["write"] = time.perf_counter() - started
        started = time.perf_counter()
        fetch_frame(
            PrometheusSource(prometheus.url, timeout=60.0),
            load_catalog(),
            QueryOptions(),
            at=frame.end,
            lookback=frame.end - frame.start,
            step=frame.step,
        )
        took["fetch"] = time.perf_counter() - started
    started = time.perf_counter()
    text = to_openmetrics(series)
    took["text"] = time.perf_counter() - started
    started = time.perf_counter()
    with TemporaryPrometheus(text, lookback_delta=2 * frame.step):
        took["backfill"] = time.perf_counter() - started
    return took, len(frame.series), len(text.encode())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scorecard", action="store_true", help="also time --scorecard (minutes)")
    opts = parser.parse_args()

    commands = {
        "default jobs": [TRIAGE, "test", "fixtures", "-q"],
        "--jobs 1": [TRIAGE, "test", "fixtures", "-q", "--jobs", "1"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        card = str(Path(tmp) / "scorecard.md")
        if opts.scorecard:
            commands["default jobs, `--scorecard`"] = [*commands["default jobs"], "--scorecard", card]
            commands["`--jobs 1`, `--scorecard`"] = [*commands["--jobs 1"], "--scorecard", card]
        walls = medians_in_turns(opts.runs, commands)
    raws = raw_paths()
    totals = dict.fromkeys(PHASES, 0.0)
    series = size = 0
    for path in raws:
        took, n, nbytes = phases(path)
        series, size = series + n, size + nbytes
        for phase in PHASES:
            totals[phase] += took[phase]
    fixtures = len(list((ROOT / "fixtures").glob("*.yaml")))

    print(
        f"{fixtures} bundled fixtures, {len(raws)} of them raw ({series} exporter series, "
        f"{size / 1e6:.0f} MB as OpenMetrics) · {default_jobs()} jobs by default here"
    )
    print(f"median of {opts.runs} runs · {bytecode_note()}")
    print()
    print("| measure | figure | target |")
    print("| --- | --- | --- |")
    for name, wall in walls.items():
        target = "-" if "scorecard" in name else "<= 20 s"
        print(f"| **`triage test fixtures`**, {name} | **{wall:.1f} s** | {target} |")
    for phase in PHASES:
        way = "the old way in, " if phase in ("text", "backfill") else ""
        print(f"| raw replays, {way}{phase}, all {len(raws)} | {totals[phase]:.1f} s | - |")


if __name__ == "__main__":
    main()
