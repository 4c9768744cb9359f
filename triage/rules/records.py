"""The recording rules: every vocabulary signal as `triage:<signal>` and `triage:<signal>:replica`.

Each recorded series is the `or` of the signal's catalog sources in catalog order (the
first flavour that answers wins). Without fleet labels that is all; with them (the
default), every series is recorded per fleet:

- engine and gateway series carry the fleet labels themselves: their queries are
  grouped by them (`sum by (le)` becomes `sum by (le, namespace, model_name)`), see
  `triage.rules.promql`. A router's re-export of the engines' gauges (it carries
  `server`) is left out, as it would count every request twice;
- DCGM and kube-state-metrics series do not: they are joined, in PromQL, to the fleet
  of the pod they are about, through maps recorded first in the same group (rules of
  a group run in order, at one timestamp):
  - `triage:fleet_engine_pods`: every pod with engine series in the last hour, with its
    fleet labels (an hour, so a crash-looping replica whose engine series stopped keeps
    its GPU and its restarts in its fleet). A pod claimed by two fleets is left out
    rather than joined twice;
  - `triage:fleet_pods`: those, and the workers of each LeaderWorkerSet group (the
    worker StatefulSet carries its leader pod's name, so `kube_pod_owner` ties them);
  - `triage:fleet_exported_pods`: the same keyed by `exported_namespace`/`exported_pod`,
    the names a GPU Operator DCGM exporter gives the workload's pod;
  - `triage:fleet_workloads`: the Deployment (through the ReplicaSet) or StatefulSet
    that owns the engine pods, for `kube_deployment_*` and `kube_statefulset_*`;
  - `triage:fleet_orchestrated`: each fleet under the name its orchestrator gives it on
    the engines' own series (signals/stacks.yaml's `scope: {label: name}`, Dynamo's
    `dynamo_namespace`), spelled with underscores as the engines spell it and with dashes
    as the orchestrator's frontend and planner do. Those series join their fleet by
    (namespace, that label), so a disaggregated fleet's request rate and latencies are its
    frontend's, not its prefill and decode workers' added together. A name two fleets
    share joins neither (their engines' series are recorded instead).

  GPU series join by `exported_pod` or `pod`; one whose exporter names no pod at all (no
  Kubernetes, or pod mapping off) is recorded without fleet labels rather than lost, so
  its alert still fires (and names no fleet). Kubernetes series that join no fleet are
  other workloads' and are not recorded. The user's selector scopes the engines (and so
  the fleets); the joined exporters are scoped by the join, since their own labels name
  another namespace (the GPU Operator's) or another pod (kube-state-metrics').
  kube-state-metrics' Endpoints addresses name no pod, only an IP, and are left out of
  per-fleet rules (`replicas_ready` comes from the workload there), as are the series of
  an orchestrator that names its fleets by no engine label (Ray Serve's proxy and
  controller: the engines' series stand for them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from signals.catalog import NOT_ROUTER, Catalog, QueryOptions, Scope, render
from signals.errors import InputError, InputErrors
from signals.fleets.discover import ENGINES
from signals.fleets.stacks import stacks
from triage.rules.promql import Join, Printer, PromQLRewriteError, per_fleet

RECORD_PREFIX = "triage:"
REPLICA_SUFFIX = ":replica"
ENGINE_PODS = "triage:fleet_engine_pods"
PODS = "triage:fleet_pods"
EXPORTED_PODS = "triage:fleet_exported_pods"
WORKLOADS = "triage:fleet_workloads"
ORCHESTRATED = "triage:fleet_orchestrated"
EMPTY = '""'
MEMORY = "1h"
"""How long a pod stays in its fleet after its engine series stop."""
UNJOINED = frozenset({"kube_endpoint"})
"""Exporters whose series no rule ties to a fleet (kube-state-metrics' Endpoints addresses name a
pod IP, which a host-network pod shares): left out of per-fleet rules, whose `replicas_ready` is
the workload's."""
UNDERSCORES = 8
"""How many underscores of an orchestrator's name the map also spells as dashes (PromQL's
`label_replace` rewrites one per call)."""


def series_names() -> tuple[str, ...]:
    """The labels an orchestrator names a fleet by on the engines' own series (signals/stacks.yaml:
    `rules_key`), which per-fleet rules also record by."""
    return tuple(dict.fromkeys(label for spec in stacks().orchestrators for label in spec.rules_key))


def orchestrator_names() -> tuple[str, ...]:
    """The engine labels an orchestrator names its fleets by, its own series carrying them too
    (signals/stacks.yaml: `scope: {label: name}`)."""
    labels = (
        label for spec in stacks().orchestrators for label, which in spec.scope.items() if which == "name"
    )
    return tuple(dict.fromkeys(labels))


