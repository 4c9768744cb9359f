"""Which fleet a group of alerts is about: its fleet labels, or a pod or instance of one of its replicas.

An alert written by `triage rules` carries the fleet labels (`namespace`, `model_name` by
default), and those name a fleet outright. Other alerts name a replica: `pod` (with
`namespace`), `exported_pod` (a GPU alert from the GPU Operator's exporter), or `instance`
(`<podIP>:<port>`, or `<pod>:<port-name>` under GKE's managed collection, or the replica
itself where engines carry no pod label); those are looked up among the fleets found. The
answer is one of:

- a fleet: every alert that names something names this one;
- none: no alert names anything a fleet was found for (a node alert, a fleet-less rule),
  so the caller falls back to its own selector and says so;
- refused, with the reason: fleet labels that name no fleet found, or several; alerts
  naming several fleets. A diagnosis of the wrong fleet would be worse than none.

Pure: it reads the `FleetMap` discovery returned and the alerts' label sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass

from signals.fleets.model import Fleet, FleetMap
from signals.fleets.stacks import identify

Labels = Mapping[str, str]
SHOWN = 8
"""Fleets named in a reason at most (a Prometheus may hold hundreds)."""


@dataclass(frozen=True)
class Named:
    """What the alerts name: a `fleet`, or none, and the one line that says how or why not."""

    fleet: Fleet | None
    how: str
    """`labels`, `pod` or `instance` for a fleet; `none`; or `unknown`, `ambiguous`, `several` (refused)."""
    reason: str

    @property
    def refused(self) -> bool:
        return self.how in ("unknown", "ambiguous", "several")


def reference(labels: Labels, fleet_labels: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
    """The alert's fleet labels when it carries every one of them (non-empty), else None."""
    values = tuple((label, labels.get(label, "")) for label in fleet_labels)
    return values if values and all(value for _, value in values) else None


def matchers(pairs: Iterable[tuple[str, str]]) -> str:
    """`namespace="llm",model_name="..."`: labels as PromQL matchers, values escaped."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)


def reference_key(labels: Labels, fleet_labels: Sequence[str]) -> str:
    """What alerts naming the same fleet by its labels share (empty when they do not name one)."""
    found = reference(labels, fleet_labels)
    return matchers(found) if found else ""


def names_anything(labels: Labels, fleet_labels: Sequence[str]) -> bool:
    """Whether the alert names a fleet or a replica at all (else discovery need not be asked)."""
    return reference(labels, fleet_labels) is not None or any(
        labels.get(key) for key in ("pod", "exported_pod", "instance")
    )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _host(instance: str) -> str:
    return instance.rsplit(":", 1)[0].strip("[]") if ":" in instance else instance


def _pods(fleet: Fleet) -> set[str]:
    return {*fleet.kube_pods, *(fleet.replicas if fleet.replica_label == "pod" else ())}


def _by_pod(fleets: Sequence[Fleet], namespace: str, pod: str) -> list[Fleet]:
    return [f for f in fleets if pod in _pods(f) and (not namespace or (f.namespace or "") == namespace)]


def _by_instance(fleets: Sequence[Fleet], instance: str) -> list[Fleet]:
    host = _host(instance)
    return [
        f
        for f in fleets
        if (f.replica_label == "instance" and instance in f.replicas)
        or host in f.pod_ips.values()
        or host in _pods(f)
    ]


def _names(fleets: Iterable[Fleet]) -> str:
    names = [f.name for f in fleets]
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more if names else "none"


@dataclass(frozen=True)
class _Found:
    how: str
    what: str
    fleets: tuple[Fleet, ...]


def _one(fleets: FleetMap, labels: Labels, fleet_labels: Sequence[str]) -> _Found | None:
    """What one alert names: by its fleet labels, else by a pod, else by an instance; None for nothing."""
    found = reference(labels, fleet_labels)
    if found is not None:
        wanted = dict(found)
        candidates = [f for f in fleets.fleets if all(dict(f.labels).get(k) == v for k, v in wanted.items())]
        if len(candidates) > 1:
            # an orchestrator's name on the alert (Knative's `service_name`, which `triage rules`
            # also records by) picks its fleet among those sharing the fleet labels
            named = identify(labels, {})
            narrowed = [
                f
                for f in candidates
                if labels.get("pod") in _pods(f)
                or (f.workload is not None and labels.get("workload") in (f.workload.name, str(f.workload)))
                or (
                    f.workload is not None
                    and named is not None
                    and (named.kind, named.name) == astuple(f.workload)
                )
            ]
            candidates = narrowed or candidates
        return _Found("labels", matchers(found), tuple(candidates))
    unmatched: _Found | None = None
    for pod_label, namespace_label in (("pod", "namespace"), ("exported_pod", "exported_namespace")):
        pod = labels.get(pod_label, "")
        if pod:
            namespace = labels.get(namespace_label, "")
            hit = _Found(
                "pod",
                f"pod {namespace + '/' if namespace else ''}{pod}",
                tuple(_by_pod(fleets.fleets, namespace, pod)),
            )
            if hit.fleets:
                return hit
            unmatched = unmatched or hit
    instance = labels.get("instance", "")
    if instance:
        return _Found("instance", f"instance {instance}", tuple(_by_instance(fleets.fleets, instance)))
    return unmatched


def name_fleet(fleets: FleetMap, alerts: Sequence[Labels], fleet_labels: Sequence[str]) -> Named:
    """The fleet `alerts` name, none (the caller's own selector applies), or a refusal with its reason."""
    chosen: dict[str, tuple[Fleet, str, str]] = {}
    refusals: list[tuple[str, str]] = []
    unmatched: list[str] = []
    for labels in alerts:
        found = _one(fleets, labels, fleet_labels)
        if found is None:
            continue
        if len(found.fleets) == 1:
            fleet = found.fleets[0]
            previous = chosen.get(fleet.name)
            if previous is None or (previous[1] != "labels" and found.how == "labels"):
                chosen[fleet.name] = (fleet, found.how, found.what)
        elif found.how == "labels" and not found.fleets:
            reason = f"no fleet {{{found.what}}} in Prometheus; the fleets are: {_names(fleets.fleets)}"
            refusals.append(("unknown", reason))
        elif found.how == "labels":
            reason = (
                f"{{{found.what}}} names {len(found.fleets)} fleets ({_names(found.fleets)}): "
                "give the alert a pod or workload label, or add the workload to the fleet labels"
            )
            refusals.append(("ambiguous", reason))
        elif found.fleets:
            reason = f"{found.what} is a replica of {len(found.fleets)} fleets ({_names(found.fleets)})"
            refusals.append(("ambiguous", reason))
        else:
            unmatched.append(found.what)
    if refusals:
        return Named(None, *refusals[0])
    if len(chosen) > 1:
        return Named(
            None,
            "several",
            f"the alerts name {len(chosen)} fleets ({_names(f for f, _, _ in chosen.values())}): "
            "group them by the fleet labels in Alertmanager, so each fleet's alerts are diagnosed apart",
        )
    if chosen:
        fleet, how, what = next(iter(chosen.values()))
        by = "its fleet labels " + what if how == "labels" else what
        return Named(fleet, how, f"fleet {fleet.name}, named by {by}")
    if unmatched:
        shown = ", ".join(sorted(set(unmatched))[:3])
        return Named(None, "none", f"{shown}: no fleet found has that replica")
    return Named(None, "none", "the alerts name no fleet (no fleet labels, pod or instance)")


__all__ = ["Named", "matchers", "name_fleet", "names_anything", "reference", "reference_key"]
