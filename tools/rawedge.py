"""Raw series of the edge in front of a synthesised fleet, and of the cluster around it, as a
Prometheus Operator scrape gives them.

`tools.rawsynth.RawFleet` plays the engines (vLLM here) forward from a `tools.synth.Fleet`;
`EdgeFleet` adds what stands around them in a Kubernetes cluster and rewrites every series
to the label set a real scrape gives it:

- the engines keep their own labels (`model_name`, `engine`) and get their target's
  (`namespace`, `pod`, `container`, `job`, `endpoint`, `instance` = pod IP:port, and
  `service` behind a ServiceMonitor), not the replica's short name;
- kube-state-metrics (honoured labels, as kube-prometheus-stack scrapes it): the pods'
  `kube_pod_info` (node, pod IP), owners (`kube_pod_owner` -> ReplicaSet ->
  Deployment), the last termination's reason and exit code of a container that
  restarted before the recording, and the engine Service's Endpoints addresses
  (`kube_endpoint_address{endpoint, ip, ready}`), ready while the engine serves;
- the kubelet's prober (`prober_probe_total{probe_type, result}` from /metrics/probes,
  honoured labels, one target per node): Startup probes failing while a new pod loads
  its model, then Readiness and Liveness succeeding;
- the edge, one of:
  - `epp`: the Gateway API Inference Extension's endpoint picker (v1.x names,
    reference/metrics.md 5.2): requests, errors by `error_code`, the request-duration
    histogram on its real buckets, running requests, the pool's view of the engines
    (average queue and KV, per-pod queue, ready pods) and the flow-control queue. The
    fleet series `edge_wait_seconds` is the time a request spends in the picker before
    an engine gets it: the flow-control queue holds rate x wait requests (Little's law)
    and the duration P99 is the engines' e2e P99 plus that wait's tail, at an unchanged
    engine request rate;
  - `router`: the vLLM production-stack router (reference/metrics.md 5.1): per backend
    URL (`server`) the engines' running and waiting counts it re-exports under the
    engines' own names, `healthy_pods_total`, its own in-flight counts, the latency
    histogram, tokens, and `request_errors_total`; `stale` backends are kept after
    their pod went away: the router still counts them healthy, sends them their share
    of the requests, and every one fails to connect.

Seeded like RawFleet: the same spec always writes the same file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tools.rawsynth import (
    Array,
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

EPP_DURATION_BUCKETS = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30,
    45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600,
)  # fmt: skip
ROUTER_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
KSM = {
    "container": "kube-state-metrics",
    "endpoint": "http",
    "instance": "10.42.100.14:8080",
    "job": "kube-state-metrics",
    "namespace": "monitoring",
    "pod": "kube-prometheus-stack-kube-state-metrics-5d7f9c8b6-hx2lq",
    "service": "kube-prometheus-stack-kube-state-metrics",
}
"""kube-state-metrics' own target labels; its series' own `namespace`, `pod`, `container`
win where they have them (honorLabels: true)."""
EDGES = ("epp", "router")
EDGE_WAIT = "edge_wait_seconds"


@dataclass
class EdgeSpec:
    """The cluster around the engines and the edge in front of them."""

    edge: str = "epp"
    deployment: str = "vllm-llama3-8b-instruct"
    engine_job: str = "llm/vllm-llama3-8b-instruct"  # a PodMonitor's job is namespace/name
    engine_service: str = ""  # behind a ServiceMonitor: the Service (also the job)
    engine_endpoint: str = "http"
    engine_port: int = 8000
    endpoints: str = "vllm-llama3-8b-instruct"  # the Service whose Endpoints hold the engine pods
    load_seconds: float = 150.0  # a new pod loads its model this long before its engine serves
    crashed: dict[str, int] = field(default_factory=dict)  # replica -> exit code of a crash before
    stale: tuple[str, ...] = ()  # router backends kept after their pod went away


def _k8s_hash(*parts: str, length: int = 10) -> str:
    """A pod-template or pod-name hash as Kubernetes writes them (no vowels, no 0, 1, 3)."""
    h = _digest(*parts)
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[int(h[k : k + 2], 16) % len(alphabet)] for k in range(0, 2 * length, 2))


def _go_float(value: float) -> str:
    """A float as Go's Prometheus client writes it (`strconv.FormatFloat(v, 'g', -1, 64)`)."""
    if math.isinf(value):
        return "+Inf"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