@dataclass(frozen=True)
class Views:
    """Which recorded series exist: the fleet view and the per-replica view, by signal."""

    fleet: frozenset[str]
    replica: frozenset[str]

    def has(self, signal: str, view: str) -> bool:
        return signal in (self.replica if view == "replica" else self.fleet)


def record_name(signal: str, view: str) -> str:
    return RECORD_PREFIX + signal + (REPLICA_SUFFIX if view == "replica" else "")


def by(labels: Sequence[str]) -> str:
    """`(a, b)`: a grouping or matching label list."""
    return "(" + ", ".join(labels) + ")"


def _unique(labels: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(labels))


def _matchers(*parts: str) -> str:
    return ",".join(p for p in parts if p)


@dataclass(frozen=True)
class FleetJoins:
    """The fleet labels of a rule file, and the PromQL that ties each exporter's series to them."""

    labels: tuple[str, ...]
    selector: str = ""
    named_by: tuple[str, ...] = ()
    """Labels an orchestrator puts on the engines' own series to name a fleet (Knative's
    `service_name`): every series is also recorded by them, so fleets that share the fleet labels
    (KServe's InferenceServices, all on `model_name=/mnt/models`) stay apart. Series without them
    are recorded as before."""

    @property
    def key(self) -> tuple[str, ...]:
        """What a recorded series and an alert are per: the fleet labels and the naming ones."""
        return _unique((*self.labels, *self.named_by))

    def copied(self, *matched: str) -> str:
        """`(labels)` for `group_left`: the key labels the match does not already carry."""
        return by([label for label in self.key if label not in matched])

    def maps(self) -> list[dict[str, str]]:
        """The recording rules of the maps, in the order they read each other."""
        pods_by = by(_unique(("namespace", "pod", *self.key)))
        seen_sel = _matchers('pod!=""', 'server=""', self.selector)
        seen = " or ".join(f"last_over_time({name}{{{seen_sel}}}[{MEMORY}])" for name in ENGINES)
        engine_pods = f"group by {pods_by} ({seen})"
        claimed = f"count by (namespace, pod) ({engine_pods})"
        workers = (
            f"group by {pods_by} ("
            'label_replace(kube_pod_owner{owner_kind="StatefulSet"}, "leader", "$1", "owner_name", "(.+)") '
            f"* on (namespace, leader) group_left {self.copied('namespace', 'leader')} "
            f'label_replace({ENGINE_PODS}, "leader", "$1", "pod", "(.+)"))'
        )
        exported = (
            f'label_replace(label_replace({PODS}, "exported_namespace", "$1", "namespace", "(.*)"), '
            '"exported_pod", "$1", "pod", "(.*)")'
        )
        owned = f"* on (namespace, pod) group_left {self.copied('namespace', 'pod')} {ENGINE_PODS}"

        def owner(kind: str, label: str) -> str:
            return (
                f'label_replace(kube_pod_owner{{owner_kind="{kind}"}}, "{label}", "$1", "owner_name", "(.+)")'
            )

        replicasets = (
            f"group by {by(_unique(('namespace', 'replicaset', *self.key)))} ("
            f"{owner('ReplicaSet', 'replicaset')} {owned})"
        )
        deployments = (
            f"group by {by(_unique(('namespace', 'deployment', *self.key)))} ("
            'label_replace(kube_replicaset_owner{owner_kind="Deployment"}, "deployment", "$1", "owner_name", '
            f'"(.+)") * on (namespace, replicaset) group_left {self.copied("namespace", "replicaset")} '
            f"{replicasets})"
        )
        statefulsets = (
            f"group by {by(_unique(('namespace', 'statefulset', *self.key)))} ("
            f"{owner('StatefulSet', 'statefulset')} {owned})"
        )
        maps = [
            {"record": ENGINE_PODS, "expr": f"{engine_pods} unless on (namespace, pod) ({claimed} > 1)"},
            {"record": PODS, "expr": f"{ENGINE_PODS} or {workers}"},
            {"record": EXPORTED_PODS, "expr": exported},
            {"record": WORKLOADS, "expr": f"{deployments} or {statefulsets}"},
        ]
        orchestrated = [self._orchestrated(label) for label in orchestrator_names()]
        if orchestrated:
            maps.append({"record": ORCHESTRATED, "expr": " or ".join(f"({x})" for x in orchestrated)})
        return maps

    def _orchestrated(self, label: str) -> str:
        """Each fleet under the name `label` gives it on its engines, as written and with its
        underscores as dashes; a name two fleets share left out."""
        key = by(("namespace", label))
        seen_sel = _matchers(f'{label}!=""', 'server=""', self.selector)
        seen = " or ".join(f"last_over_time({name}{{{seen_sel}}}[{MEMORY}])" for name in ENGINES)
        named = f"group by {by(_unique(('namespace', label, *self.key)))} ({seen})"
        dashed = named
        for _ in range(UNDERSCORES):
            dashed = f'label_replace({dashed}, "{label}", "$1-$2", "{label}", "(.*)_(.*)")'
        both = f"{named} or {dashed}"
        return f"({both}) unless on {key} (count by {key} ({both}) > 1)"

    def join(self, exporter: str) -> Join | None:
        """How `exporter`'s series get the fleet labels; None for the gateway's, which have no pod."""
        if exporter == "engine":
            return self._engine
        if exporter == "gpu":
            return self._gpu
        if exporter == "kube_pod":
            return self._kube_pod
        if exporter == "kube_workload":
            return self._kube_workload
        if exporter == "orchestrator":
            return self._orchestrator
        return None

    def _engine(self, series: Printer) -> str:
        """Engine series carry the fleet labels, except a few (vLLM's `cache_config_info` has no
        `model_name`): those are completed from their pod's fleet. Each branch selects its own
        series by matchers, so the usual case reads what it read before."""
        whole = series([label + '!=""' for label in self.labels])
        copied = self.copied("namespace", "pod")
        completed = [
            f"(({series([label + '=' + EMPTY])}) * on (namespace, pod) group_left {copied} {ENGINE_PODS})"
            for label in self.labels
            if label not in ("namespace", "pod")
        ]
        return " or ".join([f"({whole})", *completed, f"({series(['pod=' + EMPTY])})"])

    def _gpu(self, series: Printer) -> str:
        x = series(())
        no_pod = series(('pod=""', 'exported_pod=""'))
        return (
            f"(({x}) * on (exported_namespace, exported_pod) group_left {self.copied()} {EXPORTED_PODS})"
            f" or (({x}) * on (namespace, pod) group_left {self.copied('namespace', 'pod')} {PODS})"
            f" or ({no_pod})"
        )

    def _kube_pod(self, series: Printer) -> str:
        return f"({series(())}) * on (namespace, pod) group_left {self.copied('namespace', 'pod')} {PODS}"

    def _kube_workload(self, series: Printer) -> str:
        x = series(())
        copied = self.copied("namespace", "deployment", "statefulset")
        return (
            f'(({x}) * on (namespace, deployment) group_left {copied} {WORKLOADS}{{deployment!=""}})'
            f' or (({x}) * on (namespace, statefulset) group_left {copied} {WORKLOADS}{{statefulset!=""}})'
        )

    def _orchestrator(self, series: Printer) -> str:
        x = series(())
        joins = [
            f"(({x}) * on (namespace, {label}) group_left {self.copied('namespace', label)} "
            f'{ORCHESTRATED}{{{label}!=""}})'
            for label in orchestrator_names()
        ]
        return " or ".join(joins)

    def options(self, base: QueryOptions) -> QueryOptions:
        """Each exporter's selector: the user's for the engines (routers' re-exports left out) and the
        gateway; none for the joined exporters, which the join scopes."""
        engine = Scope(_matchers(base.selector, NOT_ROUTER), base.replica_label)
        unscoped = Scope("", base.replica_label)
        scopes = {
            "engine": engine,
            "gateway": Scope(base.selector, base.replica_label),
            "gpu": unscoped,
            "kube_pod": unscoped,
            "kube_workload": unscoped,
            "orchestrator": unscoped,
        }
        return QueryOptions(base.replica_label, base.selector, base.window, base.extra, scopes)


