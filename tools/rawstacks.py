"""Raw series of the serving stacks that export vLLM's or SGLang's own series under other names
or labels, as a Prometheus Operator scrape of a Kubernetes cluster gives them: Ray Serve LLM,
KServe (InferenceService and LLMInferenceService), vLLM 0.33, and SGLang with priority
scheduling and every scheduler's metrics. `tools/rawstacks_native.py` holds, on this base, the
stacks whose exporters write families of their own (TGI, trtllm-serve, Triton, Dynamo, and
dcgm-exporter on its default counters).

Why a module of its own: `tools.rawsynth.RawFleet` writes what vLLM and SGLang export with the
replica as `instance`; every stack here exports the same story under other names, other labels
or other units, and the product must learn to read each. So the story stays the
`tools.synth.Fleet` the other fixtures tell, and `StackFleet` changes only what the stack
changes:

- `engine(name)` emits a replica's engine series (vLLM's by default, in rawsynth's shape);
- `engine_series(metric, labels, name)` renames and relabels each of them the way the stack
  does (`ray_vllm_*`, Knative's revision labels, ...), or copies or drops it;
- every series then gets its target's labels (`namespace`, `pod`, `container`, `endpoint`,
  `instance` = pod IP:port, `job`, and `service` behind a ServiceMonitor), kube-state-metrics'
  series its own (honoured labels, as kube-prometheus-stack scrapes it), and `cluster()` adds
  the pods' placement and owners (`kube_pod_info`, `kube_pod_owner` -> `kube_replicaset_owner`
  -> the Deployment's replica counts) and, where a stack's fleets are told apart by them, the
  pods' labels (`kube_pod_labels`);
- `extra()` adds what stands beside the engines (Ray's Serve proxy and controller).

A raw fixture may hold several fleets (a confounder beside the incident): each is its own
StackFleet on its own subnet and nodes, merged by `write_stacks`. Stack-only inputs of a story
(what the signal-level twin cannot say, such as the share of prefix hits an offload tier
serves) come as `extras`. Seeded from each Fleet's seed: the same spec writes the same file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tools.rawedge import KSM, _go_float, _k8s_hash
from tools.rawsynth import (
    Array,
    Key,
    RawFleet,
    RawSpec,
    _digest,
    _fill,
    _fmt_gauge,
    _fmt_int,
    _Life,
    _uuid,
)
from tools.synth import Fleet, write_document

Fmt = Callable[[float], str]
Labels = dict[str, str]

# Ray Serve's DEFAULT_LATENCY_BUCKET_MS (ray/serve/_private/constants.py), milliseconds.
RAY_SERVE_LATENCY_MS = (
    1, 2, 5, 10, 20, 50, 100, 200, 300, 400, 500, 1000, 2000, 5000, 10000, 60000, 120000, 300000, 600000,
)  # fmt: skip


@dataclass
class Target:
    """How the Prometheus Operator scrapes a replica's engine: a PodMonitor (`job` is
    `<namespace>/<monitor>`) or a ServiceMonitor (`job` and `service` are the Service), or an
    annotation job; `extra` is what the monitor's relabelings add (`ray_io_cluster`, ...)."""

    job: str
    endpoint: str
    port: int
    container: str
    service: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)
    plain: bool = False  # an annotation job (kubernetes-pods): no container, endpoint or service

    def labels(self, namespace: str, pod: str, ip: str) -> Labels:
        """The labels a scrape of this pod puts on every series it takes."""
        labels = {"instance": f"{ip}:{self.port}", "job": self.job, "namespace": namespace, "pod": pod}
        if not self.plain:
            labels.update(container=self.container, endpoint=self.endpoint)
        if self.service:
            labels["service"] = self.service
        return {**labels, **self.extra}


@dataclass
class Site:
    """Where a fleet's pods run: their namespace, owning workload, subnet and image."""

    namespace: str
    workload: str
    kind: str = "Deployment"  # or the owner KubeRay and others set directly (RayCluster)
    subnet: int = 1  # pods get 10.42.<subnet>.x, nodes gpu-node-<subnet>-<n>
    image: str = "vllm/vllm-openai:v0.12.0"
    per_node: int = 4
    workloads: Mapping[str, str] = field(default_factory=dict)  # replica -> another workload
    pod_labels: Mapping[str, str] = field(default_factory=dict)  # kube_pod_labels of every pod


