"""`triage tui`, and the console script that adds it to the core's commands.

The core's CLI may not import the TUI, so the `triage` console script starts here: it
runs `triage.cli.main` with the `tui` subcommand handed in. This module builds the
`tui` parser with argparse alone; the app, Textual and what a replay or a live view
needs are `tui.launch`, imported when `triage tui` runs, so every other command (and
every `--help`) starts without them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from triage.cli import main as core
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


THEMES = {"dark": "textual-dark", "light": "textual-light"}


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
        choices=sorted(THEMES),
        default="dark",
        help="colours for a dark or a light terminal (default dark; ctrl+p switches on screen)",
    )
    add_prometheus_options(p)
    add_playbook_option(p)


TUI = core.Extension("tui", add_tui_parser, "tui.launch:run_tui")


def prepare_process() -> None:
    """What the console script settles before any command loads its libraries.

    numpy's OpenBLAS starts a pool of threads as numpy loads, tens of milliseconds of every
    start on a busy 2-core machine, for linear algebra this tool never does: one thread,
    unless the environment already says how many.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    """The `triage` console script: the core's commands plus `tui`."""
    prepare_process()
    return core.main(argv, extensions=(TUI,))


if __name__ == "__main__":
    sys.exit(main())
