"""Benchmark of the postmortem report on the 64-replica, 6-hour fixture; prints a table.

The report replays the whole incident (360 diagnoses at 1m) and draws 64 replica lines
per evidence chart, so it is the heaviest thing the tool renders; the targets are a
report in <= 5 s and an HTML file under 3 MB. Each run is a fresh process (cold view
caches), timing separately:
  load     read + validate + build the frame (shared with every command; bench.core)
  build    build_report: the replay every 1m up to `at`, the diagnosis at `at`, the charts
  html     render_report(..., "html"): SVG with min/max downsampling, the template
  md       render_report(..., "md"): the same charts inline plus their tables
The "report" column is build + html, what `triage report` adds to loading the fixture.

Run: python -m bench.report [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench.big_fixture import PATH, fresh_runs

TARGET_SECONDS = 5.0
TARGET_MB = 3.0

CHILD = r"""
import json, sys, time
from signals.fixture import load_fixture
from triage.sources import load_graph
from triage.report.report import build_report, render_report

graph = load_graph()
t0 = time.perf_counter()
fixture = load_fixture(sys.argv[1])
load = time.perf_counter() - t0
t0 = time.perf_counter()
report = build_report(graph, fixture, 60.0, 1_800_000_000.0)
built = time.perf_counter() - t0
t0 = time.perf_counter()
html = render_report(report, "html", None)
html_s = time.perf_counter() - t0
t0 = time.perf_counter()
md = render_report(report, "md", None)
md_s = time.perf_counter() - t0
print(json.dumps({"load": load, "build": built, "html": html_s, "md": md_s,
                  "html_mb": len(html.encode()) / 1e6, "md_mb": len(md.encode()) / 1e6,
                  "charts": len(report.charts), "steps": len(report.timeline),
                  "replicas": len(report.replicas),
                  "top": report.diagnosis.top.cause if report.diagnosis.top else None}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="fresh processes to run (default 3)")
    args = parser.parse_args()
    runs = fresh_runs(CHILD, args.runs)

    def med(key: str) -> float:
        return statistics.median(float(r[key]) for r in runs)

    first = runs[0]
    report_s = med("build") + med("html")
    print(
        f"{PATH.name}: {first['replicas']} replicas, {first['steps']} replay steps, "
        f"{first['charts']} charts, top cause {first['top']}; median of {len(runs)} fresh processes\n"
    )
    rows = [
        ("load fixture", f"{med('load'):.2f} s", "—"),
        ("build_report (replay 1m + diagnosis + charts)", f"{med('build'):.2f} s", "—"),
        ("render HTML", f"{med('html'):.2f} s", "—"),
        ("render Markdown", f"{med('md'):.2f} s", "—"),
        (
            "report: build + HTML",
            f"{report_s:.2f} s",
            f"≤ {TARGET_SECONDS:.0f} s {_ok(report_s <= TARGET_SECONDS)}",
        ),
        (
            "load + build + HTML",
            f"{med('load') + report_s:.2f} s",
            "—",
        ),
        ("HTML size", f"{med('html_mb'):.2f} MB", f"< {TARGET_MB:.0f} MB {_ok(med('html_mb') < TARGET_MB)}"),
        ("Markdown size", f"{med('md_mb'):.2f} MB", "—"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure'.ljust(width)} | figure | target |")
    print(f"| {'-' * width} | --- | --- |")
    for name, figure, target in rows:
        print(f"| {name.ljust(width)} | {figure} | {target} |")
    return 0


def _ok(passed: bool) -> str:
    return "✔" if passed else "✘"


if __name__ == "__main__":
    sys.exit(main())
