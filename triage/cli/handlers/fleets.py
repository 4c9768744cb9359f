"""`triage fleets`: the fleets one Prometheus holds, and how each exporter was joined to them.

Before `--fleet` can scope a diagnosis, an on-call engineer needs to see what the tool
sees: each fleet's engine, model, namespace and workload, its replicas as every exporter
names them, the GPUs joined to them and how, the signals left blind for that fleet, and
every join that failed, with the exporter and the labels that were missing.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from typing import Any, TextIO

from signals.catalog import QueryOptions, Resolution, resolve
from signals.fleets import Fleet, FleetMap
from signals.fleets.scope import scoped_options
from signals.live import engine_names_of
from triage.cli import common
from triage.core.escape import printable
from triage.inputs import arguments as inputs
from triage.inputs import sources as sourceargs

BLIND_WITHOUT = {
    "gpu": "GPUs",
    "kube_pod": "kube-state-metrics pods",
    "kube_workload": "a workload",
    "kube_endpoint": "pod IPs (kube_pod_info)",
    "orchestrator": "orchestrator series",
}


def blind_for(fleet: Fleet, resolutions: dict[str, Resolution]) -> dict[str, str]:
    """Signal -> why it is blind for this fleet: no source on the server, or its exporter sees
    nothing of the fleet."""
    have = {
        "gpu": bool(fleet.gpus),
        "kube_pod": bool(fleet.kube_pods),
        "kube_workload": fleet.workload is not None,
        "kube_endpoint": bool(fleet.pod_ips),
        "orchestrator": bool(fleet.orchestrator_selector),
    }
    out: dict[str, str] = {}
    for name, res in sorted(resolutions.items()):
        if res.blind:
            out[name] = "no source on this server"
            continue
        views = [spec for spec in (res.replica, res.fleet) if spec is not None]
        if views and all(not have.get(spec.exporter, True) for spec in views):
            out[name] = f"no {BLIND_WITHOUT[views[0].exporter]} joined to this fleet"
    return out


def _text(found: FleetMap, server: str, resolutions: dict[str, dict[str, Resolution]]) -> str:
    lines = [f"{len(found.fleets)} fleet{'s' if len(found.fleets) != 1 else ''} in {server}"]
    for fleet in found.fleets:
        workload = str(fleet.workload) if fleet.workload else "workload unknown"
        lines.append("")
        lines.append(f"{fleet.name}")
        lines.append(f"  engine {fleet.engine} · {workload} · replicas by {fleet.replica_label}")
        lines.append(f"  engine:             {len(fleet.replicas)} replicas: {', '.join(fleet.replicas)}")
        for label, grouped in (("pools", fleet.pools), ("revisions", fleet.revisions)):
            if grouped:
                lines.append(f"  {label + ':':<20}{_grouped(grouped)}")
        if fleet.kube_workloads:
            lines.append(f"  workloads:          {', '.join(str(w) for w in fleet.kube_workloads)}")
        for join in fleet.joins:
            lines.append(f"  joined:             {join}")
        if fleet.workers:
            pairs = ", ".join(f"{w} → {r}" for w, r in sorted(fleet.workers.items()))
            what = "workers:" if fleet.replica_label == "pod" else "pods:"
            lines.append(f"  {what:<20}{pairs}")
        lines.append(f"  kube-state-metrics: {len(fleet.kube_pods)} pods")
        how = fleet.gpu_join or "-"
        lines.append(f"  dcgm:               {len(fleet.gpus)} GPUs joined by {how}")
        if fleet.routers:
            lines.append(f"  router:             {len(fleet.routers)} backends")
        blind = blind_for(fleet, resolutions[fleet.name])
        if blind:
            lines.append(f"  blind:              {', '.join(blind)}")
        for problem in fleet.problems:
            lines.append(f"  ! {problem}")
    if found.idle_gpus:
        lines.append("")
        lines.append(f"{found.idle_gpus} idle GPU{'s' if found.idle_gpus != 1 else ''} (no pod uses them)")
    if found.problems:
        lines.append("")
        lines.append("joins that failed:")
        lines.extend(f"  ! {p}" for p in found.problems)
    return "\n".join(lines) + "\n"


def _grouped(by_replica: Mapping[str, str]) -> str:
    """`decode 3 (a, b, c) · prefill 2 (d, e)`: replicas grouped by their pool or revision."""
    groups: dict[str, list[str]] = {}
    for replica, value in sorted(by_replica.items()):
        groups.setdefault(value, []).append(replica)
    return " · ".join(f"{value} {len(rs)} ({', '.join(rs)})" for value, rs in sorted(groups.items()))


def _found(args: argparse.Namespace) -> tuple[FleetMap, str, dict[str, dict[str, Resolution]]]:
    """The fleets on the server, its URL, and each fleet's signals resolved against its own metric names."""
    prometheus = sourceargs.prometheus_source(args)
    at = inputs.live_moment(args.at, time.time(), "--at")
    found = sourceargs.find_fleets(prometheus, args, at, inputs.duration_arg(args.lookback, "--lookback"))
    cat, names = sourceargs.catalog(args), prometheus.metric_names()
    scoped = [scoped_options(fleet, QueryOptions()) for fleet in found.fleets]
    resolutions = {}
    for fleet, options, own in zip(found.fleets, scoped, engine_names_of(prometheus, scoped), strict=True):
        resolutions[fleet.name] = resolve(cat, names, fleet.engine, fleet.orchestrator, options, own)
    return found, prometheus.url, resolutions


def _payload(found: FleetMap, server: str, resolutions: dict[str, dict[str, Resolution]]) -> dict[str, Any]:
    payload = found.to_json()
    payload["server"] = server
    for entry, fleet in zip(payload["fleets"], found.fleets, strict=True):
        entry["blind"] = blind_for(fleet, resolutions[fleet.name])
    return payload


def fleets_json(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON contract of `triage fleets --format json`."""
    return _payload(*_found(args))


def cmd_fleets(args: argparse.Namespace, out: TextIO) -> int:
    found, server, resolutions = _found(args)
    if args.format == "json":
        out.write(json.dumps(_payload(found, server, resolutions), indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(printable(_text(found, server, resolutions)))
    return common.EXIT_OK
