"""`triage signals check`: what a live Prometheus can tell, found out before an incident needs it.

Every vocabulary signal resolved against the server's metric names, to its source or
to blind, with the causes a blind signal leaves unprovable: a missing exporter is
better found on a quiet day than during a page.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any, TextIO

from signals.catalog import QueryOptions, Resolution, resolve
from signals.fleets import Fleet
from signals.fleets.scope import scoped_options
from signals.live import engine_names
from triage.cli import common
from triage.cli.handlers.fleets import blind_for
from triage.core.escape import printable
from triage.core.playbook import AnyOf, Knowledge
from triage.inputs import arguments as inputs
from triage.inputs import sources as sourceargs
from triage.sources import load_playbooks


def unprovable_causes(kb: Knowledge, blind: set[str]) -> dict[str, list[str]]:
    """Causes with a required check whose every signal is blind, and those signals."""
    out: dict[str, list[str]] = {}
    for cid, cause in sorted(kb.causes.items()):
        for entry in cause.requires:
            members = entry.any if isinstance(entry, AnyOf) else (entry,)
            signals = [s for m in members for s in m.signals()]
            if signals and all(s in blind for s in signals):
                out.setdefault(cid, []).extend(s for s in signals if s not in out.get(cid, []))
    return out


@dataclass(frozen=True)
class SignalCheck:
    """Every vocabulary signal resolved against one server (and fleet), and what that leaves blind."""

    server: str
    metric_names: int
    resolutions: dict[str, Resolution]
    fleet: Fleet | None
    fleet_blind: dict[str, str]
    blind: set[str]
    unprovable: dict[str, list[str]]
    deprecated: list[str]

    def to_json(self) -> dict[str, Any]:
        """The JSON contract of `triage signals check --format json`."""
        return {
            "server": self.server,
            "metric_names": self.metric_names,
            "signals": {
                name: {
                    "replica": r.replica.source if r.replica else None,
                    "fleet": r.fleet.source if r.fleet else None,
                    "blind": r.blind or name in self.fleet_blind,
                    "deprecated_in_use": list(r.deprecated_in_use),
                }
                for name, r in sorted(self.resolutions.items())
            },
            "fleet": self.fleet.name if self.fleet else None,
            "unprovable_causes": self.unprovable,
            "deprecated_in_use": self.deprecated,
        }


def signal_check(args: argparse.Namespace) -> SignalCheck:
    """The server's signals as `triage signals check` reads them from its arguments."""
    kb = load_playbooks(args.playbooks)
    prometheus = sourceargs.prometheus_source(args)
    names = prometheus.metric_names()
    at = inputs.live_moment(args.at, time.time(), "--at")
    fleet = sourceargs.chosen_fleet(prometheus, args, args.fleet, at) if args.fleet else None
    scoped = scoped_options(fleet, QueryOptions()) if fleet else QueryOptions()
    own = engine_names(prometheus, scoped)
    resolutions = resolve(sourceargs.catalog(args), names, scoped.engine, scoped.orchestrator, scoped, own)
    # Scoped to a fleet, a signal is also blind when its exporter sees nothing of that fleet.
    fleet_blind = blind_for(fleet, resolutions) if fleet else {}
    blind = {name for name, r in resolutions.items() if r.blind} | set(fleet_blind)
    deprecated = sorted({n for r in resolutions.values() for n in r.deprecated_in_use})
    return SignalCheck(
        prometheus.url,
        len(names),
        resolutions,
        fleet,
        fleet_blind,
        blind,
        unprovable_causes(kb, blind),
        deprecated,
    )


def cmd_signals_check(args: argparse.Namespace, out: TextIO) -> int:
    check = signal_check(args)
    if args.format == "json":
        out.write(json.dumps(check.to_json(), indent=2) + "\n")
        return common.EXIT_OK
    names, resolutions, fleet = check.metric_names, check.resolutions, check.fleet
    fleet_blind, blind = check.fleet_blind, check.blind
    unprovable, deprecated = check.unprovable, check.deprecated
    scope = f" for fleet {printable(fleet.name)}" if fleet else ""
    out.write(
        f"{check.server}: {names} metric names; {len(resolutions) - len(blind)} of "
        f"{len(resolutions)} signals resolved{scope}\n"
    )
    width = max(len(n) for n in resolutions)
    for name, r in sorted(resolutions.items()):
        if r.blind:
            status = "BLIND"
        elif name in fleet_blind:
            status = f"BLIND for this fleet: {fleet_blind[name]}"
        else:
            replica = r.replica.source if r.replica else "-"
            whole = r.fleet.source if r.fleet else "-"
            status = f"replica: {replica}, fleet: {whole}"
        if r.deprecated_in_use:
            status += f"  (deprecated names in use: {', '.join(r.deprecated_in_use)})"
        out.write(f"  {name:<{width}}  {status}\n")
    if unprovable:
        out.write("causes left unprovable (a required check reads only blind signals):\n")
        for cause, signals in unprovable.items():
            out.write(f"  {cause}: needs {', '.join(signals)}\n")
    else:
        out.write("every cause can be proven from what this server has\n")
    if deprecated:
        out.write(
            f"deprecated metric names in use: {', '.join(deprecated)} "
            "(renamed in vLLM 0.9-0.11, or the inference extension's 1.0)\n"
        )
    return common.EXIT_OK


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.signals_command == "check":
        return cmd_signals_check(args, out)
    raise common.MissingSubcommand
