"""`triage rules`: the Prometheus recording and alerting rules that feed the triage.

The recording rules give each vocabulary signal one name whatever the engine flavour;
the alerting rules carry a `symptom` label, so an alert reaches `triage serve` or
`triage diagnose --alert` already saying where the walk starts. Every series and alert
is per fleet (`--fleet-labels`, as the live commands name fleets), so an alert also says
which fleet it is about; an empty `--fleet-labels` writes the rules of a single fleet.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from signals.catalog import load_catalog
from triage.cli import common
from triage.cli.handlers import sourceargs
from triage.rules import load_slo
from triage.rules.render import render_rules


def cmd_rules(args: argparse.Namespace, out: TextIO) -> int:
    labels = sourceargs.fleet_labels(args) if str(args.fleet_labels).strip() else ()
    text = render_rules(
        load_catalog(args.catalog), load_slo(args.slo), sourceargs.query_options(args), labels
    )
    if not args.output:
        out.write(text)
        return common.EXIT_OK
    target = Path(args.output)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise common.UsageError(f"-o {args.output}: {exc.strerror}") from None
    count = sum(1 for line in text.splitlines() if line.lstrip().startswith(("- record:", "- alert:")))
    sys.stderr.write(
        f"triage: wrote {count} rules to {args.output} (check with: promtool check rules {args.output})\n"
    )
    return common.EXIT_OK
