"""Prometheus text exposition: each family's HELP and TYPE, rendering, and a small parser.

The exporters are Python (vLLM, SGLang and the production-stack router use
`prometheus_client`) or Go (dcgm-exporter, kube-state-metrics), and their dumps differ in
small ways that are kept: Python writes counters under their `_total` name, writes a
`<name>_created` gauge family after each counter and histogram, and prints values as floats
(`1.0`); Go prints integral values without a decimal point. HELP texts are those of the
real dumps in shared/real where a family appears there.

A family missing from `FAMILIES` is an error rather than an `untyped` guess, so a new
series from the synthesiser cannot be served without someone deciding what it is.
The parser reads what the renderer writes and the real dumps (the Go testutil style with
a space after commas included); it exists so the tests can compare the two without
`prometheus_client`, which is not a dependency.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tools.cluster.model import Labels

FAMILIES: dict[str, tuple[str, str]] = {
    "vllm:num_requests_running": ("gauge", "Number of requests in model execution batches."),
    "vllm:num_requests_waiting": ("gauge", "Number of requests waiting to be processed."),
    "vllm:kv_cache_usage_perc": ("gauge", "KV-cache usage. 1 means 100 percent usage."),
    "vllm:gpu_cache_usage_perc": ("gauge", "GPU KV-cache usage. 1 means 100 percent usage."),
    "vllm:cache_config_info": ("gauge", "Information of the LLMEngine CacheConfig"),
    "vllm:num_preemptions_total": ("counter", "Cumulative number of preemption from the engine."),
    "vllm:prompt_tokens_total": ("counter", "Number of prefill tokens processed."),
    "vllm:generation_tokens_total": ("counter", "Number of generation tokens processed."),
    "vllm:request_success_total": ("counter", "Count of successfully processed requests."),
    "vllm:prefix_cache_queries_total": (
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
    ),
    "vllm:prefix_cache_hits_total": ("counter", "Prefix cache hits, in terms of number of cached tokens."),
    "vllm:gpu_prefix_cache_queries_total": ("counter", "DEPRECATED: Use vllm:prefix_cache_queries instead."),
    "vllm:gpu_prefix_cache_hits_total": ("counter", "DEPRECATED: Use vllm:prefix_cache_hits instead."),
    "vllm:time_to_first_token_seconds": ("histogram", "Histogram of time to first token in seconds."),
    "vllm:inter_token_latency_seconds": ("histogram", "Histogram of inter-token latency in seconds."),
    "vllm:time_per_output_token_seconds": ("histogram", "Histogram of time per output token in seconds."),
    "vllm:e2e_request_latency_seconds": ("histogram", "Histogram of e2e request latency in seconds."),
    "vllm:request_queue_time_seconds": ("histogram", "Histogram of time spent in WAITING phase for request."),
    "vllm:request_prefill_time_seconds": (
        "histogram",
        "Histogram of time spent in PREFILL phase for request.",
    ),
    "vllm:request_prompt_tokens": ("histogram", "Number of prefill tokens processed."),
    "vllm:request_generation_tokens": ("histogram", "Number of generation tokens processed."),
    "sglang:num_running_reqs": ("gauge", "The number of running requests."),
    "sglang:num_queue_reqs": ("gauge", "The number of requests in the waiting queue."),
    "sglang:num_used_tokens": ("gauge", "The number of used tokens."),
    "sglang:token_usage": ("gauge", "The token usage."),
    "sglang:cache_hit_rate": ("gauge", "The prefix cache hit rate."),
    "sglang:max_total_num_tokens": ("gauge", "Maximum total number of tokens in the KV cache pool."),
    "sglang:gen_throughput": ("gauge", "The generation throughput (token/s)."),
    "sglang:num_retracted_reqs": ("gauge", "The number of currently retracted requests."),
    "sglang:prompt_tokens_total": ("counter", "Number of prefill tokens processed."),
    "sglang:generation_tokens_total": ("counter", "Number of generation tokens processed."),
    "sglang:cached_tokens_total": ("counter", "Number of cached prompt tokens."),
    "sglang:num_requests_total": ("counter", "Number of requests processed."),
    "sglang:num_aborted_requests_total": ("counter", "Number of requests aborted."),
    "sglang:num_retracted_requests_total": ("counter", "Number of retracted requests."),
    "sglang:time_to_first_token_seconds": ("histogram", "Time to first token in seconds."),
    "sglang:inter_token_latency_seconds": ("histogram", "Inter-token latency in seconds."),
    "sglang:e2e_request_latency_seconds": ("histogram", "End-to-end request latency in seconds."),
    "sglang:queue_time_seconds": ("histogram", "Request queue time in seconds."),
    "sglang:prompt_tokens_histogram": ("histogram", "Prompt tokens per request."),
    "sglang:generation_tokens_histogram": ("histogram", "Generation tokens per request."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("counter", "Throttling duration due to thermal constraints (in us)."),
    "DCGM_FI_DEV_POWER_VIOLATION": ("counter", "Throttling duration due to power constraints (in us)."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
    "kube_pod_info": ("gauge", "[STABLE] Information about pod."),
    "kube_pod_owner": ("gauge", "[STABLE] Information about the Pod's owner."),
    "kube_pod_status_ready": ("gauge", "[STABLE] Describes whether the pod is ready to serve requests."),
    "kube_pod_container_info": ("gauge", "[STABLE] Information about a container in a pod."),
    "kube_pod_container_status_restarts_total": (
        "counter",
        "[STABLE] The number of container restarts per container.",
    ),
    "kube_pod_container_status_last_terminated_reason": (
        "gauge",
        "Describes the last reason the container was in terminated state.",
    ),
    "kube_pod_container_status_last_terminated_exitcode": (
        "gauge",
        "Describes the exit code for the last container in terminated state.",
    ),
    "kube_pod_container_status_waiting_reason": (
        "gauge",
        "[STABLE] Describes the reason the container is currently in waiting state.",
    ),
    "kube_replicaset_owner": ("gauge", "[STABLE] Information about the ReplicaSet's owner."),
    "kube_deployment_spec_replicas": ("gauge", "[STABLE] Number of desired pods for a deployment."),
    "kube_deployment_status_replicas": ("gauge", "[STABLE] The number of replicas per deployment."),
    "kube_deployment_status_replicas_ready": (
        "gauge",
        "[STABLE] The number of ready replicas per deployment.",
    ),
    "kube_deployment_status_replicas_available": (
        "gauge",
        "[STABLE] The number of available replicas per deployment.",
    ),
    "kube_deployment_status_replicas_unavailable": (
        "gauge",
        "[STABLE] The number of unavailable replicas per deployment.",
    ),
    "kube_statefulset_replicas": ("gauge", "[STABLE] Number of desired pods for a StatefulSet."),
    "kube_statefulset_status_replicas": ("gauge", "[STABLE] The number of replicas per StatefulSet."),
    "kube_statefulset_status_replicas_ready": (
        "gauge",
        "[STABLE] The number of ready replicas per StatefulSet.",
    ),
    "kube_statefulset_status_replicas_available": (
        "gauge",
        "[STABLE] The number of available replicas per StatefulSet.",
    ),
    "kube_node_info": ("gauge", "[STABLE] Information about a cluster node."),
}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
_ORDER = {"_bucket": 0, "_count": 1, "_sum": 2}


def family_of(name: str) -> tuple[str, str, str]:
    """(family, type, help) of a sample name; `ValueError` for a family nobody typed."""
    if name in FAMILIES:
        kind, text = FAMILIES[name]
        return name, kind, text
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and FAMILIES.get(base, ("", ""))[0] == "histogram":
            return base, "histogram", FAMILIES[base][1]
    if name.endswith("_created"):
        base = name.removesuffix("_created")
        for candidate in (base, f"{base}_total"):
            if candidate in FAMILIES:
                return name, "gauge", FAMILIES[candidate][1]
    raise ValueError(f"no HELP/TYPE known for {name}: add its family to tools.cluster.exposition.FAMILIES")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float, style: str) -> str:
    """A sample value as a Python (`1.0`) or Go (`1`) exporter prints it."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if style == "go" and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def render(samples: Iterable[tuple[str, Labels, float]], style: str) -> str:
    """Samples as one exposition page: families in first-seen order, each with HELP and TYPE."""
    families: dict[str, tuple[str, str, list[tuple[str, Labels, float]]]] = {}
    for name, labels, value in samples:
        family, kind, text = family_of(name)
        families.setdefault(family, (kind, text, []))[2].append((name, labels, value))
    out: list[str] = []
    for family, (kind, text, rows) in families.items():
        out.append(f"# HELP {family} {text}")
        out.append(f"# TYPE {family} {kind}")
        if kind == "histogram":
            rows = sorted(rows, key=_histogram_order)
        for name, labels, value in rows:
            rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            out.append(
                f"{name}{{{rendered}}} {format_value(value, style)}"
                if labels
                else f"{name} {format_value(value, style)}"
            )
    return "\n".join(out) + "\n"


