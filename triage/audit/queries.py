"""What the audit asks Prometheus beyond the catalog's signals, and which metrics stand for a signal.

The checks need a few instant reads the diagnosis never makes (the full label set of
`vllm:cache_config_info`, request-length histograms over the whole window, the GPU node
inventory, DCGM's per-GPU labels), and, to tell whether an alert covers a signal, every
metric name any source of that signal reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from signals.catalog import Catalog, QueryOptions, render
from signals.dcgm import HOST_LABELS
from triage.audit.promql import PromQLError, metric_names_in

NODE_LABELS: Final = (*HOST_LABELS, "node", "kubernetes_node")
DRIVER_LABELS: Final = ("DCGM_FI_DRIVER_VERSION", "driver_version")
TARGET_NODE_LABELS: Final = (
    "__meta_kubernetes_pod_node_name",
    "__meta_kubernetes_endpoint_node_name",
    "__meta_kubernetes_node_name",
)


def instant_queries(names: frozenset[str], options: QueryOptions, lookback: float) -> dict[str, str]:
    """The instant queries the checks read, for the metrics that exist (asked at the audit time).

    The selector applies to fleet series; node inventory (`kube_node_status_capacity`) and
    DCGM series are cluster-wide, because a GPU node the selector does not match is still
    a GPU node that needs its exporter. `$window` is the whole lookback here: lengths are
    taken over the window, not per 5 minutes.
    """
    templates: dict[str, str] = {}
    if "vllm:cache_config_info" in names:
        templates["cache_config"] = "vllm:cache_config_info{$sel}"
    if "sglang:context_len" in names:
        templates["sglang_context_len"] = "max by ($replica) (sglang:context_len{$sel})"
    if "sglang:max_total_num_tokens" in names:
        templates["sglang_max_tokens"] = "max by ($replica) (sglang:max_total_num_tokens{$sel})"
    for key, vllm, sglang in (
        ("prompt_buckets", "vllm:request_prompt_tokens_bucket", "sglang:prompt_tokens_histogram_bucket"),
        (
            "output_buckets",
            "vllm:request_generation_tokens_bucket",
            "sglang:generation_tokens_histogram_bucket",
        ),
    ):
        metric = vllm if vllm in names else sglang if sglang in names else None
        if metric is not None:
            templates[key] = f"sum by (le) (increase({metric}{{$sel}}[$window]))"
    if "kube_node_status_capacity" in names:
        templates["gpu_nodes"] = 'max by (node) (kube_node_status_capacity{resource="nvidia_com_gpu"})'
    if "kube_pod_container_resource_requests" in names:
        templates["gpu_pod_nodes"] = (
            'max by (node) (kube_pod_container_resource_requests{resource="nvidia_com_gpu",$sel})'
        )
    gpu_metrics: tuple[str, ...] = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED")
    dcgm = [n for n in gpu_metrics if n in names]
    if dcgm:
        labels = [*NODE_LABELS, "instance", options.replica_label, "gpu", "UUID", *DRIVER_LABELS]
        # Scoped to a fleet, DCGM may name the workload's pod its own way (exported_pod): copy
        # it onto the engine's replica label, so the checks match GPUs to engine replicas.
        gpu, engine = options.scope("gpu").replica_label, options.replica_label
        if gpu != engine:
            dcgm = [f'label_replace({n}, "{engine}", "$$1", "{gpu}", "(.+)")' for n in dcgm]
        templates["dcgm_gpus"] = f"group by ({', '.join(dict.fromkeys(labels))}) ({' or '.join(dcgm)})"
    window = replace(options, window=f"{max(1, round(lookback))}s")
    exporters = {"gpu_pod_nodes": "kube_pod", "gpu_nodes": "kube_pod", "dcgm_gpus": "gpu"}
    return {key: render(text, window, exporters.get(key, "engine")) for key, text in templates.items()}


EXTRA_METRICS: Final[Mapping[str, tuple[str, ...]]] = {
    "gpu_xid": ("DCGM_EXP_XID_ERRORS_COUNT",),
    "gpu_ecc_errors": (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    ),
    "gpu_temp_celsius": ("DCGM_FI_DEV_MEMORY_TEMP",),
    "preemption_rate": ("vllm:request_num_preemptions_bucket", "sglang:num_retracted_reqs"),
    "prefix_hit_ratio": ("vllm:prompt_tokens_cached_total", "sglang:cached_tokens_total"),
    "queue_waiting": ("vllm:num_requests_waiting_by_reason",),
    "kv_usage_ratio": ("sglang:kv_used_tokens", "sglang:kv_available_tokens"),
}


ECC_METRICS: Final = ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", *EXTRA_METRICS["gpu_ecc_errors"])


def signal_metrics(catalog: Catalog, signal: str) -> frozenset[str]:
    """Every metric name any catalog source of `signal` reads, plus close relatives no source uses.

    A user catalog's template that this parser refuses (syntax newer than Prometheus 2.45)
    still counts by the names its source declares (`requires`, `requires_any`).
    """
    out: set[str] = set(EXTRA_METRICS.get(signal, ()))
    empty = QueryOptions()
    for source in catalog.sources.get(signal, ()):
        out.update(source.requires, source.requires_any, source.deprecated)
        for template in (source.replica, source.fleet):
            if template is not None:
                with contextlib.suppress(PromQLError):
                    out.update(metric_names_in(render(template, empty)))
    return frozenset(out)


__all__ = [
    "DRIVER_LABELS",
    "ECC_METRICS",
    "EXTRA_METRICS",
    "NODE_LABELS",
    "TARGET_NODE_LABELS",
    "instant_queries",
    "signal_metrics",
]
