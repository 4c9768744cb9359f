"""The `triage` command line: validate input, build sources, call the core, print.

Stdout carries the product (the diagnosis, the timeline, the test report); stderr
carries diagnostics. Every input problem is one `file:line: key: message` line and exit
code 2; nothing reaches the user as a traceback (set TRIAGE_DEBUG=1 to see one).

The layer above (the TUI's console script) reaches the command line through this module
alone, so the shared pieces it builds its own command from are re-exported here.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from signals.errors import InputError, InputErrors, SignalError
from triage import __version__
from triage.capacity import EXAMPLE_FILE as CAPACITY_EXAMPLE
from triage.cli.audit import cmd_audit
from triage.cli.capacity import cmd_capacity
from triage.cli.capture import cmd_capture
from triage.cli.common import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    UsageError,
    add_playbook_option,
    graph_from_args,
    load_checked_fixture,
    symptom_arg,
)
from triage.cli.diagnose import cmd_diagnose
from triage.cli.playbooks import cmd_playbooks_check
from triage.cli.replay import cmd_replay
from triage.cli.report import cmd_report
from triage.cli.rules import cmd_rules
from triage.cli.signals import cmd_signals_check
from triage.cli.sourceargs import SourceArgError, add_prometheus_options
from triage.cli.testrun import cmd_test
from triage.service.command import add_serve_parser, run_serve

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