class StackFleet(RawFleet):
    """The raw series of one fleet of a serving stack, with its cluster around it."""

    def __init__(
        self,
        fleet: Fleet,
        spec: RawSpec,
        site: Site,
        target: Target,
        extras: Mapping[str, Array] | None = None,
    ) -> None:
        super().__init__(fleet, spec)
        self.site = site
        self.target = target
        self.extras = dict(extras or {})
        self._gaps_due = False

    # --- names and addresses -----------------------------------------------------------
    def workload_of(self, name: str) -> str:
        return self.site.workloads.get(name, self.site.workload)

    def replicaset(self, workload: str) -> str:
        return f"{workload}-{_k8s_hash(self.site.namespace, workload, 'rs')}"

    def pod(self, name: str) -> str:
        suffix = _k8s_hash(self.f.name, name, "pod", length=5)
        if self.site.kind == "Deployment":
            return f"{self.replicaset(self.workload_of(name))}-{suffix}"
        return f"{self.workload_of(name)}-{suffix}"

    def deployment(self, name: str) -> str:
        return self.workload_of(name)

    def container(self, name: str) -> str:
        return self.target.container

    def image(self, name: str) -> str:
        return self.site.image

    def ip(self, name: str) -> str:
        i = self.f.names.index(name)
        return f"10.42.{self.site.subnet}.{11 + 7 * i + int(_digest(self.f.name, name, 'ip')[:2], 16) % 5}"

    def side_ip(self, pod: str) -> str:
        """The address of a pod beside the engines (a head, a frontend, a planner)."""
        return f"10.42.{self.site.subnet}.{200 + int(_digest(pod)[:2], 16) % 40}"

    def node(self, name: str) -> str:
        return f"gpu-node-{self.site.subnet}-{self.f.names.index(name) // self.site.per_node}"

    def engine_target(self, name: str) -> Labels:
        return self.target.labels(self.site.namespace, self.pod(name), self.ip(name))

    # --- hooks -------------------------------------------------------------------------
    def engine(self, name: str) -> None:
        """A replica's engine series in rawsynth's shape (`instance` = the replica)."""
        self._vllm(name, mixed=False)

    def engine_series(self, metric: str, labels: Labels, name: str) -> list[tuple[str, Labels]]:
        """How the stack names one engine series (none to drop it, several to copy it)."""
        return [(metric, labels)]

    def extra(self) -> None:
        """What stands beside the engines (after the engines' and the cluster's series)."""

    def cluster_pods(self) -> list[tuple[str, str, Labels]]:
        """(pod, workload, kube_pod_labels) of pods that serve no engine of this fleet."""
        return []

    # --- build -------------------------------------------------------------------------
    def _scrape_gaps(self) -> None:
        if self._gaps_due:
            super()._scrape_gaps()

    def build(self) -> StackFleet:
        if self.built:
            return self
        self.node_of = {name: (self.node(name), 0) for name in self.f.names}
        for name in self.f.names:
            self.engine(name)
            if self.f.kube_signals:
                self._kube_pod(name)
        self._relabel()
        if self.f.kube_signals:
            self.cluster()
        self.extra()
        self._gaps_due = True
        self._scrape_gaps()
        self.built = True
        return self

    def own(self, metric: str, name: str) -> list[Key]:
        """The keys of `metric` that replica `name`'s engine wrote (before relabelling)."""
        return [k for k in self.out.series if k[0] == metric and dict(k[1]).get("instance") == name]

    def _relabel(self) -> None:
        out = self.out
        series, fmt, target = dict(out.series), dict(out.fmt), dict(out.target)
        out.series.clear()
        out.fmt.clear()
        out.target.clear()
        for key, values in series.items():
            own = dict(key[1])
            replica = own.pop("instance", None)
            renamed = [(key[0], {**KSM, **own} if target[key] == "kube-state-metrics" else own)]
            if target[key].endswith("/engine") and replica is not None:
                renamed = [
                    (m, {**lab, **self.engine_target(replica)})
                    for m, lab in self.engine_series(key[0], own, replica)
                ]
            for metric, labels in renamed:
                self.emit(metric, labels, values, fmt[key], target[key])

    # --- kube-state-metrics ------------------------------------------------------------
    def ksm(self, metric: str, labels: Mapping[str, str], values: Array) -> None:
        self.emit(metric, {**KSM, **labels}, values, _fmt_int, "kube-state-metrics")

    def pod_labels(self, name: str) -> Labels:
        """kube_pod_labels' `label_*` of a replica's pod (empty: not written)."""
        return dict(self.site.pod_labels)

    def _pod_series(
        self, pod: str, workload: str, node: str, ip: str, labels: Labels, mask: Array, vanished: bool
    ) -> None:
        ns = self.site.namespace
        ones = self.finish(np.ones(self.n), mask, vanished)
        own = {"namespace": ns, "pod": pod, "uid": _uuid(_digest(pod, "uid"))}
        owner_kind, owner = self.site.kind, workload
        if self.site.kind == "Deployment":
            owner_kind, owner = "ReplicaSet", self.replicaset(workload)
        host = {
            "host_ip": f"10.0.{self.site.subnet}.{20 + int(node[-1])}",
            "host_network": "false",
            "node": node,
        }
        created = {
            "pod_ip": ip,
            "created_by_kind": owner_kind,
            "created_by_name": owner,
            "priority_class": "",
        }
        self.ksm("kube_pod_info", {**own, **host, **created}, ones)
        owned = {"owner_kind": owner_kind, "owner_name": owner, "owner_is_controller": "true"}
        self.ksm("kube_pod_owner", {**own, **owned}, ones)
        if labels:
            self.ksm("kube_pod_labels", {**own, **labels}, ones)

    def cluster(self) -> None:
        """Pods (placement, owners, labels) and their workloads' replica counts."""
        counts: dict[str, list[float]] = {}
        for name in self.f.names:
            mask = self.present("restarts", name)
            raw = self._raw("restarts", name)
            vanished = bool(raw is not None and np.isneginf(raw).any())
            workload = self.workload_of(name)
            pod, node, labels = self.pod(name), self.node(name), self.pod_labels(name)
            self._pod_series(pod, workload, node, self.ip(name), labels, mask, vanished)
            counts.setdefault(workload, []).append(1.0)
        for pod, workload, labels in self.cluster_pods():
            ip, node = self.side_ip(pod), f"cpu-node-{self.site.subnet}-0"
            self._pod_series(pod, workload, node, ip, labels, np.ones(self.n, dtype=bool), False)
            counts.setdefault(workload, []).append(1.0)
        if self.site.kind != "Deployment":
            return
        ready = self.f.series.get(("replicas_ready", ()))
        desired = self.f.series.get(("replicas_desired", ()))
        total = len(self.f.names)
        for workload, pods in sorted(counts.items()):
            ns = self.site.namespace
            owned = {"owner_kind": "Deployment", "owner_name": workload, "owner_is_controller": "true"}
            self.ksm(
                "kube_replicaset_owner",
                {"namespace": ns, "replicaset": self.replicaset(workload), **owned},
                np.ones(self.n),
            )
            share = len(pods) / total
            want = np.full(self.n, len(pods)) if desired is None else np.round(_fill(desired, total) * share)
            have = np.round(_fill(ready, total) * share) if ready is not None else want
            want, have = np.maximum(want, 0), np.minimum(np.maximum(have, 0), want)
            labels = {"deployment": workload, "namespace": ns}
            for metric, values in (
                ("kube_deployment_spec_replicas", want),
                ("kube_deployment_status_replicas", want),
                ("kube_deployment_status_replicas_ready", have),
                ("kube_deployment_status_replicas_available", have),
                ("kube_deployment_status_replicas_updated", want),
            ):
                self.ksm(metric, labels, values)

    # --- helpers for stacks ------------------------------------------------------------
    def life(self, name: str, target: str) -> _Life:
        """A replica's engine presence, as rawsynth's histograms and counters take it."""
        mask, vanished = self._engine_mask(name)
        uptime = self._uptime(name, "engine")
        return _Life(self.segments(mask), mask, vanished, uptime, target)

    def steady_counter(
        self, metric: str, labels: Mapping[str, str], inc: Array, life: _Life, integer: bool = True
    ) -> None:
        values = self.counter(inc, life.segments, self.history(inc, life.mask, life.uptime), integer)
        fmt = _fmt_int if integer else (lambda v: f"{v:.10g}")
        self.emit(metric, labels, self.finish(values, life.mask, life.vanished), fmt, life.target)

    def gauge(
        self, metric: str, labels: Mapping[str, str], values: Array, life: _Life, fmt: Fmt = _fmt_gauge
    ) -> None:
        self.emit(metric, labels, self.finish(values, life.mask, life.vanished), fmt, life.target)

    def put(
        self, metric: str, labels: Mapping[str, str], values: Array, where: str, fmt: Fmt = _fmt_int
    ) -> None:
        self.emit(metric, labels, values, fmt, where)

    def poisson(self, mean: Array) -> Array:
        return np.asarray(self.rng.poisson(np.clip(mean, 0, None)), dtype=float)

    def own_values(self, metric: str, name: str) -> Array:
        [key] = self.own(metric, name)
        return self.out.series[key]

    def increments(self, metric: str, name: str, key: Key | None = None) -> Array:
        """Per-step increments of a counter rawsynth wrote for this replica (0 at a restart)."""
        values = _fill(self.out.series[key] if key is not None else self.own_values(metric, name), 0.0)
        inc = np.diff(values, prepend=values[0])
        return np.asarray(np.where(inc < 0, values, inc), dtype=float)

    def extra_signal(self, key: str, name: str, default: float) -> Array:
        """A stack-only input of the story (not a signal of the twin): per replica or fleet-wide."""
        values = self.extras.get(f"{key}:{name}", self.extras.get(key))
        return np.full(self.n, default) if values is None else np.asarray(values, dtype=float)

    def go_le(self, metric: str) -> None:
        """`le` as Go's and Rust's clients write it (1, not 1.0)."""
        for key in [k for k in self.out.series if k[0] == metric]:
            labels = dict(key[1])
            labels["le"] = _go_float(float(labels["le"]))
            values, fmt, where = self.out.series.pop(key), self.out.fmt.pop(key), self.out.target.pop(key)
            self.emit(metric, labels, values, fmt, where)


