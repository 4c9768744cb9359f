"""How each workload is exposed and scraped: pod labels, container port, Service and monitor.

Every shape follows one real chart or manifest in shared/real, named in `source`:

- engines, by ServiceMonitor: `production-stack` (scrape-production-stack-servicemonitor-
  engine-template.yaml: Service `<release>-engine-service`, port `service-port`, honorLabels
  false) and `vllm-k8s-monitoring` (scrape-vllm-k8s-monitoring-servicemonitor.yaml: port
  `http`, honorLabels true, relabelings that copy the pod and node names);
- engines, by PodMonitor: `llm-d` (scrape-llm-d-modelservice-decode-podmonitor-template.yaml:
  port `metrics`, selected by the `llm-d.ai/*` labels) and `kubeai`
  (scrape-kubeai-vllm-podmonitor-template.yaml: `app.kubernetes.io/name: vllm`, port `http`);
- DCGM: `gpu-operator` (scrape-gpu-operator-dcgm-servicemonitor.yaml and -service.yaml:
  `jobLabel: app`, port `gpu-metrics`, no honorLabels, so the workload's pod arrives as
  `exported_pod`) and `dcgm-exporter-helm` (scrape-dcgm-exporter-helm-servicemonitor-
  template.yaml with `honorLabels: true`, port `metrics`);
- kube-state-metrics: `kube-prometheus-stack` (scrape-kube-state-metrics-helm-servicemonitor-
  template.yaml with the honorLabels true that kube-prometheus-stack sets, port `http`; the
  target's own `pod` lands on series that have none, such as `kube_deployment_*`) and
  `kube-prometheus` (scrape-kube-prometheus-kube-state-metrics-servicemonitor.yaml: honorLabels
  true, `labeldrop (pod|service|endpoint|namespace)`, the `kube_endpoint_*` metric drop; served
  over plain HTTP here, without its TLS and bearer token, and without its second `https-self`
  endpoint, KSM's own telemetry);
- the production-stack router (scrape-production-stack-servicemonitor-router-template.yaml:
  port `router-sport`).

The interval and timeout of the real monitors are replaced by the harness' short ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.cluster.model import Container, FleetSpec, Labels, Monitor, Port, Service, ServicePort

ENGINE_SHAPES = ("production-stack", "vllm-k8s-monitoring", "llm-d", "kubeai")
DCGM_SHAPES = ("gpu-operator", "dcgm-exporter-helm")
KSM_SHAPES = ("kube-prometheus-stack", "kube-prometheus")
DCGM_NAMESPACE = "gpu-operator"
KSM_NAMESPACE = "monitoring"
DCGM_PORT = 9400
IMAGES = {
    "vllm": "vllm/vllm-openai:v0.12.0",
    "sglang": "lmsysorg/sglang:v0.5.3-cu126",
    "dcgm": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04",
    "ksm": "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0",
    "rbac": "quay.io/brancz/kube-rbac-proxy:v0.19.1",
    "router": "lmcache/lmstack-router:latest",
}


@dataclass(frozen=True)
class Shape:
    """What a shape decides for its pods: labels, containers, the Service (if any), the monitor."""

    pod_labels: Labels
    containers: tuple[Container, ...]
    service: Service | None
    monitor: Monitor
    worker: Container | None = None


def short_model(model_name: str) -> str:
    """A label-safe model name: `meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct`."""
    return model_name.rsplit("/", 1)[-1].lower().replace(".", "-").replace("_", "-")


def _pairs(*pairs: tuple[str, str]) -> Labels:
    return tuple(pairs)


def _relabel(**fields: object) -> tuple[tuple[str, object], ...]:
    return tuple(fields.items())


def engine_shape(spec: FleetSpec) -> Shape:
    """The pod labels, containers, Service and monitor of one fleet's engines."""
    model = short_model(spec.model_name)
    name, ns, port = spec.name, spec.namespace, spec.port
    image = IMAGES[spec.engine]
    if spec.monitor == "production-stack":
        selector = _pairs(
            ("app.kubernetes.io/instance", name),
            ("app.kubernetes.io/component", "serving-engine"),
            ("app.kubernetes.io/part-of", "vllm-stack"),
            ("environment", "test"),
            ("release", "test"),
        )
        service = Service(
            ns,
            f"{name}-engine-service",
            (*selector, ("model", model)),
            _pairs(("model", model), ("helm-release-name", name)),
            (ServicePort("service-port", 80, port),),
        )
        return Shape(
            _pairs(
                ("environment", "test"), ("release", "test"), ("model", model), ("helm-release-name", name)
            ),
            (
                Container(
                    "vllm" if spec.engine == "vllm" else "sglang", image, (Port("container-port", port),)
                ),
            ),
            service,
            Monitor(
                "ServiceMonitor",
                ns,
                f"{name}-engine-servicemonitor",
                selector,
                "service-port",
                honor_labels=False,
                source="scrape-production-stack-servicemonitor-engine-template.yaml",
            ),
        )
    if spec.monitor == "vllm-k8s-monitoring":
        labels = _pairs(("app", name), ("model", model))
        return Shape(
            labels,
            (Container(spec.engine, image, (Port("http", port),)),),
            Service(ns, name, labels, _pairs(("app", name)), (ServicePort("http", port, port),)),
            Monitor(
                "ServiceMonitor",
                ns,
                f"{name}-metrics",
                _pairs(("app", name)),
                "http",
                honor_labels=True,
                source="scrape-vllm-k8s-monitoring-servicemonitor.yaml",
                namespaces=(ns,),
                relabelings=(
                    _relabel(source_labels=["__meta_kubernetes_pod_name"], target_label="pod"),
                    _relabel(source_labels=["__meta_kubernetes_pod_node_name"], target_label="node"),
                ),
            ),
        )
    if spec.monitor == "llm-d":
        selector = _pairs(
            ("llm-d.ai/inferenceServing", "true"), ("llm-d.ai/model", model), ("llm-d.ai/role", "decode")
        )
        return Shape(
            selector,
            (Container("vllm", image, (Port("metrics", port),)),),
            None,
            Monitor(
                "PodMonitor",
                ns,
                f"{name}-decode-podmonitor",
                selector,
                "metrics",
                honor_labels=False,
                source="scrape-llm-d-modelservice-decode-podmonitor-template.yaml",
            ),
            worker=Container("vllm-worker", image),
        )
    if spec.monitor == "kubeai":
        return Shape(
            _pairs(("app.kubernetes.io/name", "vllm"), ("model", model)),
            (Container("server", image, (Port("http", port),)),),
            None,
            Monitor(
                "PodMonitor",
                ns,
                "kubeai-vllm",
                _pairs(("app.kubernetes.io/name", "vllm")),
                "http",
                honor_labels=False,
                source="scrape-kubeai-vllm-podmonitor-template.yaml",
            ),
        )
    raise ValueError(
        f"fleet {spec.key}: unknown monitor shape {spec.monitor!r}; known: {', '.join(ENGINE_SHAPES)}"
    )


