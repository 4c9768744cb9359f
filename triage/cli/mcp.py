"""`triage mcp`: the diagnosis, the fleets, the audit and the playbooks as Model Context Protocol tools.

Its arguments and help; what it runs is `triage.cli.handlers.mcp`.
"""

from __future__ import annotations

import argparse

from triage.cli import common
from triage.inputs import options as sourceoptions

TOOLS = (
    ("fleets", "the fleets the server's Prometheus holds (as `triage fleets --format json`)"),
    ("diagnose", "the diagnosis at one moment, from a fixture or live (as `triage diagnose --format json`)"),
    ("replay", "a fixture diagnosed at every step (as `triage replay --format json`)"),
    ("signals_check", "every signal resolved against the Prometheus (as `triage signals check`)"),
    ("audit", "the live fleet against the deployment checklist (as `triage audit --format json`)"),
    ("explain_cause", "a cause's mechanism, checks, first actions and forbidden actions, by id"),
)
"""The server's tools, named as a client calls them, in the order the help lists them."""

EPILOG = (
    "tools:\n"
    + "".join(f"  {name:<14} {what}\n" for name, what in TOOLS)
    + """
Every tool is read-only and answers with the same JSON as the command's --format json.
The Prometheus URL and its credentials come only from these options (or
$TRIAGE_PROMETHEUS_TOKEN), never from a tool's arguments; without --prometheus the live
tools say how to configure it, and the fixture tools still work.

client configuration (Claude Desktop's claude_desktop_config.json; VS Code's
.vscode/mcp.json takes the same entry under "servers"):
  {"mcpServers": {"llm-triage": {"command": "triage",
    "args": ["mcp", "--prometheus", "http://prometheus:9090", "--token-file", "/etc/triage/token"]}}}

examples:
  triage mcp                                              # fixtures and playbooks only
  triage mcp --prometheus http://prometheus:9090 --selector '{namespace="llm"}'

It speaks MCP over stdin and stdout; logs go to stderr. See docs/mcp.md.
"""
)


def add_parser(sub: common.Subparsers) -> None:
    m = sub.add_parser(
        "mcp",
        help="serve the diagnosis and the playbooks to AI assistants (Model Context Protocol, stdio)",
        description="A Model Context Protocol server over stdio. An AI assistant (Claude Desktop, VS Code,\n"
        "any MCP client) lists the fleets, diagnoses a fixture or the live server, replays an\n"
        "incident, checks the signals, audits the fleet and reads a cause's playbook; every answer\n"
        "is the JSON the matching command prints with --format json.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    m.add_argument("--slo", metavar="FILE", help="SLO thresholds for the audit tool (as for triage audit)")
    common.add_playbook_option(m)
    sourceoptions.add_prometheus_options(m)


COMMAND = common.Command("mcp", add_parser, "triage.cli.handlers.mcp:cmd_mcp")