# --- Ray Serve LLM ---------------------------------------------------------------------------
@dataclass
class RayApp:
    """A Serve application of LLM replicas in one KubeRay cluster."""

    application: str
    route: str
    cluster: str = "raycluster-llm"
    session: str = "session_2026-10-14_09-12-33_482915_1"
    version: str = "2.60.0"
    head: bool = True  # this app's StackFleet writes the head pod and the controller's own series
    pooling: bool = False  # an embedding model: no decode, no per-token histograms


class RayServeFleet(StackFleet):
    """Ray Serve LLM (Ray 2.60, vLLM 0.29): vLLM's RayPrometheusStatLogger turns `vllm:x` into
    `ray_vllm_x`, tagged with Ray's own labels and the replica's `ReplicaId` and `WorkerId`,
    with no deployment or pod of its own; the Serve controller and proxy on the head pod add the
    `ray_serve_*` families per application. Worker pods are owned by the RayCluster itself."""

    def __init__(self, fleet: Fleet, spec: RawSpec, site: Site, app: RayApp) -> None:
        cluster = {"ray_io_cluster": app.cluster}
        super().__init__(
            fleet,
            spec,
            site,
            Target("prometheus-system/ray-workers-monitor", "metrics", 8080, "ray-worker", extra=cluster),
        )
        self.app = app
        self.deployment_name = "LLMServer:" + spec.model.replace("/", "--").replace(".", "_")
        pod, svc = f"{app.cluster}-head-{_k8s_hash(app.cluster, 'head', length=5)}", f"{app.cluster}-head-svc"
        self.head_ip = f"10.42.10.{10 + int(_digest(app.cluster)[:2], 16) % 40}"  # one head for every app
        self.head = Target(svc, "metrics", 8080, "ray-head", service=svc, extra=cluster).labels(
            site.namespace, pod, self.head_ip
        )

    def unique_id(self, name: str) -> str:
        h = _digest(self.f.name, name, "replica")
        return "".join(
            "abcdefghijklmnopqrstuvwxyz0123456789"[int(h[k : k + 2], 16) % 36] for k in range(0, 16, 2)
        )

    def replica_id(self, name: str) -> str:
        return f"{self.app.application}#{self.deployment_name}#{self.unique_id(name)}"

    def ray_tags(self, node_ip: str, *worker: str) -> Labels:
        """Ray's own tags on every metric a worker process records; a WorkerID is 28 bytes."""
        session, version = self.app.session, self.app.version
        tags = {
            "Component": "core_worker",
            "NodeAddress": node_ip,
            "SessionName": session,
            "Version": version,
        }
        return {**tags, "WorkerId": _digest(*worker, "worker")[:56]}

    def side_ip(self, pod: str) -> str:
        return self.head_ip if pod == self.head["pod"] else super().side_ip(pod)

    def pod(self, name: str) -> str:
        return f"{self.app.cluster}-gpu-group-worker-{_k8s_hash(self.f.name, name, 'pod', length=5)}"

    def engine(self, name: str) -> None:
        self._vllm(name, mixed=False)
        if self.app.pooling:  # an embedding engine decodes nothing
            for metric in (
                "inter_token_latency_seconds",
                "request_generation_tokens",
                "time_to_first_token_seconds",
            ):
                for key in [
                    k
                    for part in ("_bucket", "_sum", "_count")
                    for k in self.own(f"vllm:{metric}{part}", name)
                ]:
                    self.out.series.pop(key), self.out.fmt.pop(key), self.out.target.pop(key)

    def engine_series(self, metric: str, labels: Labels, name: str) -> list[tuple[str, Labels]]:
        tags = {**self.ray_tags(self.ip(name), self.f.name, name), "ReplicaId": self.replica_id(name)}
        return [("ray_" + metric.replace(":", "_"), {**labels, **tags})]

    def cluster_pods(self) -> list[tuple[str, str, Labels]]:
        return [(self.head["pod"], self.app.cluster, {})] if self.app.head else []

    def extra(self) -> None:
        """Per replica its processing queries (the replica actor's own worker), its health (the
        controller's), and per application the proxy's HTTP families and queue (head pod)."""
        app, dep = self.app.application, self.deployment_name
        where = "ray-head"
        head_ip = self.head_ip
        everywhere = _Life([(0, self.n)], np.ones(self.n, dtype=bool), False, 2 * 86400.0, where)
        controller = {**self.head, **self.ray_tags(head_ip, self.app.cluster, "controller")}
        proxy = {**self.head, **self.ray_tags(head_ip, self.app.cluster, "proxy")}
        n_all = np.zeros(self.n)
        for name in self.f.names:
            life = self.life(name, f"{name}/engine")
            labels = {**self.engine_target(name), **self.ray_tags(self.ip(name), self.f.name, name)}
            serve = {"application": app, "deployment": dep, "replica": self.unique_id(name)}
            ongoing = self.poisson(self.sig("requests_running", name) + self.sig("queue_waiting", name))
            self.gauge("ray_serve_replica_processing_queries", {**labels, **serve}, ongoing, life, _fmt_int)
            self.put(
                "ray_serve_deployment_replica_healthy",
                {**controller, **serve},
                np.where(life.mask, 1.0, 0.0),
                where,
            )
            n_all += np.where(life.mask, np.clip(self.sig("request_rate", name), 0, None), 0.0) * self.dt
        route = {**proxy, "application": app, "route": self.app.route}
        n = self.poisson(n_all)
        errors = self.poisson(n * 0.002)
        for metric, labels, inc in (
            ("ray_serve_num_http_requests_total", {"method": "POST", "status_code": "200"}, n),
            ("ray_serve_num_http_requests_total", {"method": "POST", "status_code": "500"}, errors),
            ("ray_serve_num_http_error_requests_total", {"error_code": "500", "method": "POST"}, errors),
        ):
            self.steady_counter(metric, {**route, **labels}, inc, everywhere)
        e2e_ms = np.mean([self.sig("e2e_p99_seconds", x) for x in self.f.names], axis=0) * 1000.0 + 15.0
        edges = tuple(float(v) for v in RAY_SERVE_LATENCY_MS)
        self._hist(
            "ray_serve_http_request_latency_ms",
            {**route, "status_code": "200"},
            edges,
            {0.99: e2e_ms},
            n,
            everywhere,
            sigma=0.45,
            jitter=0.04,
        )
        self.go_le("ray_serve_http_request_latency_ms_bucket")
        queued = self.poisson(np.sum([self.sig("queue_waiting", x) for x in self.f.names], axis=0) * 0.3)
        deployment = {"application": app, "deployment": dep}
        self.put("ray_serve_deployment_queued_queries", {**proxy, **deployment}, queued, where)
        target = np.full(self.n, float(len(self.f.names)))
        self.put("ray_serve_autoscaling_target_replicas", {**controller, **deployment}, target, where)


