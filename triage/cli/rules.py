"""`triage rules`: the Prometheus recording and alerting rules that feed the triage.

Its arguments and help; what it runs is `triage.cli.handlers.rules`.
"""

from __future__ import annotations

import argparse

from signals.vocabulary import DEFAULT_FLEET_LABELS
from triage.cli import common


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


COMMAND = common.Command("rules", add_parser, "triage.cli.handlers.rules:cmd_rules")
