"""`triage serve`: the Alertmanager webhook service, among the commands.

Its options are `triage.service.command` (argparse only) and its run loop
`triage.service.launch`, imported when the service runs, so every other command starts
without the web stack.
"""

from __future__ import annotations

from triage.cli import common
from triage.service.command import add_serve_parser

COMMAND = common.Command("serve", add_serve_parser, "triage.service.launch:run_serve")
