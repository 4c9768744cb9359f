"""What the audit asks Prometheus beyond the catalog's signals, and which metrics stand for a signal.

The checks need a few instant reads the diagnosis never makes (the full label set of
`vllm:cache_config_info`, request-length histograms over the whole window, the GPU node
inventory, DCGM's per-GPU labels, what the gateway served, refused, limits and meters),
and, to tell whether an alert covers a signal, every metric name any source of that
signal reads.
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
    gateway = gateway_queries(names)
    templates.update(gateway)
    window = replace(options, window=f"{max(1, round(lookback))}s")
    exporters = {"gpu_pod_nodes": "kube_pod", "gpu_nodes": "kube_pod", "dcgm_gpus": "gpu"}
    exporters.update(dict.fromkeys(gateway, "gateway"))
    return {key: render(text, window, exporters.get(key, "engine")) for key, text in templates.items()}


TENANT_LABELS: Final = ("team", "hashed_api_key", "user", "end_user")
"""LiteLLM's labels that name who a request is for, by preference: its team, its API key, its user."""
LITELLM_TOKENS: Final = (
    "litellm_input_tokens_metric_total",
    "litellm_output_tokens_metric_total",
    "litellm_total_tokens_metric_total",
)

GATEWAY_QUERIES: Final[tuple[tuple[str, str, str], ...]] = tuple(
    (key, metric, query.replace("METRIC", metric))
    for key, metric, query in (
        (
            "gateway_requests:litellm",
            "litellm_proxy_total_requests_metric_total",
            "sum(increase(METRIC{$sel}[$window]))",
        ),
        ("gateway_requests:epp", "inference_objective_request_total", "sum(increase(METRIC{$sel}[$window]))"),
        (
            "gateway_requests:router",
            "vllm:num_incoming_requests_total",
            "sum(increase(METRIC{$sel}[$window]))",
        ),
        (
            "gateway_refused:litellm",
            "litellm_proxy_failed_requests_metric_total",
            'sum(increase(METRIC{exception_status="429",$sel}[$window]))',
        ),
        # the EPP answers 429 for InferencePoolResourceExhausted (no capacity for a sheddable request)
        (
            "gateway_refused:epp",
            "inference_objective_request_error_total",
            'sum(increase(METRIC{error_code=~".*ResourceExhausted",$sel}[$window]))',
        ),
        (
            "gateway_limits:key",
            "litellm_api_key_rate_limit_allowed_metric",
            "count by (rate_limit_type) (max_over_time(METRIC{$sel}[$window]) > 0)",
        ),
        (
            "gateway_limits:team",
            "litellm_team_rate_limit_allowed_metric",
            "count by (rate_limit_type) (max_over_time(METRIC{$sel}[$window]) > 0)",
        ),
        (
            "gateway_limits:deployment",
            "litellm_remaining_requests_metric",
            "count(last_over_time(METRIC{$sel}[$window]))",
        ),
        (
            "gateway_limits:flow_control",
            "inference_extension_flow_control_queue_size",
            "count(last_over_time(METRIC{$sel}[$window]))",
        ),
        (
            "gateway_spend",
            "litellm_spend_metric_total",
            f"sum by ({', '.join(TENANT_LABELS)}) (increase(METRIC{{$sel}}[$window]))",
        ),
        (
            "gateway_tokens:epp",
            "inference_objective_input_tokens_sum",
            "sum by (model_name) (increase(METRIC{$sel}[$window]))",
        ),
        (
            "gateway_tokens:router",
            "vllm:input_tokens_total",
            'sum(increase(METRIC{server!="",$sel}[$window]))',
        ),
    )
)
"""What the gateway in front of a fleet shows (triage.audit.checks.gateway reads them): the
requests it served and refused, the limits it exports, and the tokens and spend it meters."""


def gateway_queries(names: frozenset[str]) -> dict[str, str]:
    """The gateway's instant queries (templates) for the metrics that exist, scoped like the fleet."""
    out = {key: query for key, metric, query in GATEWAY_QUERIES if metric in names}
    tokens = [n for n in LITELLM_TOKENS if n in names]
    if tokens:
        selector = "|".join(tokens)
        out["gateway_tokens"] = (
            f'sum by ({", ".join(TENANT_LABELS)}) (increase({{__name__=~"{selector}",$sel}}[$window]))'
        )
    return out


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
    "GATEWAY_QUERIES",
    "NODE_LABELS",
    "TARGET_NODE_LABELS",
    "TENANT_LABELS",
    "gateway_queries",
    "instant_queries",
    "signal_metrics",
]
