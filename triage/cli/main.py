"""The `triage` command line: validate input, build sources, call the core, print.

Stdout carries the product (the diagnosis, the timeline, the test report); stderr
carries diagnostics. Every input problem is one `file:line: key: message` line and exit
code 2; nothing reaches the user as a traceback (set TRIAGE_DEBUG=1 to see one).

The layer above (the TUI's console script) reaches the command line through this module
alone, so the shared pieces it builds its own command from are re-exported here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TextIO

import jinja2

from signals.capture import dump_fixture, frame_to_fixture
from signals.catalog import load_catalog, resolve
from signals.errors import InputError, InputErrors, SignalError
from signals.fixture import Fixture, fixture_from_document, is_offset
from signals.live import fetch_frame
from signals.timeparse import format_duration, format_instant, parse_duration, parse_instant
from signals.yamldoc import parse_yaml
from triage import __version__
from triage.audit import AuditSettings, render_audit, run_audit
from triage.capacity import EXAMPLE_FILE as CAPACITY_EXAMPLE
from triage.capacity import load_inputs as load_capacity_inputs
from triage.capacity import measure_rate_at_slo, render_presets
from triage.capacity import plan as capacity_plan
from triage.capacity import render_text as render_capacity
from triage.cli.alertfile import read_alert
from triage.cli.common import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    UsageError,
    add_playbook_option,
    graph_from_args,
    live_moment,
    load_checked_fixture,
    symptom_arg,
    use_color,
    write_output,
)
from triage.cli.sourceargs import (
    SourceArgError,
    add_prometheus_options,
    catalog,
    duration_arg,
    prometheus_source,
    query_options,
)
from triage.core.graph import build_graph
from triage.core.model import AUTO, Diagnosis
from triage.core.playbook import AnyOf, Knowledge
from triage.core.render import to_json, to_markdown, to_text
from triage.core.walk import diagnose, symptom_from_alert
from triage.replay import check_expect, fixture_symptom, summarise, timeline
from triage.report.report import build_report, render_report
from triage.report.scorecard import (
    FixtureOutcome,
    error_outcome,
    outcome_for,
    render_junit,
    render_scorecard,
    scorecard_format,
)
from triage.rules import load_slo, render_rules
from triage.service.command import add_serve_parser, run_serve
from triage.sources import default_playbook_dir, load_playbooks

__all__ = [
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "Extension",
    "UsageError",
    "add_playbook_option",
    "build_parser",
    "graph_from_args",
    "load_checked_fixture",
    "main",
    "symptom_arg",
]

EPILOG = """\
examples:
  triage diagnose --fixture fixtures/kv-pressure-long-context.yaml
  triage diagnose --fixture F --symptom ttft_slow --at 40m --format json | jq .causes[0]
  triage replay fixtures/replica-down-queue-growth.yaml --every 1m
  triage test                      # replay every fixture with an expect block
  triage playbooks check           # validate the knowledge

