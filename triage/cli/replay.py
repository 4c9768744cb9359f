"""`triage replay`: the diagnosis as it would have read at each step through a recorded incident.

Its arguments and help; what it runs is `triage.cli.handlers.replay`.
"""

from __future__ import annotations

from triage.cli import common


def add_parser(sub: common.Subparsers) -> None:
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
    common.add_playbook_option(r)


COMMAND = common.Command("replay", add_parser, "triage.cli.handlers.replay:cmd_replay")
