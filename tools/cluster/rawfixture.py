"""Two fleets of the test cluster as one raw fixture: `python -m tools.cluster.rawfixture`.

A recording of a shared Prometheus holds every fleet in it, so a raw fixture must be able
to hold several and say which one its expectation is about. This writes the smallest
such recording that only the fleet scoping gets right: the 8B vLLM Deployment under KV
pressure and, in the same namespace and at the same time, the 70B LeaderWorkerSet whose
GPU reports XID 79 and whose group crash-loops. Diagnosed as a whole, the 8B fleet's
slow decode reads as the other fleet's lost replica; scoped to it, as KV pressure.

Every series carries the label set a real Prometheus gave it when scraping the cluster
through the Prometheus Operator's relabeling (`tools.cluster.harness`), then the history
the synthesiser told. The cluster is laid out on a fixed loopback /16 when it is free,
so rerunning rewrites the same file; otherwise pod IPs (and only they) differ.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from signals.fixturefleet import fleets_in
from signals.timeparse import format_duration, format_instant
from tools.cluster.harness import Backfill, match, scrape
from tools.cluster.history import build_history
from tools.cluster.layout import layout
from tools.cluster.model import Cluster
from tools.cluster.scenarios import Truth, free_cluster, specs, tell_all, truth
from tools.cluster.servers import first_taken
from tools.rawsynth import _fmt_int, compress_raw
from tools.registry import path
from tools.synth import write_document

NAME = "two-fleets-kv-pressure-beside-gpu-fault-raw"
SUBNET = 77
REPLICAS = 3
DURATION, STEP = "90m", "30s"
HEADER = """\
Written by `python -m tools.cluster.rawfixture` from the scraped test cluster (tools/cluster):
two fleets in one namespace of one Prometheus; the expectation speaks of the 8B fleet.
"""


def _cluster() -> Cluster:
    fleet_specs = specs(2, REPLICAS)
    cluster = layout(fleet_specs, subnet=SUBNET)
    if first_taken(p.address for p in cluster.targets) is None:
        return cluster
    return free_cluster(fleet_specs, dcgm="gpu-operator", ksm="kube-prometheus-stack", router=True)


def record() -> tuple[list[Backfill], Truth]:
    """The scraped label sets with their history, and the truth record of both fleets."""
    fleet_specs = specs(2, REPLICAS)
    cluster = _cluster()
    history = build_history(cluster, tell_all(fleet_specs, DURATION, STEP))
    scraped = scrape(cluster, history)
    return match(history, scraped), truth(cluster, history, scraped)


def _values(name: str, values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    if finite.size and np.all(finite == np.round(finite)):
        return compress_raw(values, _fmt_int)
    digits = 10 if name.endswith(("_sum", "_total", "_count")) else 5
    return compress_raw(values, lambda v: f"{v:.{digits}g}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _selector(name: str, labels: dict[str, str]) -> str:
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{text}}}" if labels else name


def document(series: list[Backfill], facts: Truth) -> dict[str, Any]:
    """The fixture: every series, and the 8B fleet's moment, symptom and expected cause."""
    small, large = facts.fleet("vllm"), facts.fleet("vllm-70b")
    found = fleets_in(((name, labels) for name, labels, _ in series), None)
    (fleet,) = [f for f in found.fleets if dict(f.labels).get("model_name") == small.model_name]
    items = [
        {"series": _selector(name, labels), "values": _values(name, values)}
        for name, labels, values in sorted(series, key=lambda s: (s[0], sorted(s[1].items())))
    ]
    minutes = math.floor((large.onset - facts.start) / 60)
    return {
        "name": NAME,
        "description": (
            f"Two fleets in namespace {small.namespace} of one Prometheus, as scraped: {fleet.name} "
            f"({REPLICAS} vLLM replicas) under KV pressure, while beside it {large.model_name} "
            f"(a LeaderWorkerSet of {REPLICAS} groups) loses a GPU to XID 79 at minute {minutes} and "
            "that group's engine crash-loops. Read as a whole the 8B fleet's slow decode looks like "
            "the other fleet's lost replica; scoped to its own fleet it is KV pressure."
        ),
        "level": "raw",
        "interval": format_duration(facts.step),
        "start": format_instant(facts.start),
        "at": format_duration(small.at - facts.start),
        "symptom": small.symptom,
        "input_series": items,
        "expect": {"fleet": fleet.name, "cause": small.cause, "forbidden": ["scale_out"]},
    }


def main(argv: list[str]) -> int:
    series, facts = record()
    target = argv[0] if argv else path(NAME)
    write_document(target, document(series, facts), HEADER)
    print(f"wrote {target}: {len(series)} series")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