exit codes: 0 diagnosis made (also when no cause is found), 1 tests or checks failed,
2 bad usage or bad input, 70 internal error.
"""


@dataclass(frozen=True)
class Extension:
    """A subcommand from a layer above the core (the TUI), which the core may not import.

    The console script lives in that layer and hands its extensions to `main`, so the
    imports keep pointing one way while `triage --help` lists every command.
    """

    name: str
    add: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]
    run: Callable[[argparse.Namespace, TextIO], int]


def build_parser(extensions: Sequence[Extension] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triage",
        description="Incident triage for LLM inference services: walk from the symptom to ranked causes, "
        "first actions, and the actions that would be wrong now.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llm-triage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser(
        "diagnose",
        help="diagnose an incident at one moment, from a fixture or a live Prometheus",
        description="Diagnose an incident at one moment, from a recorded fixture or a live Prometheus.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="--at takes an offset from the fixture's start (40m, 1h30m) or an RFC 3339 time; live, a\n"
        "duration means that long ago (--at 20m) and the default is now, or the alert's startsAt.\n"
        "--symptom auto detects the symptom from the signals (the worst breach wins).\n"
        "exit codes: 0 diagnosis made, 2 bad usage or input, 3 Prometheus could not be read at all.",
    )
    d.add_argument(
        "--fixture", metavar="PATH", help="incident fixture (YAML; raw ones replay through Prometheus)"
    )
    d.add_argument(
        "--symptom",
        metavar="ID",
        help="where to start: ttft_slow, tpot_slow, errors, rejected, "
        "cost_up, quality_down or auto (default: the fixture's or the alert's, else auto)",
    )
    d.add_argument(
        "--at", metavar="T", help="moment to diagnose (default: the fixture's at, else the last sample)"
    )
    d.add_argument(
        "--alert", metavar="FILE", help="an Alertmanager alert or webhook payload (JSON) to start from"
    )
    d.add_argument("--lookback", metavar="DURATION", default="2h", help="live: history to fetch (default 2h)")
    d.add_argument("--step", metavar="DURATION", default="30s", help="live: resolution (default 30s)")
    d.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    d.add_argument("-v", "--verbose", action="store_true", help="show every check, also the ruled-out causes")
    add_playbook_option(d)
    add_prometheus_options(d)

    r = sub.add_parser(
        "replay",
        help="the diagnosis at every step through an incident",
        description="Replay an incident: the diagnosis as it would have read at each step, when "
        "the top cause first appeared, when it settled, how long after the onset.",
    )
    r.add_argument("fixture", metavar="PATH")
    r.add_argument("--every", default="1m", metavar="DURATION", help="step between diagnoses (default 1m)")
    r.add_argument("--symptom", metavar="ID")
    r.add_argument("--format", choices=("text", "json"), default="text")
    add_playbook_option(r)

    t = sub.add_parser(
        "test",
        help="replay fixtures and check their expect blocks",
        description="Replay every fixture that has an expect block and check it, like promtool "
        "test rules. Exit 1 on any failure.",
    )
    t.add_argument("paths", nargs="*", metavar="PATH", help="fixture files or folders (default: fixtures/)")
    t.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    t.add_argument("--junit", metavar="FILE", help="also write JUnit XML, one test case per fixture")
    t.add_argument("--scorecard", metavar="FILE", help="also write the accuracy scorecard (.md or .html)")
    add_playbook_option(t)

    sg = sub.add_parser("signals", help="what a live Prometheus can tell")
    sgsub = sg.add_subparsers(dest="signals_command", metavar="SUBCOMMAND")
    sc = sgsub.add_parser(
        "check",
        help="resolve every signal against a Prometheus: its source, or blind",
        description="For every vocabulary signal, the source it resolves to on the server, or that it is "
        "blind, and which causes that leaves unprovable. Deprecated metric names in use are reported.",
    )
    sc.add_argument("--format", choices=("text", "json"), default="text")
    add_playbook_option(sc)
    add_prometheus_options(sc, required=True)

    cp = sub.add_parser(
        "capture",
        help="record a live incident as a fixture",
        description="Fetch every signal over [start, end] and write a signal-level fixture (promtool "
        "notation, runs compressed). Add an expect block and it is a regression test.",
    )
    cp.add_argument("--start", required=True, metavar="T", help="RFC 3339 time, or a duration ago (2h)")
    cp.add_argument("--end", metavar="T", help="RFC 3339 time, or a duration ago (default now)")
    cp.add_argument("--step", metavar="DURATION", default="15s", help="resolution (default 15s)")
    cp.add_argument("--symptom", metavar="ID", help="symptom to record in the fixture")
    cp.add_argument("-o", "--output", required=True, metavar="FILE", help="fixture file to write")
    add_playbook_option(cp)
    add_prometheus_options(cp, required=True)

    ru = sub.add_parser(
        "rules",
        help="Prometheus recording and alerting rules that feed the triage",
        description="Write Prometheus rules: the catalog as triage:<signal> recording rules (the or of every "
        "flavour's query), and alerting rules that start the triage, each with a symptom label. "
        "P99 TTFT and P99 TPOT alert separately, never on the mean.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="validate the output with: promtool check rules FILE",
    )
    ru.add_argument("-o", "--output", metavar="FILE", help="rule file to write (default: stdout)")
    ru.add_argument("--slo", metavar="FILE", help="SLO thresholds to override (see triage/slo_defaults.yaml)")
    ru.add_argument(
        "--selector",
        metavar="S",
        default="",
        help="label matchers for every query, e.g. '{namespace=\"llm\"}'",
    )
    ru.add_argument("--replica-label", metavar="L", default="instance", help="label that names a replica")
    ru.add_argument(
        "--catalog", metavar="FILE", action="append", default=[], help="extra signal catalog file(s)"
    )

    rp = sub.add_parser(
        "report",
        help="a postmortem report of an incident: one self-contained HTML page, or Markdown",
        description="Replay an incident and write a postmortem report: summary, charts of the evidence "
        "(SVG, drawn from the data), the walk, first and forbidden actions, blind spots, and the diagnosis "
        "timeline. FILE ending in .html gives one self-contained page (opens offline, prints); .md gives "
        "Markdown for wikis and tickets. SOURCE is a fixture, or --prometheus with --start/--end.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("fixture", nargs="?", metavar="FIXTURE", help="incident fixture (or use --prometheus)")
    rp.add_argument("-o", "--output", required=True, metavar="FILE", help="report file: .html or .md")
    rp.add_argument("--every", default="1m", metavar="DURATION", help="timeline step (default 1m)")
    rp.add_argument("--templates", metavar="DIR", help="your own report templates (searched first)")
    rp.add_argument("--start", metavar="T", help="live: RFC 3339 time, or a duration ago")
    rp.add_argument("--end", metavar="T", help="live: RFC 3339 time, or a duration ago (default now)")
    rp.add_argument("--step", metavar="DURATION", default="30s", help="live: resolution (default 30s)")
    rp.add_argument("--symptom", metavar="ID", help="live: symptom to start from (default auto)")
    add_playbook_option(rp)
    add_prometheus_options(rp)

    au = sub.add_parser(
        "audit",
        help="check a live fleet against the deployment checklist",
        description="Every item of the deployment checklist, in its own sections, with a status: pass, "
        "fail, unknown (cannot be seen from metrics: the evidence that would settle it is named) or "
        "not_applicable. Read from the metrics and from Prometheus's rules and targets APIs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 no item fails, 1 some item fails, 2 bad usage, 3 Prometheus could not be read.",
    )
    au.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    au.add_argument("--at", metavar="T", help="moment to audit: RFC 3339, or a duration ago (default now)")
    au.add_argument("--lookback", metavar="DURATION", default="6h", help="history to judge by (default 6h)")
    au.add_argument("--step", metavar="DURATION", default="1m", help="resolution (default 1m)")
    au.add_argument("--slo", metavar="FILE", help="SLO thresholds (as for triage rules)")
    add_prometheus_options(au, required=True)

    ca = sub.add_parser(
        "capacity",
        help="how many replicas: KV per token, memory budget, concurrency ceiling, replica count",
        description="The capacity method as a calculator: KV bytes per token from layers x KV heads x head "
        "dim x 2 x bytes per element; the per-GPU budget split into weights, KV, activations and fixed "
        "overhead; the concurrency ceiling as available KV / KV per request; replicas = peak rate / "
        "per-replica rate at SLO, rounded up, plus redundancy. The per-replica rate can be measured "
        "from a Prometheus (--prometheus): the highest rate a replica served within the SLOs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: triage capacity --model llama-3.1-8b --gpu h100-80gb --peak-rate 30 "
        "--per-replica-rate 4\n\na config file (--config) looks like:\n\n" + CAPACITY_EXAMPLE,
    )
    ca.add_argument("--config", metavar="FILE", help="inputs as YAML (flags override it)")
    ca.add_argument("--model", metavar="PRESET", help="model preset (see --list-presets)")
    ca.add_argument("--gpu", metavar="PRESET", help="GPU preset (see --list-presets)")
    ca.add_argument("--tp", type=int, metavar="N", help="tensor parallel size (default 1)")
    ca.add_argument("--weight-dtype", metavar="DTYPE", help="fp32 fp16 bf16 fp8 int8 int4 (default bf16)")
    ca.add_argument("--kv-dtype", metavar="DTYPE", help="auto fp16 bf16 fp8 int8 int4 (default auto)")
    ca.add_argument("--context", type=int, metavar="TOKENS", help="prompt + output tokens per request (4096)")
    ca.add_argument("--gpu-memory-utilization", type=float, metavar="F", help="default 0.90; red line 0.95")
    ca.add_argument("--activation-fraction", type=float, metavar="F", help="of the budget (default 0.05)")
    ca.add_argument("--overhead-gib", type=float, metavar="GIB", help="fixed per GPU (default 2)")
    ca.add_argument("--peak-rate", type=float, metavar="R", help="peak requests per second")
    ca.add_argument("--per-replica-rate", type=float, metavar="R", help="req/s one replica serves within SLO")
    ca.add_argument("--redundancy", type=int, metavar="N", help="extra replicas (default 1)")
    ca.add_argument(
        "--ttft-slo", type=float, default=1.0, metavar="S", help="for measuring: TTFT P99 SLO (1)"
    )
    ca.add_argument(
        "--tpot-slo", type=float, default=0.05, metavar="S", help="for measuring: TPOT P99 SLO (0.05)"
    )
    ca.add_argument(
        "--lookback", metavar="DURATION", default="7d", help="for measuring: history (default 7d)"
    )
    ca.add_argument("--at", metavar="T", help="for measuring: end of the history (default now)")
    ca.add_argument("--format", choices=("text", "json"), default="text")
    ca.add_argument("--list-presets", action="store_true", help="print the model and GPU presets and exit")
    add_prometheus_options(ca)

    p = sub.add_parser("playbooks", help="work with the playbooks")
    psub = p.add_subparsers(dest="playbooks_command", metavar="SUBCOMMAND")
    pc = psub.add_parser(
        "check",
        help="validate every playbook file, print every problem",
        description="Validate the playbooks: schema, references across files, reachability. "
        "Prints every problem as file:line: key: message; exit 1 if any.",
    )
    pc.add_argument("--first", action="store_true", help="stop at the first problem")
    add_playbook_option(pc)

    add_serve_parser(sub)
    for extension in extensions:
        extension.add(sub)
    return parser


def _at_arg(value: str | None, fixture: Fixture) -> float:
    if value is None:
        return fixture.at
    try:
        at = fixture.start + parse_duration(value) if is_offset(value) else parse_instant(value)
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from None
    if not fixture.frame.start <= at <= fixture.frame.end:
        raise UsageError(
            f"--at: {format_instant(at)} is outside the data "
            f"({format_instant(fixture.frame.start)} to {format_instant(fixture.frame.end)})"
        )
    return at


def _render(diagnosis: Diagnosis, args: argparse.Namespace, out: TextIO) -> None:
    if args.format == "json":
        out.write(to_json(diagnosis) + "\n")
    elif args.format == "markdown":
        out.write(to_markdown(diagnosis))
    else:
        out.write(to_text(diagnosis, color=use_color(out), verbose=args.verbose))


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise UsageError("give either --fixture PATH or --prometheus URL")
    graph = graph_from_args(args)
    symptom = symptom_arg(args.symptom, graph.knowledge)
    alert = read_alert(args.alert) if args.alert else None
    if alert is not None and symptom is None:
        symptom = symptom_from_alert(alert.labels, graph.knowledge)
        source = "alert" if symptom else "auto"
    else:
        source = "given" if symptom else "auto"
    if args.fixture:
        fixture = load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        at = _at_arg(args.at, fixture)
        if alert is not None and args.at is None and alert.starts_at is not None:
            at = _at_arg(format_instant(alert.starts_at), fixture)
        if symptom is None:
            chosen, source = fixture_symptom(fixture, None, graph.knowledge)
        else:
            chosen = symptom
        _render(diagnose(graph, fixture.frame, chosen, at, source=source), args, out)
        return EXIT_OK
    now = time.time()
    at = live_moment(args.at, now, "--at")
    if args.at is None and alert is not None and alert.starts_at is not None:
        at = alert.starts_at
    lookback = duration_arg(args.lookback, "--lookback")
    step = duration_arg(args.step, "--step")
    prometheus = prometheus_source(args)
    frame, report = fetch_frame(prometheus, catalog(args), query_options(args), at, lookback, step)
    diagnosis = diagnose(graph, frame, symptom or AUTO, frame.end, source=source)
    diagnosis = replace(diagnosis, signal_problems=tuple(sorted(report.problems().items())))
    _render(diagnosis, args, out)
    return EXIT_OK


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    graph = graph_from_args(args)
    fixture = load_checked_fixture(args.fixture, graph.knowledge)
    symptom, source = fixture_symptom(fixture, symptom_arg(args.symptom, graph.knowledge), graph.knowledge)
    try:
        every = parse_duration(args.every)
    except ValueError as exc:
        raise UsageError(f"--every: {exc}") from None
    if every < fixture.interval:
        raise UsageError(
            f"--every: {args.every} is shorter than the fixture's interval "
            f"({format_duration(fixture.interval)})"
        )
    steps = timeline(graph, fixture.frame, symptom, every, source=source)
    summary = summarise(steps)
    if args.format == "json":
        payload = {
            "fixture": fixture.name,
            "symptom": symptom,
            "summary": {
                "top_cause": summary.final_top,
                "onset": format_instant(summary.onset) if summary.onset is not None else None,
                "first_seen": format_instant(summary.first_seen) if summary.first_seen is not None else None,
                "settled": format_instant(summary.settled) if summary.settled is not None else None,
                "onset_to_settled_seconds": summary.onset_to_settled,
            },
            "steps": [
                {
                    "at": format_instant(s.at),
                    "symptom": s.diagnosis.symptom,
                    "causes": [
                        {"cause": c.cause, "score": round(c.score, 3)} for c in s.diagnosis.causes[:3]
                    ],
                }
                for s in steps
            ],
        }
        out.write(json.dumps(payload, indent=2) + "\n")
        return EXIT_OK
    out.write(f"{fixture.name}: {len(steps)} steps every {format_duration(every)}, symptom {symptom}\n")
    previous: tuple[str, ...] | None = None
    for s in steps:
        top3 = tuple(c.cause for c in s.diagnosis.causes[:3])
        if top3 == previous:
            continue
        previous = top3
        offset = format_duration(s.at - fixture.start)
        shown = ", ".join(f"{c.cause} {c.score:.2f}" for c in s.diagnosis.causes[:3]) or "no cause"
        out.write(f"  +{offset:>7}  {format_instant(s.at)[11:]}  {shown}\n")
    if summary.final_top is None:
        out.write("final: no cause ranked\n")
    else:
        line = f"final: {summary.final_top}"
        if summary.first_seen is not None:
            line += f"; first on top at +{format_duration(summary.first_seen - fixture.start)}"
        if summary.settled is not None:
            line += f", settled at +{format_duration(summary.settled - fixture.start)}"
        if summary.onset_to_settled is not None:
            line += f", {format_duration(summary.onset_to_settled)} after the onset"
        out.write(line + "\n")
    return EXIT_OK


def _fixture_paths(paths: Sequence[str]) -> list[str]:
    found: list[str] = []
    for raw in paths or ["fixtures"]:
        p = Path(raw)
        if p.is_dir():
            found.extend(str(f) for f in sorted(p.rglob("*.y*ml")) if f.suffix in (".yaml", ".yml"))
        elif p.exists():
            found.append(str(p))
        else:
            raise UsageError(f"{raw}: no such file or folder")
    return found


def cmd_test(args: argparse.Namespace, out: TextIO) -> int:
    graph = graph_from_args(args)
    paths = _fixture_paths(args.paths)
    if not paths:
        raise UsageError("no fixture files found")
    fmt = None
    if args.scorecard:
        try:
            fmt = scorecard_format(args.scorecard)
        except ValueError as exc:
            raise UsageError(f"--scorecard: {exc}") from None
    passed = failed = skipped = 0
    names: dict[str, str] = {}
    outcomes: list[FixtureOutcome] = []
    started = time.perf_counter()
    for path in paths:
        t0 = time.perf_counter()
        try:
            fixture = load_checked_fixture(path, graph.knowledge)
        except (InputError, InputErrors, SignalError) as exc:
            failed += 1
            outcomes.append(error_outcome(path, str(exc), elapsed=time.perf_counter() - t0))
            out.write(f"ERROR {path}\n")
            for line in str(exc).splitlines():
                out.write(f"    {line}\n")
            continue
        if fixture.name in names:
            failed += 1
            problem = f"name '{fixture.name}' is also used by {names[fixture.name]}"
            outcomes.append(error_outcome(path, problem, name=fixture.name))
            out.write(f"ERROR {path}\n    {problem}\n")
            continue
        names[fixture.name] = path
        if fixture.expect is None:
            skipped += 1
            if not args.quiet:
                out.write(f"SKIP  {path} (no expect block)\n")
            continue
        symptom, source = fixture_symptom(fixture, None, graph.knowledge)
        diagnosis = diagnose(graph, fixture.frame, symptom, fixture.at, source=source)
        result = check_expect(diagnosis, fixture.expect)
        outcomes.append(
            outcome_for(graph, fixture, diagnosis, None if fmt else (), elapsed=time.perf_counter() - t0)
        )
        top = diagnosis.top.cause if diagnosis.top else "no cause"
        if result.passed:
            passed += 1
            if not args.quiet:
                out.write(f"PASS  {path}  {diagnosis.symptom} -> {top}\n")
        else:
            failed += 1
            out.write(f"FAIL  {path}  {diagnosis.symptom} -> {top}\n")
            for problem in result.problems:
                out.write(f"    {problem}\n")
    elapsed = time.perf_counter() - started
    if args.junit:
        write_output(args.junit, render_junit(outcomes, elapsed), "--junit")
    if args.scorecard and fmt:
        write_output(args.scorecard, render_scorecard(outcomes, fmt, time.time()), "--scorecard")
    out.write(f"\n{passed} passed, {failed} failed, {skipped} skipped without expect ({elapsed:.1f}s)\n")
    return EXIT_FAILED if failed else EXIT_OK


def unprovable_causes(kb: Knowledge, blind: set[str]) -> dict[str, list[str]]:
    """Causes with a required check whose every signal is blind, and those signals."""
    out: dict[str, list[str]] = {}
    for cid, cause in sorted(kb.causes.items()):
        for entry in cause.requires:
            members = entry.any if isinstance(entry, AnyOf) else (entry,)
            signals = [s for m in members for s in m.signals()]
            if signals and all(s in blind for s in signals):
                out.setdefault(cid, []).extend(s for s in signals if s not in out.get(cid, []))
    return out


def cmd_signals_check(args: argparse.Namespace, out: TextIO) -> int:
    kb = load_playbooks(args.playbooks)
    prometheus = prometheus_source(args)
    names = prometheus.metric_names()
    resolutions = resolve(catalog(args), names)
    blind = {name for name, r in resolutions.items() if r.blind}
    unprovable = unprovable_causes(kb, blind)
    deprecated = sorted({n for r in resolutions.values() for n in r.deprecated_in_use})
    if args.format == "json":
        payload = {
            "server": prometheus.url,
            "metric_names": len(names),
            "signals": {
                name: {
                    "replica": r.replica.source if r.replica else None,
                    "fleet": r.fleet.source if r.fleet else None,
                    "blind": r.blind,
                    "deprecated_in_use": list(r.deprecated_in_use),
                }
                for name, r in sorted(resolutions.items())
            },
            "unprovable_causes": unprovable,
            "deprecated_in_use": deprecated,
        }
        out.write(json.dumps(payload, indent=2) + "\n")
        return EXIT_OK
    out.write(
        f"{prometheus.url}: {len(names)} metric names; {len(resolutions) - len(blind)} of "
        f"{len(resolutions)} signals resolved\n"
    )
    width = max(len(n) for n in resolutions)
    for name, r in sorted(resolutions.items()):
        if r.blind:
            status = "BLIND"
        else:
            replica = r.replica.source if r.replica else "-"
            fleet = r.fleet.source if r.fleet else "-"
            status = f"replica: {replica}, fleet: {fleet}"
        if r.deprecated_in_use:
            status += f"  (deprecated names in use: {', '.join(r.deprecated_in_use)})"
        out.write(f"  {name:<{width}}  {status}\n")
    if unprovable:
        out.write("causes left unprovable (a required check reads only blind signals):\n")
        for cause, signals in unprovable.items():
            out.write(f"  {cause}: needs {', '.join(signals)}\n")
    else:
        out.write("every cause can be proven from what this server has\n")
    if deprecated:
        out.write(f"deprecated metric names in use: {', '.join(deprecated)} (renamed in vLLM 0.9-0.11)\n")
    return EXIT_OK


def cmd_capture(args: argparse.Namespace, out: TextIO) -> int:
    now = time.time()
    start = live_moment(args.start, now, "--start")
    end = live_moment(args.end, now, "--end")
    if end <= start:
        raise UsageError("--end must be after --start")
    step = duration_arg(args.step, "--step")
    if (end - start) / step > 11_000:
        raise UsageError("--step: Prometheus answers at most 11,000 points per series; use a larger step")
    kb = load_playbooks(args.playbooks)
    symptom = symptom_arg(args.symptom, kb)
    prometheus = prometheus_source(args)
    frame, report = fetch_frame(prometheus, catalog(args), query_options(args), end, end - start, step)
    name = Path(args.output).stem
    doc = frame_to_fixture(
        frame,
        name,
        f"captured from {prometheus.url} at {format_instant(now)}",
        symptom=symptom if symptom != AUTO else None,
    )
    try:
        Path(args.output).write_text(dump_fixture(doc), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--output: cannot write {args.output}: {exc.strerror}") from None
    blind = sorted(s for s, st in report.statuses.items() if st.blind)
    out.write(
        f"wrote {args.output}: {len(frame.series)} series of {len(frame.signals())} signals, "
        f"{len(frame.times)} steps of {format_duration(step)}\n"
    )
    for signal, reason in sorted(report.problems().items()):
        out.write(f"  unreadable: {signal}: {reason}\n")
    if blind:
        out.write(f"  blind: {', '.join(blind)}\n")
    out.write("add an expect block to make it a regression test\n")
    return EXIT_OK


def cmd_rules(args: argparse.Namespace, out: TextIO) -> int:
    text = render_rules(load_catalog(args.catalog), load_slo(args.slo), query_options(args))
    if not args.output:
        out.write(text)
        return EXIT_OK
    target = Path(args.output)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise UsageError(f"-o {args.output}: {exc.strerror}") from None
    count = sum(1 for line in text.splitlines() if line.lstrip().startswith(("- record:", "- alert:")))
    sys.stderr.write(
        f"triage: wrote {count} rules to {args.output} (check with: promtool check rules {args.output})\n"
    )
    return EXIT_OK


def _live_fixture(args: argparse.Namespace, kb: Knowledge) -> Fixture:
    """Capture [start, end] from a live Prometheus into an in-memory fixture."""
    if not args.start:
        raise UsageError("--start is needed with --prometheus")
    now = time.time()
    start = live_moment(args.start, now, "--start")
    end = live_moment(args.end, now, "--end")
    if end <= start:
        raise UsageError("--end must be after --start")
    step = duration_arg(args.step, "--step")
    symptom = symptom_arg(args.symptom, kb)
    prometheus = prometheus_source(args)
    frame, _ = fetch_frame(prometheus, catalog(args), query_options(args), end, end - start, step)
    doc = frame_to_fixture(
        frame,
        Path(args.output).stem,
        f"captured from {prometheus.url}",
        symptom=symptom if symptom not in (None, AUTO) else None,
    )
    return fixture_from_document(parse_yaml(dump_fixture(doc), f"{prometheus.url} (capture)"))


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise UsageError("give either a FIXTURE or --prometheus URL with --start and --end")
    suffix = Path(args.output).suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".markdown"):
        raise UsageError(f"-o {args.output}: the report is .html or .md")
    fmt: Literal["html", "md"] = "html" if suffix in (".html", ".htm") else "md"
    templates = Path(args.templates) if args.templates else None
    if templates is not None and not templates.is_dir():
        raise UsageError(f"--templates: {templates} is not a folder")
    graph = graph_from_args(args)
    if args.fixture:
        fixture = load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
    else:
        fixture = _live_fixture(args, graph.knowledge)
    every = duration_arg(args.every, "--every")
    if every < fixture.interval:
        raise UsageError(
            f"--every: {args.every} is shorter than the data's step ({format_duration(fixture.interval)})"
        )
    report = build_report(graph, fixture, every, generated_at=time.time())
    try:
        text = render_report(report, fmt, templates)
    except jinja2.TemplateError as exc:
        where = f"{exc.filename}:{exc.lineno}: " if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        raise UsageError(f"--templates: {where}{exc}") from None
    write_output(args.output, text, "-o")
    out.write(f"wrote {args.output} ({len(text.encode()) / 1e6:.2f} MB)\n")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    at = live_moment(args.at, time.time(), "--at")
    settings = AuditSettings.from_slo(
        load_slo(args.slo),
        lookback=duration_arg(args.lookback, "--lookback"),
        step=duration_arg(args.step, "--step"),
    )
    report = run_audit(prometheus_source(args), catalog(args), query_options(args), at, settings)
    if report.nothing_readable:
        reasons = "; ".join(f"{k}: {v}" for k, v in sorted(report.problems.items())[:3])
        raise SignalError(f"{args.prometheus}: nothing could be read ({reasons})")
    out.write(render_audit(report, args.format))
    return EXIT_FAILED if report.counts().get("fail", 0) else EXIT_OK


def cmd_capacity(args: argparse.Namespace, out: TextIO) -> int:
    if args.list_presets:
        out.write(render_presets())
        return EXIT_OK
    flags = {
        "model": args.model,
        "gpu": args.gpu,
        "tp": args.tp,
        "weight_dtype": args.weight_dtype,
        "kv_dtype": args.kv_dtype,
        "context_tokens": args.context,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "activation_fraction": args.activation_fraction,
        "overhead_gib": args.overhead_gib,
        "peak_rate": args.peak_rate,
        "per_replica_rate": args.per_replica_rate,
        "redundancy": args.redundancy,
    }
    inputs = load_capacity_inputs(args.config, flags)
    if args.prometheus:
        lookback = duration_arg(args.lookback, "--lookback")
        step = max(60.0, lookback / 10_000)
        at = live_moment(args.at, time.time(), "--at")
        frame, _ = fetch_frame(
            prometheus_source(args), catalog(args), query_options(args), at, lookback, step
        )
        measured = measure_rate_at_slo(frame, args.ttft_slo, args.tpot_slo)
        if measured is None:
            raise SignalError("no replica served traffic within the SLOs in the window: nothing to measure")
        inputs = replace(inputs, per_replica_rate=measured.rate, per_replica_rate_source=measured.describe())
    result = capacity_plan(inputs)
    if args.format == "json":
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        out.write(render_capacity(result))
    return EXIT_OK


def cmd_playbooks_check(args: argparse.Namespace, out: TextIO) -> int:
    directory = args.playbooks or default_playbook_dir()
    try:
        kb = load_playbooks(directory, stop_at_first=args.first)
    except InputErrors as exc:
        for problem in exc.problems:
            out.write(f"{problem}\n")
        count = len(exc.problems)
        sys.stderr.write(f"{count} problem{'s' if count != 1 else ''} in {directory}\n")
        return EXIT_FAILED
    graph = build_graph(kb)
    out.write(
        f"{directory}: ok: {len(kb.symptoms)} symptoms, {len(kb.causes)} causes, "
        f"{len(kb.actions)} actions, {len(kb.forbidden)} forbidden actions, "
        f"{graph.graph.number_of_nodes()} nodes, {graph.graph.number_of_edges()} edges\n"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None, extensions: Sequence[Extension] = ()) -> int:
    parser = build_parser(extensions)
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        for extension in extensions:
            if args.command == extension.name:
                return extension.run(args, out)
        if args.command == "diagnose":
            return cmd_diagnose(args, out)
        if args.command == "replay":
            return cmd_replay(args, out)
        if args.command == "test":
            return cmd_test(args, out)
        if args.command == "signals" and args.signals_command == "check":
            return cmd_signals_check(args, out)
        if args.command == "capture":
            return cmd_capture(args, out)
        if args.command == "rules":
            return cmd_rules(args, out)
        if args.command == "report":
            return cmd_report(args, out)
        if args.command == "capacity":
            return cmd_capacity(args, out)
        if args.command == "audit":
            return cmd_audit(args, out)
        if args.command == "playbooks" and args.playbooks_command == "check":
            return cmd_playbooks_check(args, out)
        if args.command == "serve":
            return run_serve(args)
        if args.command in ("playbooks", "signals"):
            parser.parse_args([args.command, "--help"])
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    except (InputError, InputErrors) as exc:
        for line in str(exc).splitlines():
            sys.stderr.write(f"triage: {line}\n")
        return EXIT_USAGE
    except (UsageError, SourceArgError) as exc:
        sys.stderr.write(f"triage: {exc}\n")
        return EXIT_USAGE
    except SignalError as exc:
        sys.stderr.write(f"triage: {exc}\n")
        return EXIT_UNAVAILABLE
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("triage: interrupted\n")
        return 130
    except Exception as exc:
        if os.environ.get("TRIAGE_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(
            f"triage: internal error: {type(exc).__name__}: {exc} "
            "(set TRIAGE_DEBUG=1 for details; please report it)\n"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
