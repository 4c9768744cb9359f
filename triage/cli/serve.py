"""`triage serve`: the Alertmanager webhook service, among the commands.

Its options and run loop live in `triage.service.command`, which imports the web stack
only when the service runs, so every other command starts without it.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from triage.cli import common
from triage.service.command import add_serve_parser, run_serve


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    return run_serve(args)


COMMAND = common.Command("serve", add_serve_parser, cmd_serve)
