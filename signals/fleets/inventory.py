"""The label sets fleet discovery reads, fetched once in one round of instant queries.

A few `group by` queries, each returning one row per label set (never per sample):
engines, pods and their placement, pod and ReplicaSet owners, and the GPUs. An exporter
that is absent answers with no rows; a query that fails is kept as a `JoinProblem`
naming it, and discovery works with the rest.
"""

from __future__ import annotations

from signals.errors import SignalError
from signals.fleets.discover import ENGINES, Inventory
from signals.fleets.labelsets import DCGM, ENGINE_BY, GPU_BY, KUBE, KUBE_BY
from signals.fleets.model import JoinProblem
from signals.prometheus import PrometheusSource
from signals.timeparse import format_duration


def queries(window: str, engine_selector: str = "") -> dict[str, tuple[str, str]]:
    """Key -> (the exporter it reads, the query), over the `window` before the moment asked.

    Every series seen anywhere in the window counts, so a replica that died before the
    moment (its series ended) is still part of its fleet: scoping must never hide it.
    `engine_selector` (the user's `--selector`) narrows which engines make fleets.
    """
    matchers = f"{{{engine_selector}}}" if engine_selector else ""

    def seen(selector: str, by: tuple[str, ...]) -> str:
        return f"group by ({', '.join(by)}) (last_over_time({selector}[{window}]))"

    out: dict[str, tuple[str, str]] = {
        f"engine:{name}": ("engine", seen(name + matchers, ENGINE_BY)) for name in ENGINES
    }
    for metric, kind in KUBE.items():
        exporter = "ray serve" if kind == "serve" else "kube-state-metrics"
        out[kind] = (exporter, seen(metric, KUBE_BY[kind]))
    for name in DCGM:
        out[f"gpus:{name}"] = ("dcgm", seen(name, GPU_BY))
    return out


def fetch_inventory(
    prometheus: PrometheusSource, at: float | None = None, lookback: float = 3600.0, engine_selector: str = ""
) -> Inventory:
    """Every label set discovery needs, seen in the `lookback` seconds before `at` (now by
    default); SignalError when no query can be answered at all."""
    asked = queries(format_duration(max(lookback, 60.0)), engine_selector)
    results = prometheus.instant_queries({key: query for key, (_, query) in asked.items()}, at)
    if all(r.error is not None for r in results.values()):
        first = next(iter(results.values()))
        raise SignalError(f"{prometheus.url}: no fleet query could be answered ({first.error})")
    rows: dict[str, list[dict[str, str]]] = {}
    problems: list[JoinProblem] = []
    for key, (exporter, _) in asked.items():
        result = results[key]
        kind, _, name = key.partition(":")
        if result.error is not None:
            problems.append(JoinProblem(exporter, f"{name or kind} could not be read: {result.error}"))
            continue
        found = [dict(labels) for labels, _, _ in result.series]
        if kind == "engine":
            found = [{**labels, "__name__": name} for labels in found]
        rows.setdefault(kind, []).extend(found)
    gpus = {tuple(sorted(r.items())): r for r in rows.get("gpus", [])}
    return Inventory(
        engines=rows.get("engine", []),
        pods=rows.get("pods", []),
        pod_owners=rows.get("pod_owners", []),
        replicaset_owners=rows.get("replicaset_owners", []),
        gpus=list(gpus.values()),
        pod_labels=rows.get("pod_labels", []),
        serve=rows.get("serve", []),
        problems=tuple(problems),
    )
