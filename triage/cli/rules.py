"""`triage rules`: the Prometheus recording and alerting rules that feed the triage.

Its arguments and help; what it runs is `triage.cli.handlers.rules`.
"""

from __future__ import annotations

import argparse

from signals.vocabulary import DEFAULT_FLEET_LABELS
from triage.cli import common

EPILOG = """\
validate the output with: promtool check rules FILE

for the Prometheus Operator, the same groups as a PrometheusRule object; its labels are
what the Prometheus resource's ruleSelector matches (kube-prometheus-stack: release=<release>):
  triage rules --format prometheusrule --name llm-triage --namespace monitoring \\
      --labels release=prometheus -o triage-rules.yaml
  kubectl apply --dry-run=server -f triage-rules.yaml
"""


def add_parser(sub: common.Subparsers) -> None:
    ru = sub.add_parser(
        "rules",
        help="Prometheus recording and alerting rules that feed the triage",
        description="Write Prometheus rules: the catalog as triage:<signal> recording rules (the or of every "
        "flavour's query), and alerting rules that start the triage, each with a symptom label. "
        "P99 TTFT and P99 TPOT alert separately, never on the mean. --format prometheusrule writes the "
        "same groups as a PrometheusRule object for the Prometheus Operator.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
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
        "--format",
        choices=("rules", "prometheusrule"),
        default="rules",
        help="rules: a Prometheus rule file (default); prometheusrule: a Kubernetes PrometheusRule "
        "object for the Prometheus Operator, holding the same groups",
    )
    ru.add_argument(
        "--name",
        metavar="NAME",
        help="with --format prometheusrule: the object's name, a DNS-1123 subdomain (default llm-triage)",
    )
    ru.add_argument(
        "--namespace",
        metavar="NS",
        help="with --format prometheusrule: the object's namespace (default: none written, "
        "so kubectl apply -n NS places it)",
    )
    ru.add_argument(
        "--labels",
        metavar="K=V,K=V",
        help="with --format prometheusrule: the object's labels, for the Prometheus resource's "
        "ruleSelector, e.g. release=prometheus",
    )
    ru.add_argument(
        "--catalog", metavar="FILE", action="append", default=[], help="extra signal catalog file(s)"
    )


COMMAND = common.Command("rules", add_parser, "triage.cli.handlers.rules:cmd_rules")