def _histogram_order(row: tuple[str, Labels, float]) -> tuple[Labels, int, float]:
    name, labels, _ = row
    suffix = next(s for s in HISTOGRAM_SUFFIXES if name.endswith(s))
    le = dict(labels).get("le")
    rest = tuple(item for item in labels if item[0] != "le")
    return rest, _ORDER[suffix], float(le) if le is not None else 0.0


@dataclass
class Family:
    """One parsed family: its TYPE and HELP (empty when absent) and its samples."""

    name: str
    type: str = "untyped"
    help: str = ""
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    @property
    def label_names(self) -> frozenset[str]:
        return frozenset(k for _, labels, _ in self.samples for k in labels)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total", "_info")


def _labels(text: str, line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text.rstrip()):
        match = _LABEL.match(text, pos)
        if match is None:
            raise ValueError(f"cannot parse labels in: {line}")
        raw = match.group(2)
        out[match.group(1)] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), raw)
        pos = match.end()
    return out


def parse(text: str) -> dict[str, Family]:
    """Families of a text exposition page, by name; raises `ValueError` on a malformed line."""
    families: dict[str, Family] = {}
    current: Family | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                family = families.setdefault(parts[2], Family(parts[2]))
                if parts[1] == "TYPE":
                    family.type = parts[3].strip() if len(parts) > 3 else "untyped"
                else:
                    family.help = parts[3] if len(parts) > 3 else ""
                current = family
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"cannot parse sample line: {line}")
        name = match.group(1)
        owner = current
        if owner is None or not (name == owner.name or name in (owner.name + s for s in _SUFFIXES)):
            owner = families.setdefault(name, Family(name))
        owner.samples.append((name, _labels(match.group(3) or "", line), float(match.group(4))))
    return families