# --- KServe --------------------------------------------------------------------------------
class KServeFleet(StackFleet):
    """KServe 0.21: an InferenceService's huggingfaceserver runtime is vLLM 0.24 serving
    `model_name="/mnt/models"` whatever the service, scraped by the `kubernetes-pods`
    annotation job through Knative's queue-proxy, which adds the revision's `service_name`,
    `configuration_name` and `revision_name`; a replica's revision is its Deployment's
    (`<isvc>-predictor-0000N-deployment`). An LLMInferenceService (`knative=False`) serves its
    own model name from a plain Deployment; both are told apart by their pods' labels."""

    def __init__(self, fleet: Fleet, spec: RawSpec, site: Site, isvc: str, knative: bool = True) -> None:
        container = "kserve-container" if knative else "main"
        target = Target("kubernetes-pods", "", 9088 if knative else 8000, container, plain=True)
        super().__init__(fleet, spec, site, target)
        self.isvc, self.knative = isvc, knative

    def revision(self, name: str) -> str:
        return self.workload_of(name).removesuffix("-deployment")

    def engine_series(self, metric: str, labels: Labels, name: str) -> list[tuple[str, Labels]]:
        if not self.knative:
            return [(metric, labels)]
        config = f"{self.isvc}-predictor"
        knative = {"service_name": config, "configuration_name": config, "revision_name": self.revision(name)}
        return [(metric, {**labels, **knative})]

    def pod_labels(self, name: str) -> Labels:
        if not self.knative:
            return dict(self.site.pod_labels)
        revision, config = self.revision(name), f"{self.isvc}-predictor"
        knative = {
            f"label_serving_knative_dev_{k}": v
            for k, v in (("revision", revision), ("configuration", config), ("service", config))
        }
        isvc = {"label_serving_kserve_io_inferenceservice": self.isvc, "label_component": "predictor"}
        return {**isvc, **knative, "label_app": revision}