def recording_rules(
    catalog: Catalog, options: QueryOptions, fleet: FleetJoins | None
) -> tuple[list[dict[str, str]], Views]:
    """The maps (per fleet) and every signal's rules; InputErrors for a catalog query that does not parse."""
    rules: list[dict[str, str]] = fleet.maps() if fleet is not None else []
    scoped = fleet.options(options) if fleet is not None else options
    views: dict[str, set[str]] = {"fleet": set(), "replica": set()}
    unjoined = UNJOINED if orchestrator_names() else UNJOINED | {"orchestrator"}
    problems: list[InputError] = []
    for signal, sources in catalog.sources.items():
        for view in ("fleet", "replica"):
            queries: list[str] = []
            for source in sources:
                template = source.fleet if view == "fleet" else source.replica
                if template is None:
                    continue
                if fleet is None:
                    query = render(template, options)
                elif source.exporter in unjoined:
                    continue
                else:
                    try:
                        query = per_fleet(
                            render(template, scoped, source.exporter),
                            fleet.key,
                            fleet.join(source.exporter),
                        )
                    except PromQLRewriteError as exc:
                        where = f"{signal}.{source.source}.{view}"
                        problems.append(InputError("(catalog)", 0, where, str(exc)))
                        continue
                if query not in queries:
                    queries.append(query)
            if not queries:
                continue
            expr = queries[0] if len(queries) == 1 else " or ".join(f"({q})" for q in queries)
            rules.append({"record": record_name(signal, view), "expr": expr})
            views[view].add(signal)
    if problems:
        raise InputErrors(problems)
    return rules, Views(frozenset(views["fleet"]), frozenset(views["replica"]))
