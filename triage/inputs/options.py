"""Options for a live Prometheus source, shared by every live command and the TUI, and the
playbooks option.

Only the options: reading them into a source is `triage.inputs.sources`, which the
commands import when they run. Secrets come from flags, files or the environment
(`TRIAGE_PROMETHEUS_TOKEN`), never echoed back; a file is preferred because flags show
up in `ps`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from signals.vocabulary import DEFAULT_FLEET_LABELS, DEFAULT_MAX_SERIES

TOKEN_ENV = "TRIAGE_PROMETHEUS_TOKEN"


def add_prometheus_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    group = parser.add_argument_group(
        "live signals (any Prometheus-compatible API: Prometheus, Thanos, Mimir)"
    )
    group.add_argument(
        "--prometheus", metavar="URL", required=required, help="base URL, e.g. http://prometheus:9090"
    )
    group.add_argument(
        "--selector",
        metavar="S",
        default="",
        help="label matchers for every query, e.g. '{namespace=\"llm\"}'",
    )
    group.add_argument(
        "--replica-label",
        metavar="L",
        default="instance",
        help="label that names a replica (default instance; pod is common)",
    )
    group.add_argument(
        "--fleet",
        metavar="NAME",
        help="one fleet: its name as `triage fleets` prints it, or labels (namespace=llm,model_name=M); "
        "every exporter's queries are scoped to it with that exporter's own labels",
    )
    group.add_argument(
        "--fleet-labels",
        metavar="L,L",
        default=",".join(DEFAULT_FLEET_LABELS),
        help=f"the engine labels that name a fleet (default {','.join(DEFAULT_FLEET_LABELS)})",
    )
    group.add_argument(
        "--catalog",
        metavar="FILE",
        action="append",
        default=[],
        help="extra signal catalog file(s); their sources are tried first",
    )
    group.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=5.0,
        help="deadline for the whole fetch round (default 5)",
    )
    group.add_argument(
        "--max-series",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_SERIES,
        help=f"series kept per query, a histogram's buckets counting once (default {DEFAULT_MAX_SERIES}; "
        "0: no cap); a capped signal says so in the diagnosis",
    )
    group.add_argument("--token-file", metavar="FILE", help=f"bearer token file (or ${TOKEN_ENV})")
    group.add_argument("--basic-auth-file", metavar="FILE", help="a file holding user:password")
    group.add_argument("--header", metavar="'K: V'", action="append", default=[], help="extra HTTP header")
    group.add_argument("--ca-file", metavar="FILE", help="CA bundle for TLS")
    group.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (warned)")
    group.add_argument(
        "--compress",
        action="store_true",
        help="ask for gzip replies: fewer bytes across a slow link, more Prometheus CPU "
        "(replies are uncompressed by default)",
    )


def add_playbook_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--playbooks",
        type=Path,
        default=None,
        metavar="DIR",
        help="playbook folder (default: $TRIAGE_PLAYBOOKS, ./playbooks, or the bundled one)",
    )