# --- vLLM 0.33 -------------------------------------------------------------------------------
class Vllm033Fleet(StackFleet):
    """vLLM 0.33: V1's names plus the waiting queue split by reason (capacity or deferred
    admission; their sum is `vllm:num_requests_waiting`), engine-side admission rejections, the
    API server's HTTP counts by status class, the KV-offload tier's prefix hits
    (`vllm:external_prefix_cache_*`, prompt tokens by source), speculative decoding and the
    sleep state. Stack-only inputs: `local_share` (the share of prefix hits the GPU's own cache
    still serves; the offload tier serves the rest), `deferred_share`, `accept_rate`."""

    def engine(self, name: str) -> None:
        self._vllm(name, mixed=False)
        life = self.life(name, f"{name}/engine")
        base = {"model_name": self.spec.model, "engine": "0", "instance": name}
        waiting = self.own_values("vllm:num_requests_waiting", name)
        share = np.clip(self.extra_signal("deferred_share", name, 0.08), 0, 1)
        deferred = self.rng.binomial(np.nan_to_num(waiting).astype(int), share).astype(float)
        deferred[~np.isfinite(waiting)] = np.nan
        for reason, values in (("capacity", waiting - deferred), ("deferred", deferred)):
            self.put("vllm:num_requests_waiting_by_reason", {**base, "reason": reason}, values, life.target)
        # rawsynth's prefix hits are the whole hit ratio: the GPU's own cache keeps `local_share`
        # of them, the offload tier (LMCache) serves the rest
        [hits_key] = self.own("vllm:prefix_cache_hits_total", name)
        queries = self.increments("vllm:prefix_cache_queries_total", name)
        hits = self.increments("vllm:prefix_cache_hits_total", name)
        local = np.floor(hits * np.clip(self.extra_signal("local_share", name, 0.97), 0, 1))
        external = hits - local
        start = float(self.out.series[hits_key][np.flatnonzero(life.mask)[0]]) if life.mask.any() else 0.0
        self.out.series[hits_key] = self.finish(
            self.counter(local, life.segments, start), life.mask, life.vanished
        )
        self.steady_counter("vllm:external_prefix_cache_queries_total", base, queries - local, life)
        self.steady_counter("vllm:external_prefix_cache_hits_total", base, external, life)
        prompt = self.increments("vllm:prompt_tokens_total", name)
        sources = {
            "local_compute": prompt - local - external,
            "local_cache_hit": local,
            "external_kv_transfer": external,
        }
        for source, inc in sources.items():
            self.steady_counter(
                "vllm:prompt_tokens_by_source_total", {**base, "source": source}, np.clip(inc, 0, None), life
            )
        drafts = np.round(self.increments("vllm:generation_tokens_total", name) * 0.9 / 3)
        accept = np.clip(self.extra_signal("accept_rate", name, 0.68), 0, 1)
        accepted = self.rng.binomial((3 * drafts).astype(int), accept).astype(float)
        self.steady_counter("vllm:spec_decode_num_drafts_total", base, drafts, life)
        self.steady_counter("vllm:spec_decode_num_draft_tokens_total", base, 3 * drafts, life)
        self.steady_counter("vllm:spec_decode_num_accepted_tokens_total", base, accepted, life)
        for state, value in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
            labels = {**base, "sleep_state": state}
            self.gauge("vllm:engine_sleep_state", labels, np.full(self.n, value), life, _fmt_int)
        finished = self.own("vllm:request_success_total", name)
        n = np.sum([self.increments("", name, k) for k in finished], axis=0)
        rejected = self.poisson(n * self.extra_signal("rejected_share", name, 0.001))
        self.steady_counter(
            "vllm:admission_rejections_total", {**base, "reason": "queue_full"}, rejected, life
        )
        http = {"instance": name, "handler": "/v1/chat/completions", "method": "POST"}
        for status, inc in (("2xx", n), ("4xx", self.poisson(n * 0.004)), ("5xx", rejected)):
            self.steady_counter("http_requests_total", {**http, "status": status}, inc, life)
        scrapes = {"instance": name, "handler": "/metrics", "method": "GET", "status": "2xx"}
        self.steady_counter("http_requests_total", scrapes, np.full(self.n, self.dt / 15.0), life)


