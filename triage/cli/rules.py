"""`triage rules`: the Prometheus recording and alerting rules that feed the triage.

The recording rules give each vocabulary signal one name whatever the engine flavour;
the alerting rules carry a `symptom` label, so an alert reaches `triage serve` or
`triage diagnose --alert` already saying where the walk starts. Every series and alert
is per fleet (`--fleet-labels`, as the live commands name fleets), so an alert also says
which fleet it is about; an empty `--fleet-labels` writes the rules of a single fleet.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from signals.catalog import load_catalog
from signals.fleets import DEFAULT_FLEET_LABELS
from triage.cli import common, sourceargs
from triage.rules import load_slo, render_rules


def add_parser(sub: common.Subparsers) -> None:
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
        "--fleet-labels",
        metavar="L,L",
        default=",".join(DEFAULT_FLEET_LABELS),
        help=f"the engine labels that name a fleet (default {','.join(DEFAULT_FLEET_LABELS)}): every series "
        "and alert is recorded per fleet and carries them; '' for the rules of a single fleet",
    )
    ru.add_argument(
        "--catalog", metavar="FILE", action="append", default=[], help="extra signal catalog file(s)"
    )


def cmd_rules(args: argparse.Namespace, out: TextIO) -> int:
    labels = sourceargs.fleet_labels(args) if str(args.fleet_labels).strip() else ()
    text = render_rules(
        load_catalog(args.catalog), load_slo(args.slo), sourceargs.query_options(args), labels
    )
    if not args.output:
        out.write(text)
        return common.EXIT_OK
    target = Path(args.output)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise common.UsageError(f"-o {args.output}: {exc.strerror}") from None
    count = sum(1 for line in text.splitlines() if line.lstrip().startswith(("- record:", "- alert:")))
    sys.stderr.write(
        f"triage: wrote {count} rules to {args.output} (check with: promtool check rules {args.output})\n"
    )
    return common.EXIT_OK


COMMAND = common.Command("rules", add_parser, cmd_rules)