class EdgeFleet(RawFleet):
    """The raw series of a Fleet's vLLM engines, their cluster and the edge in front of them."""

    def __init__(self, fleet: Fleet, spec: RawSpec, edge: EdgeSpec) -> None:
        super().__init__(fleet, spec)
        if edge.edge not in EDGES:
            raise ValueError(f"unknown edge {edge.edge!r}; known: {', '.join(EDGES)}")
        self.edge = edge
        self.rs_hash = _k8s_hash(fleet.name, edge.deployment, "rs")
        self._gaps_due = False

    # --- names and addresses -----------------------------------------------------------
    def deployment(self, name: str) -> str:
        return self.edge.deployment

    def pod(self, name: str) -> str:
        return f"{self.edge.deployment}-{self.rs_hash}-{_k8s_hash(self.f.name, name, 'pod', length=5)}"

    def node_index(self, name: str) -> int:
        return self.f.names.index(name) // 4

    def ip(self, name: str) -> str:
        i = self.f.names.index(name)
        return f"10.42.{i // 4 + 1}.{12 + 9 * (i % 4) + int(_digest(self.f.name, name, 'ip')[:2], 16) % 7}"

    def address(self, name: str) -> str:
        return f"{self.ip(name)}:{self.edge.engine_port}"

    def engine_target(self, name: str) -> dict[str, str]:
        labels = {
            "container": self.container(name),
            "endpoint": self.edge.engine_endpoint,
            "instance": self.address(name),
            "job": self.edge.engine_service or self.edge.engine_job,
            "namespace": self.spec.namespace,
            "pod": self.pod(name),
        }
        if self.edge.engine_service:
            labels["service"] = self.edge.engine_service
        return labels

    # --- build -----------------------------------------------------------------------
    def _scrape_gaps(self) -> None:
        if self._gaps_due:
            super()._scrape_gaps()

    def build(self) -> EdgeFleet:
        if self.built:
            return self
        super().build()
        self._relabel()
        self._cluster()
        for name in self.f.names:
            self._prober(name)
        if self.edge.edge == "epp":
            self._epp()
        else:
            self._router()
        self._gaps_due = True
        self._scrape_gaps()
        return self

    def _relabel(self) -> None:
        """Every series RawFleet wrote, with the labels its scrape gives it instead of `instance`."""
        out = self.out
        series, fmt, target = dict(out.series), dict(out.fmt), dict(out.target)
        out.series.clear()
        out.fmt.clear()
        out.target.clear()
        for key, values in series.items():
            metric, labels = key
            own = dict(labels)
            replica = own.pop("instance", None)
            where = target[key]
            if where.endswith("/engine") and replica is not None:
                own.update(self.engine_target(replica))
            elif where == "kube-state-metrics":
                own = {**KSM, **own}
            self.emit(metric, own, values, fmt[key], where)
        for name, code in self.edge.crashed.items():
            self._crashed(name, code)

    def _pod_labels(self, name: str) -> dict[str, str]:
        pod = self.pod(name)
        return {"namespace": self.spec.namespace, "pod": pod, "uid": _uuid(_digest(pod, "uid"))}

    def _ksm(self, metric: str, labels: Mapping[str, str], values: Array) -> None:
        self.emit(metric, {**KSM, **labels}, values, _fmt_int, "kube-state-metrics")

    def _pod_mask(self, name: str) -> tuple[Array, bool]:
        raw = self._raw("restarts", name)
        return self.present("restarts", name), bool(raw is not None and np.isneginf(raw).any())

    def _crashed(self, name: str, code: int) -> None:
        """A container that restarted once before the recording: its last termination is Error."""
        mask, vanished = self._pod_mask(name)
        labels = {**self._pod_labels(name), "container": self.container(name)}
        ones = self.finish(np.ones(self.n), mask, vanished)
        self._ksm("kube_pod_container_status_last_terminated_reason", {**labels, "reason": "Error"}, ones)
        self._ksm(
            "kube_pod_container_status_last_terminated_exitcode",
            labels,
            self.finish(np.full(self.n, float(code)), mask, vanished),
        )
        key = next(k for k in self.out.series if k[0] == "kube_pod_container_status_restarts_total" and (
            dict(k[1]).get("pod") == labels["pod"]))  # fmt: skip
        self.out.series[key] = self.out.series[key] + 1.0

    def _cluster(self) -> None:
        """kube-state-metrics' pod placement and owners, and the Endpoints of the engine Service."""
        ns = self.spec.namespace
        rs = f"{self.edge.deployment}-{self.rs_hash}"
        self._ksm(
            "kube_replicaset_owner",
            {
                "namespace": ns,
                "replicaset": rs,
                "owner_kind": "Deployment",
                "owner_name": self.edge.deployment,
                "owner_is_controller": "true",
                "pod": KSM["pod"],
            },
            np.ones(self.n),
        )
        for name in self.f.names:
            mask, vanished = self._pod_mask(name)
            labels = self._pod_labels(name)
            node_index = self.node_index(name)
            self._ksm(
                "kube_pod_info",
                {
                    **labels,
                    "host_ip": f"10.0.1.{20 + node_index}",
                    "host_network": "false",
                    "node": f"gpu-node-{node_index:02d}",
                    "pod_ip": self.ip(name),
                    "created_by_kind": "ReplicaSet",
                    "created_by_name": rs,
                    "priority_class": "",
                },
                self.finish(np.ones(self.n), mask, vanished),
            )
            self._ksm(
                "kube_pod_owner",
                {**labels, "owner_kind": "ReplicaSet", "owner_name": rs, "owner_is_controller": "true"},
                self.finish(np.ones(self.n), mask, vanished),
            )
            serving, _ = self._engine_mask(name)
            for ready, when in (("true", mask & serving), ("false", mask & ~serving)):
                if when.any():
                    self._ksm(
                        "kube_endpoint_address",
                        {
                            "namespace": ns,
                            "endpoint": self.edge.endpoints,
                            "ip": self.ip(name),
                            "ready": ready,
                        },
                        self.finish(np.ones(self.n), when, vanished or not when[-1]),
                    )

    def _prober(self, name: str) -> None:
        """The kubelet's probe counts: Startup fails every 10 s while the model loads, then
        Readiness and Liveness succeed every 10 s."""
        mask, vanished = self._pod_mask(name)
        serving, _ = self._engine_mask(name)
        node_index = self.node_index(name)
        labels = {
            "container": self.container(name),
            "namespace": self.spec.namespace,
            "pod": self.pod(name),
            "pod_uid": self._pod_labels(name)["uid"],
            "endpoint": "https-metrics",
            "instance": f"10.0.1.{20 + node_index}:10250",
            "job": "kubelet",
            "metrics_path": "/metrics/probes",
            "node": f"gpu-node-{node_index:02d}",
            "service": "kubelet",
        }
        target = f"gpu-node-{node_index:02d}/kubelet"
        per_step = self.dt / 10.0
        segments = self.segments(mask)
        loading = mask & ~serving
        uptime = self._uptime(name, "engine")
        started = np.zeros(self.n)
        first = np.flatnonzero(serving)
        if loading.any() and first.size:
            started[first[0]] = 1.0
        succeeded = np.where(serving, per_step, 0.0)
        runs: list[tuple[str, str, Array, float | None]] = [
            ("Startup", "successful", started, 0.0 if loading.any() else 1.0),
            ("Readiness", "successful", succeeded, None),
            ("Liveness", "successful", succeeded, None),
        ]
        if loading.any():
            runs.append(("Startup", "failed", np.where(loading, per_step, 0.0), 0.0))
        for probe, result, inc, offset in runs:
            start = self.history(inc, mask, uptime) if offset is None else offset
            values = self.counter(inc, segments, start)
            own = {**labels, "probe_type": probe, "result": result}
            self.emit("prober_probe_total", own, self.finish(values, mask, vanished), _fmt_int, target)

    # --- the edge's inputs -------------------------------------------------------------
    def _serving(self) -> dict[str, Array]:
        return {name: self._engine_mask(name)[0] for name in self.f.names}

    def _fleet_rate(self, serving: Mapping[str, Array]) -> Array:
        return np.asarray(
            sum(
                np.where(serving[n], np.clip(self.sig("request_rate", n), 0, None), 0.0) for n in self.f.names
            ),
            dtype=float,
        )

    def _mean(self, signal: str, serving: Mapping[str, Array]) -> Array:
        total = sum(np.where(serving[n], self.sig(signal, n), 0.0) for n in self.f.names)
        count = sum(serving[n].astype(float) for n in self.f.names)
        return np.asarray(total / np.clip(count, 1, None), dtype=float)

    def _wait(self) -> Array:
        raw = self.f.series.get((EDGE_WAIT, ()))
        return _fill(raw, 0.02) if raw is not None else np.full(self.n, 0.02)

    def _poisson(self, mean: Array) -> Array:
        return self.rng.poisson(np.clip(mean, 0, None)).astype(float)

    # --- the endpoint picker ---------------------------------------------------------------
    def _epp(self) -> None:
        ns, model, pool = self.spec.namespace, self.spec.model, self.edge.deployment
        epp = f"{pool}-epp"
        target = {
            "container": "epp",
            "endpoint": "http-metrics",
            "instance": "10.42.100.21:9090",
            "job": epp,
            "namespace": ns,
            "pod": f"{epp}-{_k8s_hash(epp, 'rs', length=9)}-{_k8s_hash(epp, 'pod', length=5)}",
            "service": epp,
        }
        where = "epp"
        everywhere = np.ones(self.n, dtype=bool)
        uptime = 3 * 86400.0

        def counter(metric: str, labels: Mapping[str, str], inc: Array) -> None:
            values = self.counter(inc, [(0, self.n)], self.history(inc, everywhere, uptime))
            self.emit(metric, {**target, **labels}, values, _fmt_int, where)

        def gauge(metric: str, labels: Mapping[str, str], values: Array, fmt: Any = _fmt_gauge) -> None:
            self.emit(metric, {**target, **labels}, values, fmt, where)

        serving = self._serving()
        rate = self._fleet_rate(serving)
        wait = self._wait()
        n = self._poisson(rate * self.dt)
        objective = {"model_name": model, "target_model_name": model}
        counter("inference_objective_request_total", {**objective, "priority": "0"}, n)
        for code, share in (("ModelServerError", 0.0005), ("ResourceExhausted", 0.001)):
            counter(
                "inference_objective_request_error_total",
                {**objective, "error_code": code},
                self._poisson(n * share),
            )
        p99 = self._mean("e2e_p99_seconds", serving) + 1.6 * wait
        life = _Life([(0, self.n)], everywhere, False, uptime, where)
        self._hist(
            "inference_objective_request_duration_seconds",
            {**target, **objective},
            EPP_DURATION_BUCKETS,
            {0.99: p99},
            n,
            life=life,
            sigma=0.5,
            jitter=0.04,
        )
        queued = self._poisson(rate * wait)
        flow = {"fairness_id": "default", "priority": "0", "inference_pool": pool, **objective}
        gauge("inference_extension_flow_control_queue_size", flow, queued, _fmt_int)
        engines = sum(
            np.where(serving[x], self.sig("requests_running", x) + self.sig("queue_waiting", x), 0.0)
            for x in self.f.names
        )
        gauge(
            "inference_objective_running_requests",
            {"model_name": model},
            self._poisson(engines + queued),
            _fmt_int,
        )
        gauge(
            "inference_pool_average_kv_cache_utilization",
            {"name": pool},
            self._mean("kv_usage_ratio", serving),
        )
        gauge("inference_pool_average_queue_size", {"name": pool}, self._mean("queue_waiting", serving))
        ready = sum(serving[x].astype(float) for x in self.f.names)
        gauge("inference_pool_ready_pods", {"name": pool}, np.asarray(ready, dtype=float), _fmt_int)
        for x in self.f.names:
            per_pod = np.where(serving[x], self.sig("queue_waiting", x), np.nan)
            labels = {"model_server_pod": self.pod(x), "name": pool}
            gauge("inference_pool_per_pod_queue_size", labels, self.finish(per_pod, serving[x], False))
        info = {"build_ref": "v1.5.0", "commit": "df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849"}
        gauge("inference_extension_info", info, np.ones(self.n), _fmt_int)
        self._edge_pod(target["pod"], epp)
        self._go_buckets("inference_objective_request_duration_seconds_bucket")

    def _go_buckets(self, metric: str) -> None:
        """`le` as Go's client writes it (1, not 1.0)."""
        for key in [k for k in self.out.series if k[0] == metric]:
            labels = dict(key[1])
            labels["le"] = _go_float(float(labels["le"]))
            values, fmt, where = self.out.series.pop(key), self.out.fmt.pop(key), self.out.target.pop(key)
            self.emit(metric, labels, values, fmt, where)

    def _edge_pod(self, pod: str, deployment: str) -> None:
        """kube-state-metrics' view of the edge's own pod (it serves no engine)."""
        ns = self.spec.namespace
        rs = pod.rsplit("-", 1)[0]
        labels = {"namespace": ns, "pod": pod, "uid": _uuid(_digest(pod, "uid"))}
        ones = np.ones(self.n)
        info = {
            **labels,
            "host_ip": "10.0.1.10",
            "host_network": "false",
            "node": "system-node-00",
            "pod_ip": "10.42.100." + str(20 + int(_digest(pod)[:2], 16) % 30),
            "created_by_kind": "ReplicaSet",
            "created_by_name": rs,
            "priority_class": "",
        }
        self._ksm("kube_pod_info", info, ones)
        owner = {**labels, "owner_kind": "ReplicaSet", "owner_name": rs, "owner_is_controller": "true"}
        self._ksm("kube_pod_owner", owner, ones)
        rs_owner = {
            "namespace": ns,
            "replicaset": rs,
            "owner_kind": "Deployment",
            "owner_name": deployment,
            "owner_is_controller": "true",
            "pod": KSM["pod"],
        }
        self._ksm("kube_replicaset_owner", rs_owner, ones)

    # --- the production-stack router ---------------------------------------------------
    def _router(self) -> None:
        ns, model = self.spec.namespace, self.spec.model
        router = "vllm-deployment-router"
        target = {
            "container": "router-container",
            "endpoint": "router-sport",
            "instance": "10.42.100.15:8000",
            "job": "vllm-router-service",
            "namespace": ns,
            "pod": f"{router}-{_k8s_hash(self.f.name, router)}-{_k8s_hash(router, length=5)}",
            "service": "vllm-router-service",
        }
        where = "router"
        uptime = 2 * 86400.0
        serving = self._serving()
        known = {
            x: serving[x] | (np.cumsum(serving[x]) > 0) if x in self.edge.stale else serving[x]
            for x in self.f.names
        }
        live = sum(serving[x].astype(float) for x in self.f.names)
        stale_now = {x: known[x] & ~serving[x] for x in self.edge.stale}
        routed_rate = self._fleet_rate(serving) / np.clip(live, 1, None)
        incoming = np.zeros(self.n)
        for x in self.f.names:
            if not known[x].any():
                continue
            server = {"server": f"http://{self.address(x)}"}
            mask = known[x]
            rate = np.where(serving[x], np.clip(self.sig("request_rate", x), 0, None), 0.0)
            n = self._poisson(rate * self.dt)
            incoming += n

            def gauge(
                metric: str,
                values: Array,
                fmt: Any = _fmt_int,
                m: Array = mask,
                s: Mapping[str, str] = server,
            ) -> None:
                self.emit(metric, {**target, **s}, self.finish(values, m, False), fmt, where)

            def frozen(values: Array, s: Array = serving[x]) -> Array:
                """After its pod is gone, the router keeps the last values it scraped from it."""
                return _fill(np.where(s, values, np.nan), 0.0)

            waiting = frozen(self._poisson(self.sig("queue_waiting", x)))
            running = frozen(self._poisson(self.sig("requests_running", x)))
            gauge("vllm:num_requests_waiting", waiting)
            gauge("vllm:num_requests_running", running)
            gauge("vllm:healthy_pods_total", np.ones(self.n))
            for name in (
                "vllm:gpu_prefix_cache_hit_rate",
                "vllm:gpu_prefix_cache_hits_total",
                "vllm:gpu_prefix_cache_queries_total",
            ):
                gauge(name, np.zeros(self.n))  # the router reads the engines' pre-0.10 names, gone from V1
            sent = np.where(serving[x], rate, np.where(known[x], routed_rate, 0.0))
            gauge("vllm:current_qps", sent, _fmt_gauge)
            prefill = np.where(
                serving[x], self.sig("queue_waiting", x) + rate * self.sig("ttft_p50_seconds", x), 0.0
            )
            gauge("vllm:num_prefill_requests", self._poisson(prefill))
            gauge(
                "vllm:num_decoding_requests",
                self._poisson(np.where(serving[x], self.sig("requests_running", x), 0.0)),
            )
            labels = {**target, **server, "model": model}
            for metric, signal in (
                ("vllm:input_tokens_total", "prompt_tokens_rate"),
                ("vllm:output_tokens_total", "generation_tokens_rate"),
            ):
                inc = np.round(
                    np.where(serving[x], self.sig(signal, x), 0.0)
                    * self.dt
                    * n
                    / np.clip(rate * self.dt, 1e-9, None)
                )
                values = self.counter(inc, [(0, self.n)], self.history(inc, mask, uptime))
                self.emit(metric, labels, self.finish(values, mask, False), _fmt_int, where)
            life = _Life([(0, self.n)], mask, False, uptime, where)
            self._hist(
                "vllm:request_latency_seconds",
                {**labels, "status": "200"},
                ROUTER_LATENCY_BUCKETS,
                {0.99: self.sig("e2e_p99_seconds", x) * 1.03 + 0.02},
                n,
                life=life,
                sigma=0.45,
                jitter=0.04,
            )
            if x in stale_now:
                errors = self._poisson(np.where(stale_now[x], routed_rate * self.dt, 0.0))
                incoming += errors
                first = int(np.flatnonzero(stale_now[x])[0])
                values = self.counter(errors, [(first, self.n)], 0.0)
                own = {**labels, "error_type": "ClientConnectorError"}
                self.emit("vllm:request_errors_total", own, values, _fmt_int, where)
        history = self.history(incoming, np.ones(self.n, dtype=bool), uptime)
        values = self.counter(incoming, [(0, self.n)], history)
        self.emit("vllm:num_incoming_requests_total", {**target, "model": model}, values, _fmt_int, where)
        self._edge_pod(target["pod"], router)


def write_edge(
    fleet: Fleet,
    path: str,
    name: str,
    symptom: str | None,
    at: str | None,
    expect: dict[str, Any] | None,
    edge: EdgeSpec,
    header: str = "",
    description: str | None = None,
) -> EdgeFleet:
    """Write the raw fixture of `fleet`'s engines, their cluster and `edge`."""
    raw = EdgeFleet(fleet, RawSpec(flavour="vllm", deployment=edge.deployment), edge).build()
    write_document(path, raw.document(name, symptom, at, expect, None, description), header)
    return raw


__all__ = [
    "EDGES",
    "EDGE_WAIT",
    "EPP_DURATION_BUCKETS",
    "ROUTER_LATENCY_BUCKETS",
    "EdgeFleet",
    "EdgeSpec",
    "write_edge",
]
