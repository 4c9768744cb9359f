"""`triage rules`: the Prometheus recording and alerting rules that feed the triage.

The recording rules give each vocabulary signal one name whatever the engine flavour;
the alerting rules carry a `symptom` label, so an alert reaches `triage serve` or
`triage diagnose --alert` already saying where the walk starts. Every series and alert
is per fleet (`--fleet-labels`, as the live commands name fleets), so an alert also says
which fleet it is about; an empty `--fleet-labels` writes the rules of a single fleet.
`--format prometheusrule` writes the same groups as a Prometheus Operator object, named
by `--name`, `--namespace` and `--labels` (which mean nothing to a rule file, so they
are refused without it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from signals.catalog import load_catalog
from triage.cli import common
from triage.inputs import sources as sourceargs
from triage.rules import load_slo
from triage.rules.operator import (
    DEFAULT_NAME,
    MetadataError,
    ObjectMeta,
    parse_labels,
    render_prometheus_rule,
)
from triage.rules.render import render_rules, rule_file

OBJECT_FLAGS = ("name", "namespace", "labels")


def object_meta(args: argparse.Namespace) -> ObjectMeta | None:
    """The PrometheusRule's metadata from its flags; None for a rule file, which takes none."""
    given = [f"--{flag}" for flag in OBJECT_FLAGS if getattr(args, flag) is not None]
    if args.format != "prometheusrule":
        if given:
            raise common.UsageError(
                f"{', '.join(given)}: only with --format prometheusrule (a rule file has no metadata)"
            )
        return None
    try:
        labels = parse_labels(args.labels or "")
        name = DEFAULT_NAME if args.name is None else args.name
        return ObjectMeta(name=name, namespace=args.namespace, labels=labels)
    except MetadataError as exc:
        raise common.UsageError(f"--{exc.field}: {exc.problem}") from None


def cmd_rules(args: argparse.Namespace, out: TextIO) -> int:
    meta = object_meta(args)
    labels = sourceargs.fleet_labels(args) if str(args.fleet_labels).strip() else ()
    catalog, slo, options = load_catalog(args.catalog), load_slo(args.slo), sourceargs.query_options(args)
    if meta is None:
        text = render_rules(catalog, slo, options, labels)
    else:
        text = render_prometheus_rule(rule_file(catalog, slo, options, labels), meta)
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
    if meta is None:
        written, check = "", f"promtool check rules {args.output}"
    else:
        where = f"{meta.namespace}/" if meta.namespace else ""
        written, check = (
            f" as PrometheusRule {where}{meta.name}",
            f"kubectl apply --dry-run=server -f {args.output}",
        )
    sys.stderr.write(f"triage: wrote {count} rules to {args.output}{written} (check with: {check})\n")
    return common.EXIT_OK
