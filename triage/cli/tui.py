"""`triage tui`: its arguments and help (standard library only); `tui.launch` runs it.

The command line names the handler and imports it only when `triage tui` runs, as every
command's; the TUI itself imports nothing of the command line, its inputs come from
`triage.inputs`, below both.
"""

from __future__ import annotations

import argparse

from triage.cli import common
from triage.inputs.options import add_playbook_option, add_prometheus_options

EPILOG = """\
examples:
  triage tui --fixture fixtures/kv-pressure-long-context.yaml      # replay: ←/→ move the cursor
  triage tui --prometheus http://prometheus:9090 --fleet llm/meta-llama/Llama-3.1-8B-Instruct
  triage tui --prometheus http://prometheus:9090 --selector '{namespace="llm"}'   # f picks a fleet
  triage tui --prometheus URL --alertmanager http://alertmanager:9093 --service http://triage:8080

keys: ? every key · q quit · 1/2/3 tabs · s symptom · enter chart the selection · c copy
      replay: ←/→ one step · shift+←/→ ten minutes · o onset · space play/pause
      live: r refresh · f fleet (the picker opens by itself when the server holds several)
NO_COLOR=1 turns colour off.
"""


THEMES = ("dark", "light")
"""The colour themes; the TUI runs Textual's theme of the same name (`textual-dark`, ...)."""


def add_tui_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tui",
        help="the on-call terminal UI: the picture, the walk, the evidence and the actions",
        description="The on-call terminal UI. Replay a recorded incident with a time cursor "
        "(--fixture), or watch a live Prometheus refresh every 15 s (--prometheus).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--fixture", metavar="PATH", help="replay a recorded incident (YAML)")
    p.add_argument(
        "--symptom",
        metavar="ID",
        help="where to start: ttft_slow, tpot_slow, errors, rejected, cost_up, quality_down or auto "
        "(default: the fixture's, else auto); switch on screen with s",
    )
    p.add_argument("--refresh", metavar="DURATION", default="15s", help="live refresh period (default 15s)")
    p.add_argument("--lookback", metavar="DURATION", default="2h", help="live: history to fetch (default 2h)")
    p.add_argument("--step", metavar="DURATION", default="30s", help="live: resolution (default 30s)")
    p.add_argument("--alertmanager", metavar="URL", help="list firing alerts from this Alertmanager (v2 API)")
    p.add_argument("--service", metavar="URL", help="attach annotations from a `triage serve` service")
    p.add_argument("--service-token-file", metavar="FILE", help="bearer token file for --service")
    p.add_argument("--slo", metavar="FILE", help="SLO file for the red lines (default: the bundled one)")
    p.add_argument(
        "--theme",
        choices=THEMES,
        default="dark",
        help="colours for a dark or a light terminal (default dark; ctrl+p switches on screen)",
    )
    add_prometheus_options(p)
    add_playbook_option(p)


COMMAND = common.Command("tui", add_tui_parser, "tui.launch:run_tui")