# --- SGLang with priority scheduling, metrics for all schedulers, TP=2 -----------------------
class SglangRanksFleet(StackFleet):
    """SGLang 0.5.23 with `--enable-priority-scheduling` and `--enable-metrics-for-all-schedulers`
    at TP=2: every scheduler series exists once per `tp_rank` with the same value, and the queue
    total (`priority=""`, which Prometheus stores without the label) sits beside per-priority
    series. Stack-only input: `low_priority_share` of the queue (priority "1", the batch
    client's)."""

    RANKS = ("0", "1")

    def engine(self, name: str) -> None:
        self._sglang(name)
        [key] = self.own("sglang:num_queue_reqs", name)
        total = self.out.series[key]
        finite = np.isfinite(total)
        share = np.clip(self.extra_signal("low_priority_share", name, 0.3), 0, 1)
        low = np.where(finite, self.rng.binomial(np.nan_to_num(total).astype(int), share), np.nan)
        for priority, values in (("0", total - low), ("1", low)):
            self.put(
                "sglang:num_queue_reqs", {**dict(key[1]), "priority": priority}, values, self.out.target[key]
            )

    def engine_series(self, metric: str, labels: Labels, name: str) -> list[tuple[str, Labels]]:
        if "tp_rank" not in labels:
            return [(metric, labels)]
        return [(metric, {**labels, "tp_rank": rank}) for rank in self.RANKS]


# --- writing -----------------------------------------------------------------------------------
def write_stacks(
    path: str,
    name: str,
    symptom: str | None,
    at: str | None,
    expect: dict[str, Any] | None,
    parts: list[StackFleet],
    description: str,
    header: str = "",
) -> StackFleet:
    """Build every fleet of one Prometheus and write them as one raw fixture."""
    first = parts[0].build()
    for other in parts[1:]:
        other.build()
        for key, values in other.out.series.items():
            if key in first.out.series:
                raise ValueError(f"series written by two fleets: {key}")
            first.emit(key[0], dict(key[1]), values, other.out.fmt[key], other.out.target[key])
    write_document(path, first.document(name, symptom, at, expect, None, description), header)
    return first


__all__ = [
    "RAY_SERVE_LATENCY_MS",
    "Fmt",
    "KServeFleet",
    "Labels",
    "RayApp",
    "RayServeFleet",
    "SglangRanksFleet",
    "Site",
    "StackFleet",
    "Target",
    "Vllm033Fleet",
    "write_stacks",
]
