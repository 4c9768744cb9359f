"""`triage signals check`: what a live Prometheus can tell, found out before an incident needs it.

Its arguments and help; what it runs is `triage.cli.handlers.signalcheck`.
"""

from __future__ import annotations

from triage.cli import common
from triage.inputs import options as sourceoptions


def add_parser(sub: common.Subparsers) -> None:
    sg = sub.add_parser("signals", help="what a live Prometheus can tell")
    sgsub = sg.add_subparsers(dest="signals_command", metavar="SUBCOMMAND")
    sc = sgsub.add_parser(
        "check",
        help="resolve every signal against a Prometheus: its source, or blind",
        description="For every vocabulary signal, the source it resolves to on the server, or that it is "
        "blind, and which causes that leaves unprovable. Deprecated metric names in use are reported.",
    )
    sc.add_argument("--format", choices=("text", "json"), default="text")
    sc.add_argument("--at", metavar="T", help="with --fleet: when to find the fleet (default now)")
    common.add_playbook_option(sc)
    sourceoptions.add_prometheus_options(sc, required=True)


COMMAND = common.Command("signals", add_parser, "triage.cli.handlers.signalcheck:run")
