"""The Prometheus Operator's generated scrape jobs, reproduced over static targets.

The Operator turns each ServiceMonitor into a job `serviceMonitor/<ns>/<name>/0` on
`kubernetes_sd_configs` (role endpoints) and each PodMonitor into `podMonitor/<ns>/<name>/0`
(role pod), with a fixed chain of `relabel_configs`. The chains here are those of
shared/real/scrape-prometheus-operator-servicemonitor-generated-config.golden.yaml and
...-podmonitor-generated-config.golden.yaml, rule for rule: keep on the Service's labels and
`labelpresent` flags, keep on the port name, `node`/`pod` from the endpoint's target, then
`namespace`, `service`, `pod`, `container`, the phase drop, `job` (Service name, or the
`jobLabel` label), `endpoint`, the monitor's own relabelings, and the sharding rules with
`$(SHARD)` set to 0 (with `modulus: 1` they keep every target, as in a one-shard Prometheus).

What differs is only where targets come from: `static_configs` whose targets carry the
`__meta_kubernetes_*` labels Kubernetes service discovery would have set (all endpoints
of all Services in the watched namespaces for a ServiceMonitor, plus the backing pods'
container ports no Service port covers, as the endpoints role adds them; for a PodMonitor
every container port of the pods its selector matches, which the golden file selects on the
API side, and a container without ports as one target on the bare pod IP). Prometheus then
applies the relabeling for real and drops the `__` labels after it, so what gets through,
and with which labels, is Prometheus' doing, not this module's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from tools.cluster.model import Cluster, Labels, Monitor, Pod, Service, sanitize

SHARD = "0"
TargetGroup = dict[str, Any]


def _matches(labels: Labels, selector: Labels) -> bool:
    have = dict(labels)
    return all(have.get(k) == v for k, v in selector)


def _label_meta(prefix: str, labels: Labels) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in labels:
        out[f"__meta_kubernetes_{prefix}_label_{sanitize(key)}"] = value
        out[f"__meta_kubernetes_{prefix}_labelpresent_{sanitize(key)}"] = "true"
    return out


def pod_meta(pod: Pod, port_name: str | None, port: int | None, ready: bool) -> dict[str, str]:
    """The `__meta_kubernetes_pod_*` labels of one pod container port (role pod and endpoints)."""
    container = next((c for c in pod.containers if any(p.name == port_name for p in c.ports)), pod.container)
    meta = {
        "__meta_kubernetes_namespace": pod.namespace,
        "__meta_kubernetes_pod_name": pod.name,
        "__meta_kubernetes_pod_ip": pod.ip,
        "__meta_kubernetes_pod_uid": pod.uid,
        "__meta_kubernetes_pod_node_name": pod.node,
        "__meta_kubernetes_pod_host_ip": pod.host_ip,
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_ready": "true" if ready else "false",
        "__meta_kubernetes_pod_controller_kind": pod.owner.kind,
        "__meta_kubernetes_pod_controller_name": pod.owner.name,
        "__meta_kubernetes_pod_container_name": container.name,
        "__meta_kubernetes_pod_container_image": container.image,
        "__meta_kubernetes_pod_container_init": "false",
        **_label_meta("pod", pod.labels),
    }
    if port_name is not None and port is not None:
        meta["__meta_kubernetes_pod_container_port_name"] = port_name
        meta["__meta_kubernetes_pod_container_port_number"] = str(port)
        meta["__meta_kubernetes_pod_container_port_protocol"] = "TCP"
    return meta


def _group(address: str, labels: Mapping[str, str]) -> TargetGroup:
    return {"targets": [address], "labels": dict(sorted(labels.items()))}


def _endpoint_targets(cluster: Cluster, service: Service, unready: Collection[str]) -> Iterator[TargetGroup]:
    backing = [
        p for p in cluster.pods if p.namespace == service.namespace and _matches(p.labels, service.selector)
    ]
    common = {
        "__meta_kubernetes_namespace": service.namespace,
        "__meta_kubernetes_endpoints_name": service.name,
        "__meta_kubernetes_service_name": service.name,
        **_label_meta("service", service.labels),
    }
    for pod in backing:
        ready = pod.name not in unready
        covered = set()
        for sp in service.ports:
            port_name = next(
                (p.name for c in pod.containers for p in c.ports if p.number == sp.target_port), None
            )
            covered.add(sp.target_port)
            yield _group(
                f"{pod.ip}:{sp.target_port}",
                {
                    **common,
                    **pod_meta(pod, port_name, sp.target_port, ready),
                    "__meta_kubernetes_endpoint_port_name": sp.name,
                    "__meta_kubernetes_endpoint_port_protocol": "TCP",
                    "__meta_kubernetes_endpoint_ready": "true" if ready else "false",
                    "__meta_kubernetes_endpoint_node_name": pod.node,
                    "__meta_kubernetes_endpoint_address_target_kind": "Pod",
                    "__meta_kubernetes_endpoint_address_target_name": pod.name,
                },
            )
        for container in pod.containers:
            for port in container.ports:
                if port.number not in covered:
                    yield _group(
                        f"{pod.ip}:{port.number}", {**common, **pod_meta(pod, port.name, port.number, ready)}
                    )


def _pod_targets(cluster: Cluster, monitor: Monitor, unready: Collection[str]) -> Iterator[TargetGroup]:
    for pod in cluster.pods:
        if pod.namespace not in monitor.watched or not _matches(pod.labels, monitor.selector):
            continue
        ready = pod.name not in unready
        ports = [(c, p) for c in pod.containers for p in c.ports]
        if not ports:
            yield _group(pod.ip, pod_meta(pod, None, None, ready))
        for _, port in ports:
            yield _group(f"{pod.ip}:{port.number}", pod_meta(pod, port.name, port.number, ready))


def _sharding() -> list[dict[str, Any]]:
    return [
        {
            "source_labels": ["__address__", "__tmp_hash"],
            "target_label": "__tmp_hash",
            "regex": "(.+);",
            "replacement": "$1",
            "action": "replace",
        },
        {"source_labels": ["__tmp_hash"], "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
        {
            "source_labels": ["__tmp_hash", "__tmp_disable_sharding"],
            "regex": f"{SHARD};|.+;.+",
            "action": "keep",
        },
    ]


def _service_monitor_rules(monitor: Monitor) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
    for key, value in monitor.selector:
        rules.append(
            {
                "action": "keep",
                "source_labels": [
                    f"__meta_kubernetes_service_label_{sanitize(key)}",
                    f"__meta_kubernetes_service_labelpresent_{sanitize(key)}",
                ],
                "regex": f"({value});true",
            }
        )
    target = [
        "__meta_kubernetes_endpoint_address_target_kind",
        "__meta_kubernetes_endpoint_address_target_name",
    ]
    rules += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": monitor.port},
        {
            "source_labels": target,
            "separator": ";",
            "regex": "Node;(.*)",
            "replacement": "${1}",
            "target_label": "node",
        },
        {
            "source_labels": target,
            "separator": ";",
            "regex": "Pod;(.*)",
            "replacement": "${1}",
            "target_label": "pod",
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
    ]
    if monitor.job_label:
        rules.append(
            {
                "source_labels": [f"__meta_kubernetes_service_label_{sanitize(monitor.job_label)}"],
                "target_label": "job",
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    rules.append({"target_label": "endpoint", "replacement": monitor.port})
    return rules


def _pod_monitor_rules(monitor: Monitor) -> list[dict[str, Any]]:
    job = f"{monitor.namespace}/{monitor.name}"
    rules: list[dict[str, Any]] = [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_pod_container_port_name"],
            "regex": monitor.port,
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    ]
    if monitor.job_label:
        rules.append(
            {
                "source_labels": [f"__meta_kubernetes_pod_label_{sanitize(monitor.job_label)}"],
                "target_label": "job",
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    else:
        rules.append({"target_label": "job", "replacement": job})
    rules.append({"target_label": "endpoint", "replacement": monitor.port})
    return rules


def job(cluster: Cluster, monitor: Monitor, interval: float, unready: Collection[str] = ()) -> dict[str, Any]:
    """One monitor's scrape job, with its discovered targets as static configs."""
    if monitor.kind == "ServiceMonitor":
        services = [s for s in cluster.services if s.namespace in monitor.watched]
        groups = [g for s in services for g in _endpoint_targets(cluster, s, unready)]
        rules = _service_monitor_rules(monitor)
    elif monitor.kind == "PodMonitor":
        groups = list(_pod_targets(cluster, monitor, unready))
        rules = _pod_monitor_rules(monitor)
    else:
        raise ValueError(f"unknown monitor kind {monitor.kind!r}")
    rules += [dict(r) for r in monitor.relabelings]
    rules += _sharding()
    seconds = f"{interval:g}s"
    out: dict[str, Any] = {
        "job_name": monitor.job_name,
        "honor_labels": monitor.honor_labels,
        "static_configs": groups,
        "scrape_interval": seconds,
        "scrape_timeout": seconds,
        "metrics_path": monitor.path,
        "relabel_configs": rules,
    }
    if monitor.metric_relabelings:
        out["metric_relabel_configs"] = [dict(r) for r in monitor.metric_relabelings]
    return out


def scrape_configs(cluster: Cluster, interval: float, unready: Collection[str] = ()) -> list[dict[str, Any]]:
    """Every monitor's job; `unready` names pods whose endpoints and pod condition read not ready."""
    return [job(cluster, m, interval, unready) for m in cluster.monitors]
