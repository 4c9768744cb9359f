"""`triage playbooks check`: validate the knowledge before it is used.

Its arguments and help; what it runs is `triage.cli.handlers.playbooks`.
"""

from __future__ import annotations

from triage.cli import common


def add_parser(sub: common.Subparsers) -> None:
    p = sub.add_parser("playbooks", help="work with the playbooks")
    psub = p.add_subparsers(dest="playbooks_command", metavar="SUBCOMMAND")
    pc = psub.add_parser(
        "check",
        help="validate every playbook file, print every problem",
        description="Validate the playbooks: schema, references across files, reachability. "
        "Prints every problem as file:line: key: message; exit 1 if any.",
    )
    pc.add_argument("--first", action="store_true", help="stop at the first problem")
    common.add_playbook_option(pc)


COMMAND = common.Command("playbooks", add_parser, "triage.cli.handlers.playbooks:run")