def dcgm_shape(variant: str) -> tuple[str, Shape]:
    """(pod name prefix, shape) of the DCGM exporter DaemonSet."""
    if variant == "gpu-operator":
        labels = _pairs(("app", "nvidia-dcgm-exporter"))
        return "nvidia-dcgm-exporter", Shape(
            labels,
            (Container("nvidia-dcgm-exporter", IMAGES["dcgm"], (Port("metrics", DCGM_PORT),)),),
            Service(
                DCGM_NAMESPACE,
                "nvidia-dcgm-exporter",
                labels,
                labels,
                (ServicePort("gpu-metrics", DCGM_PORT, DCGM_PORT),),
            ),
            Monitor(
                "ServiceMonitor",
                DCGM_NAMESPACE,
                "nvidia-dcgm-exporter",
                labels,
                "gpu-metrics",
                honor_labels=False,
                source="scrape-gpu-operator-dcgm-servicemonitor.yaml",
                job_label="app",
                namespaces=(DCGM_NAMESPACE,),
            ),
        )
    if variant == "dcgm-exporter-helm":
        selector = _pairs(
            ("app.kubernetes.io/name", "dcgm-exporter"), ("app.kubernetes.io/instance", "dcgm-exporter")
        )
        return "dcgm-exporter", Shape(
            selector,
            (Container("exporter", IMAGES["dcgm"], (Port("metrics", DCGM_PORT),)),),
            Service(
                DCGM_NAMESPACE,
                "dcgm-exporter",
                (*selector, ("app.kubernetes.io/component", "dcgm-exporter")),
                selector,
                (ServicePort("metrics", DCGM_PORT, DCGM_PORT),),
            ),
            Monitor(
                "ServiceMonitor",
                DCGM_NAMESPACE,
                "dcgm-exporter",
                selector,
                "metrics",
                honor_labels=True,
                source="scrape-dcgm-exporter-helm-servicemonitor-template.yaml",
                namespaces=(DCGM_NAMESPACE,),
            ),
        )
    raise ValueError(f"unknown DCGM shape {variant!r}; known: {', '.join(DCGM_SHAPES)}")


