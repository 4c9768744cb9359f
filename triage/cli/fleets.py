"""`triage fleets`: the fleets one Prometheus holds, and how each exporter was joined to them.

Its arguments and help; what it runs is `triage.cli.handlers.fleets`.
"""

from __future__ import annotations

import argparse

from triage.cli import common
from triage.inputs import options as sourceoptions


def add_parser(sub: common.Subparsers) -> None:
    fl = sub.add_parser(
        "fleets",
        help="list the fleets a Prometheus holds and how every exporter joins to them",
        description="Each fleet (the replicas serving one model in one workload): engine, model, "
        "namespace, workload, replicas seen by each exporter, GPUs joined and how, signals blind for "
        "that fleet, and every join that failed with its reason. Its names are what --fleet takes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  triage fleets --prometheus http://prometheus:9090\n"
        "  triage diagnose --prometheus http://prom:9090 --fleet 'llm/meta-llama/Llama-3.1-8B-Instruct'\n"
        "  triage diagnose --prometheus http://prom:9090 --fleet namespace=llm,model_name=qwen",
    )
    fl.add_argument("--format", choices=("text", "json"), default="text")
    fl.add_argument("--at", metavar="T", help="RFC 3339 time, or a duration ago (default now)")
    fl.add_argument(
        "--lookback", metavar="DURATION", default="1h", help="a replica seen in this window counts (1h)"
    )
    sourceoptions.add_prometheus_options(fl, required=True)


COMMAND = common.Command("fleets", add_parser, "triage.cli.handlers.fleets:cmd_fleets")
