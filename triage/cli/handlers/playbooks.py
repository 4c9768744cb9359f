"""`triage playbooks check`: validate the knowledge before it is used.

A broken playbook fails loudly at review time instead of misleading during an
incident: every problem as `file:line: key: message`, exit 1 if any.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from signals.errors import InputErrors
from triage.cli import common
from triage.core.digraph import decision_digraph
from triage.sources import default_playbook_dir, load_playbooks


def cmd_playbooks_check(args: argparse.Namespace, out: TextIO) -> int:
    directory = args.playbooks or default_playbook_dir()
    try:
        kb = load_playbooks(directory, stop_at_first=args.first)
    except InputErrors as exc:
        for problem in exc.problems:
            out.write(f"{problem}\n")
        count = len(exc.problems)
        sys.stderr.write(f"{count} problem{'s' if count != 1 else ''} in {directory}\n")
        return common.EXIT_FAILED
    graph = decision_digraph(kb)
    out.write(
        f"{directory}: ok: {len(kb.symptoms)} symptoms, {len(kb.causes)} causes, "
        f"{len(kb.actions)} actions, {len(kb.forbidden)} forbidden actions, "
        f"{graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges\n"
    )
    return common.EXIT_OK


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.playbooks_command == "check":
        return cmd_playbooks_check(args, out)
    raise common.MissingSubcommand