def ksm_shape(variant: str) -> tuple[str, Shape]:
    """(Deployment name, shape) of kube-state-metrics."""
    if variant == "kube-prometheus-stack":
        name = "kube-prometheus-stack-kube-state-metrics"
        selector = _pairs(
            ("app.kubernetes.io/name", "kube-state-metrics"),
            ("app.kubernetes.io/instance", "kube-prometheus-stack"),
        )
        return name, Shape(
            selector,
            (Container("kube-state-metrics", IMAGES["ksm"], (Port("http", 8080), Port("metrics", 8081))),),
            Service(
                KSM_NAMESPACE,
                name,
                (
                    *selector,
                    ("app.kubernetes.io/part-of", "kube-state-metrics"),
                    ("release", "kube-prometheus-stack"),
                ),
                selector,
                (ServicePort("http", 8080, 8080),),
            ),
            Monitor(
                "ServiceMonitor",
                KSM_NAMESPACE,
                name,
                selector,
                "http",
                honor_labels=True,
                source="scrape-kube-state-metrics-helm-servicemonitor-template.yaml",
                job_label="app.kubernetes.io/name",
            ),
        )
    if variant == "kube-prometheus":
        name = "kube-state-metrics"
        selector = _pairs(
            ("app.kubernetes.io/component", "exporter"),
            ("app.kubernetes.io/name", "kube-state-metrics"),
            ("app.kubernetes.io/part-of", "kube-prometheus"),
        )
        return name, Shape(
            selector,
            (
                Container("kube-rbac-proxy-main", IMAGES["rbac"], (Port("https-main", 8443),)),
                Container("kube-rbac-proxy-self", IMAGES["rbac"], (Port("https-self", 9443),)),
                Container("kube-state-metrics", IMAGES["ksm"]),
            ),
            Service(
                KSM_NAMESPACE,
                name,
                selector,
                selector,
                (ServicePort("https-main", 8443, 8443), ServicePort("https-self", 9443, 9443)),
            ),
            Monitor(
                "ServiceMonitor",
                KSM_NAMESPACE,
                name,
                selector,
                "https-main",
                honor_labels=True,
                source="scrape-kube-prometheus-kube-state-metrics-servicemonitor.yaml",
                job_label="app.kubernetes.io/name",
                relabelings=(_relabel(action="labeldrop", regex="(pod|service|endpoint|namespace)"),),
                metric_relabelings=(
                    _relabel(
                        source_labels=["__name__"],
                        regex="kube_(endpoint_(address_not_ready|address_available|ports))",
                        action="drop",
                    ),
                ),
            ),
        )
    raise ValueError(f"unknown kube-state-metrics shape {variant!r}; known: {', '.join(KSM_SHAPES)}")


def router_shape(release: str, namespace: str) -> tuple[str, Shape]:
    """(Deployment name, shape) of a production-stack router in front of a release's engines."""
    pod_labels = _pairs(("environment", "router"), ("release", "router"))
    selector = _pairs(
        ("app.kubernetes.io/component", "router"),
        ("app.kubernetes.io/instance", release),
        ("app.kubernetes.io/name", "router"),
        ("app.kubernetes.io/part-of", "vllm-stack"),
        ("environment", "router"),
        ("release", "router"),
    )
    return f"{release}-deployment-router", Shape(
        pod_labels,
        (Container("router-container", IMAGES["router"], (Port("router-cport", 8000),)),),
        Service(
            namespace,
            f"{release}-router-service",
            selector,
            pod_labels,
            (ServicePort("router-sport", 80, 8000),),
        ),
        Monitor(
            "ServiceMonitor",
            namespace,
            f"{release}-router-servicemonitor",
            selector,
            "router-sport",
            honor_labels=False,
            source="scrape-production-stack-servicemonitor-router-template.yaml",
        ),
    )
