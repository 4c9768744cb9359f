"""Generality bench: incidents written by an outside engineer, not by the tool's authors.

`python -m tools.generality` (from the repo root) writes about two dozen fixtures into
`bench/generality/`. They reuse `tools.synth.Fleet` for the healthy baseline and the
fixture format, but vary what the bundled fixtures keep fixed: fleet size (3..64),
magnitude (strong and moderate-but-clear), noise (up to 1.5x synth's), which optional
signals exist (no GPU, no kube, no cost, no preemptions, fleet-only series), replicas
that vanish for unrelated reasons, and confounders where a mechanism is shown next to a
deeper cause; and the edge (gateway, router, probes) next to the engine or supply cause it is
easily mistaken for. Every fixture is seeded, so reruns write identical files.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools.synth import (
    COUNTS,
    FLAGS,
    FLEET_HEALTHY,
    GPU_HEALTHY,
    HEALTHY,
    RATIOS,
    Fleet,
    _key,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "generality"
FORBID = {"forbidden": ["scale_out"]}
ALLOW = {"not_forbidden": ["scale_out"]}

# The edge (gateway or router, kubelet probes) has no healthy values in tools/synth.py:
# typical values and relative noise of a gateway in front of synth's 8B fleet.
EDGE_HEALTHY: dict[str, tuple[float, float]] = {
    "gateway_latency_p99_seconds": (0.55, 0.08),
    "gateway_queue": (1.5, 0.6),
    "upstream_error_ratio": (0.001, 0.4),
}
EDGE_COUNTS = {"gateway_queue", "gateway_inflight"}
EDGE_FLAGS = {"backends_routed", "probe_failures", "terminated_error", "exit_code"}
EDGE_RATIOS = {"upstream_error_ratio"}


@dataclass
class GFleet(Fleet):
    """A Fleet whose per-sample noise can be scaled (1.0 = synth's defaults)."""

    noise: float = 1.0

    def _noisy(self, signal: str, values: np.ndarray) -> np.ndarray:
        spec = (
            HEALTHY.get(signal)
            or GPU_HEALTHY.get(signal)
            or FLEET_HEALTHY.get(signal)
            or EDGE_HEALTHY.get(signal)
        )
        rel = (spec[1] if spec else 0.03) * self.noise
        out = values.copy()
        finite = np.isfinite(out)
        if (
            signal in FLAGS
            or signal in EDGE_FLAGS
            or signal in ("build_info", "config_info", "replicas_ready", "replicas_desired")
        ):
            return out
        if signal in COUNTS or signal in EDGE_COUNTS:
            lam = np.clip(out[finite], 0, None)
            noisy = self.rng.poisson(lam).astype(float)
            if self.noise > 1:
                extra = self.rng.normal(0, 1, lam.size) * np.sqrt(lam) * math.sqrt(self.noise**2 - 1)
                noisy = np.clip(np.round(noisy + extra), 0, None)
            out[finite] = noisy
            return out
        if signal == "preemption_rate":
            out[finite] = np.clip(
                out[finite] * (1 + self.rng.normal(0, 0.15 * self.noise, finite.sum())), 0, None
            )
            return out
        out[finite] = out[finite] * (1 + self.rng.normal(0, rel, finite.sum()))
        out[finite] = np.clip(out[finite], 0, 1 if signal in RATIOS or signal in EDGE_RATIOS else None)
        return out


def fleet(name: str, description: str, **kw: Any) -> GFleet:
    return GFleet("gen-" + name, description, **kw)


# --- helpers an outside engineer needs --------------------------------------------------
KUBE = {"restarts", "oom_killed"}


def _instance_keys(f: Fleet, replica: str, gpu: bool, kube: bool) -> list:
    out = []
    for key in f.series:
        labels = dict(key[1])
        if labels.get("instance") != replica:
            continue
        if "gpu" in labels and not gpu:
            continue
        if key[0] in KUBE and not kube:
            continue
        out.append(key)
    return out


def vanish(f: Fleet, replica: str, at: str, gpu: bool = True, kube: bool = True) -> None:
    """The replica's series end at `at`; keep GPU (DCGM on a live node) or kube series if asked."""
    i = f.idx(at)
    for key in _instance_keys(f, replica, gpu, kube):
        f.series[key][i:] = np.nan
        f.series[key][i] = -math.inf


def gap(f: Fleet, replica: str, start: str, end: str) -> None:
    """The engine's metrics endpoint is down (container restarting): no samples."""
    i0, i1 = f.idx(start), f.idx(end)
    for key in _instance_keys(f, replica, gpu=False, kube=False):
        if key[0] in ("build_info", "config_info"):
            continue
        f.series[key][i0:i1] = np.nan


def appear(f: Fleet, replica: str, at: str) -> None:
    """A replica that only exists from `at` (a rescheduled pod with a new name)."""
    i = f.idx(at)
    for key in _instance_keys(f, replica, gpu=True, kube=True):
        f.series[key][:i] = np.nan


def to_fleet(f: Fleet, signal: str, how: str) -> None:
    """Replace the per-replica series of `signal` by one fleet series (gateway view)."""
    keys = f.keys(signal)
    stack = np.array([np.where(np.isfinite(f.series[k]), f.series[k], np.nan) for k in keys])
    if how == "sum":
        agg = np.nansum(stack, axis=0)
    elif how == "mean":
        agg = np.nanmean(stack, axis=0)
    else:  # a fleet quantile is dominated by the slower replicas
        agg = np.nanpercentile(stack, 90, axis=0)
    for k in keys:
        del f.series[k]
    f.series[_key(signal, {})] = agg


def add(f: Fleet, signal: str, labels: dict[str, str], base: float) -> None:
    f.series[_key(signal, labels)] = np.full(f.n, float(base))


def step_key(f: Fleet, signal: str, labels: dict[str, str], at: str, factor: float, ramp: str = "1m") -> None:
    arr = f.series[_key(signal, labels)]
    i, w = f.idx(at), max(1, f.idx(ramp))
    weights = np.clip((np.arange(f.n - i) + 1) / w, 0, 1)
    arr[i:] = arr[i:] * (1 + (factor - 1) * weights)


def spend_base(f: Fleet, price: float = 0.0021) -> float:
    tokens = 0.0
    for sig in ("prompt_tokens_rate", "generation_tokens_rate"):
        tokens += sum(float(f.series[k][0]) for k in f.keys(sig) if "instance" in dict(k[1]))
    return price * tokens * 3600 / 1000


def alert(name: str, severity: str = "page", **labels: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "severity": severity, **labels},
        "annotations": {"summary": f"{name} firing"},
    }


def out(f: Fleet) -> str:
    return str(OUT / f"{f.name}.yaml")


INCIDENTS = []


def incident(fn):
    INCIDENTS.append(fn)
    return fn


# --- request layer ----------------------------------------------------------------------
@incident
def traffic_burst_moderate() -> None:
    f = fleet(
        "traffic-burst-1p6x-fleet-rate-only",
        "A partner's nightly sync job started early: total request rate "
        "rose 1.6x within two minutes, mostly one tenant. Only the gateway's fleet request_rate exists.",
        replicas=8,
        seed=201,
        noise=1.4,
    )
    at = "50m"
    for t in ("acme", "globex", "initech"):
        add(f, "prompt_tokens_rate", {"tenant": t}, 8 * 4800 / 3)
    step_key(f, "prompt_tokens_rate", {"tenant": "globex"}, at, 2.8, ramp="2m")
    f.step("request_rate", at, factor=1.6, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=1.6, ramp="2m", replicas=f.names)
    f.step("generation_tokens_rate", at, factor=1.55, ramp="2m")
    f.step("requests_running", at, factor=1.45, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.80, ramp="4m")
    f.step("queue_waiting", "51m", to=7, ramp="3m")
    f.step("queue_time_p99_seconds", "51m", factor=6, ramp="3m")
    f.step("ttft_p99_seconds", "51m", factor=2.3, ramp="3m")
    f.step("ttft_p50_seconds", "51m", factor=1.6, ramp="3m")
    f.step("tpot_p99_seconds", "51m", factor=1.15, ramp="3m")
    f.step("gpu_util_ratio", at, to=0.9, ramp="2m")
    f.step("rejected_ratio", "52m", to=0.02, ramp="2m")
    to_fleet(f, "request_rate", "sum")
    f.write(out(f), "ttft_slow", at="68m", expect={"cause": "traffic_burst", **FORBID})


@incident
def traffic_burst_kv_pinned() -> None:
    f = fleet(
        "traffic-burst-kv-pinned-56-no-preemption-metric",
        "A viral share link doubled traffic in three "
        "minutes on a 56-replica fleet; KV filled everywhere as a consequence. The engine build does not "
        "export preemptions.",
        replicas=56,
        seed=202,
        noise=1.2,
        omit=("preemption_rate",),
    )
    at = "45m"
    for t in ("web", "mobile", "api"):
        add(f, "prompt_tokens_rate", {"tenant": t}, 56 * 4800 / 3)
    step_key(f, "prompt_tokens_rate", {"tenant": "web"}, at, 4.3, ramp="3m")
    f.step("request_rate", at, factor=2.1, ramp="3m")
    f.step("prompt_tokens_rate", at, factor=2.1, ramp="3m", replicas=f.names)
    f.step("generation_tokens_rate", at, factor=1.8, ramp="3m")
    f.step("requests_running", at, factor=1.6, ramp="3m")
    f.step("kv_usage_ratio", "46m", to=0.97, ramp="4m")
    f.step("queue_waiting", "46m", to=15, ramp="4m")
    f.step("queue_time_p99_seconds", "46m", factor=10, ramp="4m")
    f.step("ttft_p99_seconds", "46m", factor=3.5, ramp="4m")
    f.step("ttft_p50_seconds", "46m", factor=2.2, ramp="4m")
    f.step("tpot_p99_seconds", "47m", factor=1.5, ramp="4m")
    f.step("gpu_util_ratio", at, to=0.93, ramp="3m")
    f.step("rejected_ratio", "48m", to=0.03, ramp="2m")
    f.write(
        out(f),
        None,
        at="62m",
        alert=alert("VLLMTimeToFirstTokenP99High", team="inference"),
        expect={"cause": "traffic_burst", **FORBID},
    )


@incident
def long_prompt_surge_moderate() -> None:
    f = fleet(
        "long-prompt-surge-moderate-20-no-gpu",
        "A RAG feature raised retrieval top-k from 4 to 8: prompt "
        "P95 1800->3000 tokens, long-prompt share 3%->11%. No DCGM exporter in this cluster.",
        replicas=20,
        seed=203,
        noise=1.5,
        gpu_signals=False,
    )
    at = "40m"
    f.step("prompt_tokens_p95", at, factor=1.67, ramp="4m")
    f.step("long_prompt_ratio", at, to=0.11, ramp="4m")
    f.step("prompt_tokens_rate", at, factor=1.5, ramp="4m")
    f.step("prefill_time_p99_seconds", at, factor=1.8, ramp="4m")
    f.step("ttft_p99_seconds", at, factor=1.9, ramp="4m")
    f.step("ttft_p50_seconds", at, factor=1.4, ramp="4m")
    f.step("kv_usage_ratio", at, to=0.68, ramp="5m")
    f.step("queue_waiting", "42m", to=2.5, ramp="4m")
    f.step("queue_time_p99_seconds", "42m", factor=2.0, ramp="4m")
    f.write(
        out(f),
        None,
        at="65m",
        alert=alert("LLMTTFTSLOBurn", slo="ttft-p99"),
        expect={"cause": "long_prompt_surge", **FORBID},
    )


@incident
def long_output_shift_fleet_tpot() -> None:
    f = fleet(
        "long-output-shift-fleet-tpot-only",
        "A client SDK update dropped its max_tokens default; output "
        "P95 went 420->1050. TPOT is only available as a gateway-computed fleet series.",
        replicas=10,
        seed=204,
        noise=1.2,
    )
    at = "45m"
    f.step("output_tokens_p95", at, factor=2.5, ramp="8m")
    f.step("generation_tokens_rate", at, factor=1.9, ramp="8m")
    f.step("requests_running", at, factor=1.5, ramp="10m")
    f.step("kv_usage_ratio", at, to=0.80, ramp="10m")
    f.step("tpot_p99_seconds", "47m", factor=1.35, ramp="8m")
    f.step("tpot_p50_seconds", "47m", factor=1.2, ramp="8m")
    f.step("e2e_p99_seconds", at, factor=2.4, ramp="8m")
    f.step("gpu_util_ratio", at, to=0.82, ramp="8m")
    to_fleet(f, "tpot_p99_seconds", "p")
    to_fleet(f, "tpot_p50_seconds", "mean")
    f.write(out(f), "tpot_slow", at="75m", expect={"cause": "long_output_shift", **FORBID})


@incident
def token_volume_growth_auto() -> None:
    f = fleet(
        "token-volume-growth-one-tenant-spend-alert",
        "Tenant acme enabled the assistant for all its seats: "
        "its tokens went 2.5x over 20 minutes; price unchanged; latency fine. Spend alert fired.",
        replicas=8,
        seed=205,
        gpu_signals=False,
    )
    at = "30m"
    shares = {"acme": 0.40, "globex": 0.35, "initech": 0.25}
    for t, s in shares.items():
        add(f, "prompt_tokens_rate", {"tenant": t}, 8 * 4800 * s)
        add(f, "generation_tokens_rate", {"tenant": t}, 8 * 1250 * s)
    step_key(f, "prompt_tokens_rate", {"tenant": "acme"}, at, 2.5, ramp="20m")
    step_key(f, "generation_tokens_rate", {"tenant": "acme"}, at, 2.5, ramp="20m")
    base = spend_base(f)
    f.add_fleet("spend_rate", base)
    f.ramp("request_rate", at, "50m", 1.6)
    f.ramp("prompt_tokens_rate", at, "50m", 1.6, replicas=f.names)
    f.ramp("generation_tokens_rate", at, "50m", 1.6, replicas=f.names)
    f.ramp("spend_rate", at, "50m", 1.6)
    f.ramp("requests_running", at, "50m", 1.3)
    f.ramp("kv_usage_ratio", at, "50m", 1.22)
    f.ramp("ttft_p99_seconds", at, "50m", 1.1)
    f.write(
        out(f),
        None,
        at="75m",
        alert=alert("LLMSpendRateAnomaly", severity="ticket", team="finops"),
        expect={"cause": "token_volume_growth", **FORBID},
    )


@incident
def length_truncation_auto() -> None:
    f = fleet(
        "length-truncation-gateway-default-auto",
        "A gateway policy change set default max_tokens 256 "
        "for clients that send none; 14% of answers are now cut off.",
        replicas=6,
        seed=206,
    )
    at = "35m"
    f.step("truncated_ratio", at, to=0.14, ramp="2m")
    f.step("output_tokens_p95", at, to=256, ramp="2m")
    f.step("generation_tokens_rate", at, factor=0.8, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=0.7, ramp="2m")
    f.write(
        out(f),
        None,
        at="60m",
        alert=alert("LLMTruncatedResponsesHigh", severity="warning"),
        expect={"cause": "length_truncation", **FORBID},
    )


# --- engine layer -----------------------------------------------------------------------
@incident
def cost_up_hit_drop() -> None:
    f = fleet(
        "cost-up-hit-ratio-drop-unchanged-price",
        "A load-balancer migration lost session affinity: prefix "
        "hits 0.70->0.35; cached prompt tokens are billed at a discount, so spend rose ~1.6x at the same "
        "list price and the same token volume.",
        replicas=10,
        seed=207,
        gpu_signals=False,
    )
    f.set("prefix_hit_ratio", "0m", 0.70)
    at = "40m"
    f.step("prefix_hit_ratio", at, to=0.35, ramp="3m")
    f.step("prefill_time_p99_seconds", at, factor=1.5, ramp="3m")
    f.step("ttft_p99_seconds", at, factor=1.35, ramp="3m")
    f.add_fleet("spend_rate", spend_base(f) * 0.5)
    f.step("spend_rate", at, factor=1.6, ramp="3m")
    f.write(out(f), "cost_up", at="80m", expect={"cause": "prefix_cache_miss", **FORBID})


@incident
def prefix_miss_large_rescheduled() -> None:
    f = fleet(
        "prefix-miss-36-one-replica-rescheduled",
        "A system prompt edit put a request id in the first line; "
        "hits 0.70->0.31 on all 36 replicas. Mid-incident a spot node was reclaimed: vllm-17 vanished and "
        "was rescheduled as vllm-36 three minutes later.",
        replicas=37,
        seed=208,
        noise=1.3,
    )
    f.set("replicas_ready", "0m", 36)
    f.set("replicas_desired", "0m", 36)
    f.set("prefix_hit_ratio", "0m", 0.70)
    at = "40m"
    f.step("prefix_hit_ratio", at, to=0.31, ramp="2m")
    f.step("prefill_time_p99_seconds", at, factor=1.6, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=1.7, ramp="2m")
    f.step("ttft_p50_seconds", at, factor=1.5, ramp="2m")
    f.step("gpu_util_ratio", at, factor=1.15, ramp="2m")
    f.step("queue_time_p99_seconds", at, factor=1.4, ramp="2m")
    f.set("replicas_ready", "52m", 35, until="56m")
    appear(f, "vllm-36", "55m")
    vanish(f, "vllm-17", "52m")
    f.write(out(f), "ttft_slow", at="65m", expect={"cause": "prefix_cache_miss", **FORBID})


@incident
def prefill_interference_chunked_off() -> None:
    f = fleet(
        "prefill-interference-long-docs-chunked-off",
        "Chunked prefill is off on this small fleet (an old "
        "workaround). A document-summary feature raised the long-prompt share 3%->14%: decode stalls, "
        "TPOT P99 2.4x while KV stays at 0.6.",
        replicas=6,
        seed=209,
        noise=1.3,
    )
    f.relabel("config_info", "0m", {"chunked_prefill": "false"})
    at = "35m"
    f.step("long_prompt_ratio", at, to=0.14, ramp="3m")
    f.step("prompt_tokens_p95", at, factor=1.6, ramp="3m")
    f.step("prefill_time_p99_seconds", at, factor=2.0, ramp="3m")
    f.step("tpot_p99_seconds", at, factor=2.4, ramp="3m")
    f.step("tpot_p50_seconds", at, factor=1.15, ramp="3m")
    f.step("ttft_p99_seconds", at, factor=1.5, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.62, ramp="3m")
    f.write(
        out(f),
        None,
        at="60m",
        alert=alert("InterTokenLatencyP99High"),
        expect={"cause": "prefill_interference", **FORBID},
    )


@incident
def prefill_interference_budget_raised() -> None:
    f = fleet(
        "prefill-interference-batched-tokens-raised",
        "To improve TTFT someone raised max_num_batched_tokens "
        "8192->32768 (rolled out one replica a minute). Long prompts are unchanged (8% share), but each "
        "now stalls decode for longer: TPOT P99 1.9x, TTFT slightly better, KV 0.55.",
        replicas=9,
        seed=210,
    )
    f.set("long_prompt_ratio", "0m", 0.08)
    f.set("prompt_tokens_p95", "0m", 2600)
    for i, name in enumerate(f.names):
        t = f"{30 + i}m"
        f.pulse("restarts", t, 1, width="5m", replicas=[name])
        gap(f, name, t, f"{31 + i}m")
        f.relabel("config_info", t, {"max_num_batched_tokens": "32768"}, replicas=[name])
        f.step("tpot_p99_seconds", f"{31 + i}m", factor=1.9, ramp="1m", replicas=[name])
        f.step("ttft_p99_seconds", f"{31 + i}m", factor=0.9, ramp="1m", replicas=[name])
    f.write(out(f), "tpot_slow", at="70m", expect={"cause": "prefill_interference", **FORBID})


@incident
def batch_oversized_after_config() -> None:
    f = fleet(
        "batch-oversized-max-seqs-320-after-rollout",
        "max_num_seqs raised 128->320 in a rolling config "
        "change (30-41m); as the afternoon peak arrived the running batch grew 22->58 and TPOT P99 rose "
        "1.9x on every replica; KV high (0.88) but not pinned.",
        replicas=12,
        seed=211,
        noise=1.2,
    )
    for i, name in enumerate(f.names):
        t = f"{30 + i}m"
        f.pulse("restarts", t, 1, width="5m", replicas=[name])
        gap(f, name, t, f"{31 + i}m")
        f.relabel("config_info", t, {"max_num_seqs": "320"}, replicas=[name])
    at = "44m"
    f.step("requests_running", at, to=58, ramp="8m")
    f.step("tpot_p99_seconds", at, factor=1.9, ramp="8m")
    f.step("tpot_p50_seconds", at, factor=1.6, ramp="8m")
    f.step("kv_usage_ratio", at, to=0.88, ramp="8m")
    f.step("preemption_rate", "50m", to=0.05, ramp="3m")
    f.step("gpu_util_ratio", at, to=0.88, ramp="8m")
    f.step("e2e_p99_seconds", at, factor=1.7, ramp="8m")
    f.write(out(f), "tpot_slow", at="75m", expect={"cause": "batch_oversized", **FORBID})


# --- resource layer ---------------------------------------------------------------------
@incident
def kv_pressure_moderate() -> None:
    f = fleet(
        "kv-pressure-moderate-32",
        "Multi-turn sessions grew through the afternoon (prompt P95 +20%); KV "
        "settled at 0.97 (not 0.999) on all 32 replicas, with modest preemptions (0.4/s).",
        replicas=32,
        seed=212,
        noise=1.3,
    )
    at = "45m"
    f.step("prompt_tokens_p95", at, factor=1.2, ramp="10m")
    f.step("kv_usage_ratio", at, to=0.97, ramp="10m")
    f.step("preemption_rate", "52m", to=0.4, ramp="4m")
    f.step("tpot_p99_seconds", "52m", factor=1.6, ramp="4m")
    f.step("tpot_p50_seconds", "52m", factor=1.25, ramp="4m")
    f.step("ttft_p99_seconds", "53m", factor=1.5, ramp="4m")
    f.step("queue_waiting", "53m", to=3, ramp="4m")
    f.write(out(f), None, at="75m", alert=alert("VLLMTPOTP99High"), expect={"cause": "kv_pressure", **FORBID})


@incident
def gpu_power_cap_64() -> None:
    f = fleet(
        "gpu-power-capped-node-64",
        "A BMC firmware update capped one node's power: its four GPUs are "
        "throttled (power 520->360 W, temperature normal), their replicas' TPOT 2x. Separately vllm-12's "
        "metrics scrape was lost mid-incident (pod fine).",
        replicas=64,
        seed=213,
        noise=1.2,
    )
    hot = f.who(40, 41, 42, 43)
    at = "50m"
    f.set("gpu_throttle", at, 1, replicas=hot)
    f.step("gpu_power_watts", at, to=360, replicas=hot)
    f.step("gpu_temp_celsius", at, factor=1.05, replicas=hot, ramp="5m")
    f.step("gpu_util_ratio", at, to=0.96, replicas=hot)
    f.step("tpot_p99_seconds", at, factor=2.0, replicas=hot, ramp="2m")
    f.step("tpot_p50_seconds", at, factor=1.8, replicas=hot, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=1.6, replicas=hot, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=1.8, replicas=hot, ramp="2m")
    f.step("queue_waiting", at, to=3, replicas=hot, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.7, replicas=hot, ramp="4m")
    vanish(f, "vllm-12", "58m", gpu=False, kube=False)
    f.write(
        out(f),
        None,
        at="70m",
        alert=alert("LLMInterTokenLatencyHigh", cluster="prod-eu"),
        expect={"cause": "gpu_throttling", **FORBID},
    )


@incident
def gpu_fault_queue_growth() -> None:
    f = fleet(
        "gpu-fault-two-xid79-queue-growth-16",
        "A PCIe switch failed on one node: two GPUs fell off the bus "
        "(XID 79) a minute apart; their replicas errored and went into CrashLoop; the 14 survivors queued. "
        "DCGM still reports the dead GPUs.",
        replicas=16,
        seed=214,
        noise=1.1,
    )
    dead = f.who(3, 11)
    survivors = [n for n in f.names if n not in dead]
    for k, name in enumerate(dead):
        t0 = f"{35 + k}m"
        f.set("gpu_xid", t0, 79, replicas=[name])
        f.set("gpu_util_ratio", t0, 0.0, replicas=[name])
        f.step("error_ratio", t0, to=1.0, replicas=[name], ramp="15s")
        for r in (2, 8, 17):
            f.pulse("restarts", f"{37 + k + r}m", 1, width="5m", replicas=[name])
        vanish(f, name, f"{37 + k}m", gpu=False, kube=False)
    f.set("replicas_ready", "37m", 15, until="38m")
    f.set("replicas_ready", "38m", 14)
    at = "38m"
    f.step("request_rate", at, factor=16 / 14, replicas=survivors)
    f.step("queue_waiting", at, to=5, replicas=survivors, ramp="4m")
    f.step("queue_time_p99_seconds", at, factor=5, replicas=survivors, ramp="4m")
    f.step("ttft_p99_seconds", at, factor=2.2, replicas=survivors, ramp="4m")
    f.step("kv_usage_ratio", at, to=0.70, replicas=survivors, ramp="4m")
    f.step("requests_running", at, factor=1.15, replicas=survivors, ramp="4m")
    f.write(out(f), "ttft_slow", at="60m", expect={"cause": "gpu_fault", **FORBID})


@incident
def gpu_fault_ecc_small() -> None:
    f = fleet(
        "gpu-fault-ecc-dbe-4",
        "A 4-replica fleet: one GPU reports double-bit ECC errors (XID 48); its "
        "replica fails a third of requests, then crashes and stays not-ready.",
        replicas=4,
        seed=215,
    )
    bad = ["vllm-2"]
    ok = [n for n in f.names if n not in bad]
    at = "30m"
    f.set("gpu_ecc_errors", at, 3, replicas=bad, until="40m")
    f.set("gpu_xid", at, 48, replicas=bad)
    f.step("error_ratio", at, to=0.35, replicas=bad, ramp="30s")
    f.step("timeout_ratio", at, to=0.03, replicas=bad, ramp="30s")
    f.pulse("restarts", "38m", 1, replicas=bad)
    f.pulse("restarts", "46m", 1, replicas=bad)
    f.set("replicas_ready", "38m", 3)
    f.step("request_rate", "38m", factor=4 / 3, replicas=ok)
    f.step("ttft_p99_seconds", "38m", factor=1.5, replicas=ok, ramp="3m")
    f.step("queue_waiting", "38m", to=2.5, replicas=ok, ramp="3m")
    vanish(f, "vllm-2", "38m", gpu=False, kube=False)
    f.write(out(f), "errors", at="50m", expect={"cause": "gpu_fault", **FORBID})


@incident
def engine_oom_cascade() -> None:
    f = fleet(
        "engine-oom-cascade-14",
        "A client began sending 40-image multimodal requests; engine memory on "
        "three replicas crept to 0.985 and they were OOM-killed four times in 12 minutes; each restart "
        "briefly lowered ready replicas.",
        replicas=14,
        seed=216,
        noise=1.2,
    )
    victims = {"vllm-2": ["44m", "56m"], "vllm-5": ["47m"], "vllm-9": ["51m"]}
    f.step("prompt_tokens_p95", "40m", factor=1.3, ramp="3m")
    for name, kills in victims.items():
        f.step("gpu_memory_used_ratio", "40m", to=0.985, replicas=[name], ramp="3m")
        for t in kills:
            m = int(t[:-1])
            f.step("error_ratio", f"{m - 1}m", to=0.15, replicas=[name], ramp="15s")
            f.set("error_ratio", f"{m + 2}m", 0.002, replicas=[name])
            f.set("oom_killed", t, 1, replicas=[name])
            f.pulse("restarts", t, 1, width="5m", replicas=[name])
            gap(f, name, t, f"{m + 2}m")
            f.set("gpu_memory_used_ratio", t, 0.0, replicas=[name], until=f"{m + 1}m")
            f.set("replicas_ready", t, 13, until=f"{m + 2}m")
    f.write(
        out(f),
        None,
        at="60m",
        alert=alert("LLMServingErrorRateHigh", service="chat"),
        expect={"cause": "engine_oom", **FORBID},
    )


# --- supply layer -----------------------------------------------------------------------
@incident
def routing_hot_replicas_48() -> None:
    f = fleet(
        "routing-two-hot-replicas-kv-48",
        "A consistent-hash router change pinned two large tenants to "
        "vllm-7 and vllm-31: 2.4x their share of requests, KV 0.98 with preemptions and long queues there, "
        "the other 46 a little below normal. Prefix hits diverge.",
        replicas=48,
        seed=217,
        noise=1.2,
    )
    hot = f.who(7, 31)
    cold = [n for n in f.names if n not in hot]
    at = "40m"
    f.step("request_rate", at, factor=2.4, replicas=hot, ramp="3m")
    f.step("request_rate", at, factor=0.94, replicas=cold, ramp="3m")
    f.step("prompt_tokens_rate", at, factor=2.4, replicas=hot, ramp="3m")
    f.step("generation_tokens_rate", at, factor=2.0, replicas=hot, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.98, replicas=hot, ramp="4m")
    f.step("kv_usage_ratio", at, factor=0.92, replicas=cold, ramp="4m")
    f.step("preemption_rate", "43m", to=1.2, replicas=hot, ramp="2m")
    f.step("queue_waiting", "42m", to=14, replicas=hot, ramp="3m")
    f.step("queue_time_p99_seconds", "42m", factor=10, replicas=hot, ramp="3m")
    f.step("ttft_p99_seconds", "42m", factor=4, replicas=hot, ramp="3m")
    f.step("tpot_p99_seconds", "42m", factor=1.7, replicas=hot, ramp="3m")
    f.step("requests_running", at, factor=1.8, replicas=hot, ramp="3m")
    f.step("prefix_hit_ratio", at, to=0.82, replicas=hot, ramp="3m")
    f.step("prefix_hit_ratio", at, to=0.55, replicas=cold, ramp="3m")
    f.step("gpu_util_ratio", at, to=0.97, replicas=hot, ramp="3m")
    f.write(
        out(f),
        None,
        at="60m",
        alert=alert("VLLMTTFTP99High", env="prod"),
        expect={"cause": "routing_imbalance", **FORBID},
    )


@incident
def replica_down_rejected() -> None:
    f = fleet(
        "replica-down-node-drain-rejected-no-gpu-9",
        "A node drain evicted three of nine replicas; no "
        "capacity to reschedule (pods Pending). Survivors took 1.5x load; the gateway queue limit started "
        "returning 429s. No GPU metrics.",
        replicas=9,
        seed=218,
        gpu_signals=False,
        noise=1.3,
    )
    gone = f.who(6, 7, 8)
    surv = [n for n in f.names if n not in gone]
    at = "45m"
    f.set("replicas_ready", at, 6)
    f.step("request_rate", at, factor=1.5, replicas=surv)
    f.step("prompt_tokens_rate", at, factor=1.5, replicas=surv)
    f.step("generation_tokens_rate", at, factor=1.5, replicas=surv)
    f.step("queue_waiting", at, to=12, replicas=surv, ramp="4m")
    f.step("queue_time_p99_seconds", at, factor=8, replicas=surv, ramp="4m")
    f.step("ttft_p99_seconds", at, factor=3, replicas=surv, ramp="4m")
    f.step("requests_running", at, factor=1.4, replicas=surv, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.90, replicas=surv, ramp="4m")
    f.step("preemption_rate", "48m", to=0.3, replicas=surv, ramp="2m")
    f.step("rejected_ratio", "47m", to=0.06, ramp="3m")
    for n in gone:
        vanish(f, n, at)
    f.write(out(f), "rejected", at="70m", expect={"cause": "replica_down", **FORBID})


@incident
def capacity_shortage_40() -> None:
    f = fleet(
        "capacity-shortage-steady-40-no-gpu",
        "A marketing campaign grew demand steadily by 55% over 140 "
        "minutes across all tenants on a 40-replica fleet; every replica saturated evenly near the end. "
        "KV, cache and replicas healthy. No GPU metrics.",
        replicas=40,
        duration="180m",
        seed=219,
        gpu_signals=False,
        noise=1.2,
    )
    f.ramp("request_rate", "20m", "160m", 1.55)
    f.ramp("prompt_tokens_rate", "20m", "160m", 1.55)
    f.ramp("generation_tokens_rate", "20m", "160m", 1.55)
    f.ramp("requests_running", "20m", "160m", 1.45)
    f.ramp("kv_usage_ratio", "20m", "160m", 1.42)
    f.ramp("queue_waiting", "110m", "165m", 7.5)
    f.ramp("queue_time_p99_seconds", "110m", "165m", 5)
    f.ramp("ttft_p99_seconds", "100m", "165m", 2.2)
    f.ramp("ttft_p50_seconds", "100m", "165m", 1.5)
    f.ramp("tpot_p99_seconds", "100m", "165m", 1.2)
    f.write(
        out(f),
        None,
        at="170m",
        alert=alert("LLMTTFTP99AboveSLO", tier="gold"),
        expect={"cause": "capacity_shortage", **ALLOW},
    )


@incident
def capacity_shortage_small_no_kube() -> None:
    f = fleet(
        "capacity-shortage-5-no-kube-rejected",
        "A 5-replica internal fleet without kube-state-metrics: "
        "weekly batch usage grew 45% steadily over two hours; queues and 429s at the end.",
        replicas=5,
        duration="150m",
        seed=220,
        kube_signals=False,
        noise=1.3,
    )
    f.ramp("request_rate", "10m", "130m", 1.45)
    f.ramp("prompt_tokens_rate", "10m", "130m", 1.45)
    f.ramp("generation_tokens_rate", "10m", "130m", 1.45)
    f.ramp("requests_running", "10m", "130m", 1.4)
    f.ramp("kv_usage_ratio", "10m", "130m", 1.5)
    f.ramp("gpu_util_ratio", "10m", "130m", 1.28)
    f.ramp("queue_waiting", "95m", "140m", 12)
    f.ramp("queue_time_p99_seconds", "95m", "140m", 6)
    f.ramp("ttft_p99_seconds", "90m", "140m", 2.5)
    f.ramp("rejected_ratio", "100m", "140m", 50)
    f.write(out(f), "rejected", at="145m", expect={"cause": "capacity_shortage", **ALLOW})


@incident
def rollout_errors_24() -> None:
    f = fleet(
        "rollout-waves-errors-24",
        "An engine upgrade 0.11.0->0.11.2 rolls through a 24-replica StatefulSet "
        "four pods at a time every 4 minutes; in-flight requests are aborted at each shutdown and ready "
        "replicas dip by four per wave.",
        replicas=24,
        seed=221,
        noise=1.1,
    )
    for w in range(6):
        names = f.names[4 * w : 4 * w + 4]
        t = 30 + 4 * w
        f.step("error_ratio", f"{t}m", to=0.08, replicas=names, ramp="15s")
        f.set("error_ratio", f"{t + 1}m", 0.002, replicas=names)
        f.pulse("restarts", f"{t + 1}m", 1, width="5m", replicas=names)
        for n in names:
            gap(f, n, f"{t + 1}m", f"{t + 3}m")
        f.relabel("build_info", f"{t + 3}m", {"engine_version": "0.11.2"}, replicas=names)
        f.set("replicas_ready", f"{t + 1}m", 20, until=f"{t + 3}m")
        others = [n for n in f.names if n not in names]
        f.set("ttft_p99_seconds", f"{t + 1}m", 0.62, replicas=others, until=f"{t + 3}m")
    f.step("timeout_ratio", "30m", to=0.004, ramp="1m")
    # Error ratios are 5m-window signals: the gateway's fleet view stays elevated while waves
    # overlap its window (requests sent to terminating pods fail), not only for one minute.
    f.add_fleet("error_ratio", 0.002)
    f.series[_key("error_ratio", {})][f.idx("31m") : f.idx("58m")] = 0.02
    f.write(
        out(f),
        None,
        at="48m",
        alert=alert("LLMRequestErrorsHigh"),
        expect={"cause": "rollout_disruption", **FORBID},
    )


@incident
def price_change_route() -> None:
    f = fleet(
        "price-change-route-and-model-version",
        "The gateway moved the default route to a newer model "
        "version served on a pricier reserved pool: price per 1k tokens 0.0021->0.0029 (1.38x) at the "
        "same volume.",
        replicas=6,
        seed=222,
        gpu_signals=False,
    )
    at = "30m"
    f.relabel("build_info", at, {"model_version": "2026-10", "route": "reserved"})
    f.add_fleet("spend_rate", spend_base(f))
    f.step("cost_per_1k_tokens", at, to=0.0029)
    f.step("spend_rate", at, factor=1.38)
    f.write(out(f), "cost_up", at="70m", expect={"cause": "price_change", **FORBID})


@incident
def version_change_quant() -> None:
    f = fleet(
        "version-change-int4-rolling-12",
        "Quality complaints after the fleet moved from fp8 to AWQ int4 "
        "weights with vLLM 0.11.3, one replica a minute; latency slightly better, nothing else moved.",
        replicas=12,
        seed=223,
        noise=1.2,
    )
    for i, name in enumerate(f.names):
        t = f"{30 + i}m"
        f.pulse("restarts", t, 1, width="5m", replicas=[name])
        gap(f, name, t, f"{31 + i}m")
        f.relabel("build_info", t, {"quantization": "awq-int4", "engine_version": "0.11.3"}, replicas=[name])
        f.step("tpot_p99_seconds", f"{31 + i}m", factor=0.85, replicas=[name])
    f.write(out(f), "quality_down", at="80m", expect={"cause": "version_change", **FORBID})


@incident
def fallback_active_no_cost() -> None:
    f = fleet(
        "fallback-active-8-no-cost-series",
        "A flapping health check makes the gateway send ~8% of requests "
        "to the small fallback model; users see worse answers. No billing series in this environment.",
        replicas=8,
        seed=224,
        omit=("cost_per_1k_tokens",),
        noise=1.3,
    )
    at = "40m"
    f.step("fallback_ratio", at, to=0.08, ramp="2m")
    f.step("timeout_ratio", at, to=0.01, ramp="2m")
    f.step("request_rate", at, factor=0.93, ramp="2m")
    f.write(out(f), "quality_down", at="65m", expect={"cause": "fallback_active", **FORBID})


# --- the edge: gateway, router, probes ----------------------------------------------------
def edge(f: Fleet, inflight: bool = True, probes: bool = True) -> None:
    """The gateway's healthy view of the fleet: it routes to every ready replica, adds a little
    latency to the engines', holds almost nothing, and counts what the engines hold as in flight;
    upstream errors per backend, and (with kube signals) each replica's probes and last termination.
    Call before shaping, so the incident moves these series like any other."""
    first = [f.series[k][0] for k in f.keys("requests_running") + f.keys("queue_waiting")]
    held = float(np.nansum(np.where(np.isfinite(first), first, np.nan)))
    f.add_fleet("gateway_latency_p99_seconds", EDGE_HEALTHY["gateway_latency_p99_seconds"][0])
    f.add_fleet("gateway_queue", EDGE_HEALTHY["gateway_queue"][0])
    if inflight:
        f.add_fleet("gateway_inflight", held)
    if f.kube_signals:
        f.series[_key("backends_routed", {})] = f.series[_key("replicas_ready", {})].copy()
    else:
        f.add_fleet("backends_routed", float(f.replicas))
    for name in f.names:
        add(f, "upstream_error_ratio", {"instance": name}, EDGE_HEALTHY["upstream_error_ratio"][0])
        if probes and f.kube_signals:
            for signal in ("probe_failures", "terminated_error", "exit_code"):
                add(f, signal, {"instance": name}, 0.0)


def end_at(f: Fleet, signal: str, labels: dict[str, str], at: str) -> None:
    """One series ends at `at` (written as stale) while the replica's others go on."""
    arr = f.series[_key(signal, labels)]
    i = f.idx(at)
    arr[i:] = np.nan
    arr[i] = -math.inf


@incident
def gateway_bottleneck_single_router() -> None:
    f = fleet(
        "gateway-bottleneck-single-router-stalls-streams-12",
        "The router in front of a 12-replica fleet runs as one pod. From 45m a streaming-heavy client "
        "mix pins its event loop: about 1,270 streams wait in the router's queue, its P99 reaches the "
        "30 s client timeout and ~14% of requests time out (about 8,300 in the window). The engines "
        "behind it go nearly idle: engine queue a few requests fleet-wide, KV 2-5%, no preemption, "
        "engine TTFT at baseline. The router exports no in-flight gauge.",
        replicas=12,
        seed=227,
        noise=1.2,
    )
    edge(f, inflight=False)
    f.add_fleet("request_rate", 12 * 4.0)  # arrivals, as the router counts them
    f.add_fleet("timeout_ratio", 0.001)
    at = "45m"
    f.step("gateway_queue", at, to=1270, ramp="6m")
    f.step("gateway_latency_p99_seconds", at, to=30.0, ramp="4m")
    step_key(f, "timeout_ratio", {}, "46m", 140, ramp="4m")
    for sig in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(sig, at, factor=0.3, ramp="4m", replicas=f.names)
    f.step("requests_running", at, to=2.5, ramp="4m")
    f.step("kv_usage_ratio", at, to=0.035, ramp="4m")
    f.step("queue_waiting", at, to=0.2, ramp="3m")
    f.step("queue_time_p99_seconds", at, factor=0.6, ramp="4m")
    f.step("ttft_p99_seconds", at, factor=0.85, ramp="4m")
    f.step("ttft_p50_seconds", at, factor=0.9, ramp="4m")
    f.step("gpu_util_ratio", at, to=0.12, ramp="4m")
    f.step("gpu_power_watts", at, to=250, ramp="4m")
    f.write(out(f), "errors", at="70m", expect={"cause": "gateway_bottleneck", **FORBID})


@incident
def stale_backend_deleted_pod() -> None:
    f = fleet(
        "stale-backend-deleted-pod-routed-for-hours-8",
        "The cluster autoscaler removed a node at 40m; its pod vllm-5 was deleted and rescheduled as "
        "vllm-8 (ready 43m). The router added vllm-8 but never dropped vllm-5's address: it routes to "
        "9 backends with 8 ready. One request in nine goes to the dead address and fails at the 5 s "
        "connect timeout (upstream errors ~100% on vllm-5 only, 11% 502/504s at the gateway, its P99 "
        "5 s) for hours. The eight engines that report are healthy and a little lighter.",
        replicas=9,
        duration="200m",
        interval="30s",
        seed=228,
        noise=1.1,
    )
    f.set("replicas_ready", "0m", 8)
    f.set("replicas_desired", "0m", 8)
    f.set("replicas_ready", "40m", 7, until="43m")
    vanish(f, "vllm-5", "40m")
    appear(f, "vllm-8", "43m")
    edge(f)
    f.set("backends_routed", "0m", 8)
    f.set("backends_routed", "43m", 9)
    for sig in ("upstream_error_ratio", "probe_failures", "terminated_error", "exit_code"):
        f.series[_key(sig, {"instance": "vllm-8"})][: f.idx("43m")] = np.nan
    for sig in ("probe_failures", "terminated_error", "exit_code"):
        end_at(f, sig, {"instance": "vllm-5"}, "40m")
    f.set("upstream_error_ratio", "40m", 0.985, replicas=["vllm-5"])
    f.add_fleet("error_ratio", 0.002)
    err = f.series[_key("error_ratio", {})]
    err[f.idx("40m") : f.idx("43m")] = 0.125
    err[f.idx("43m") :] = 0.111
    f.set("gateway_latency_p99_seconds", "40m", 5.2)
    live = [n for n in f.names if n != "vllm-5"]
    for sig in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(sig, "43m", factor=8 / 9, replicas=live)
    f.write(
        out(f),
        None,
        at="190m",
        alert=alert("LLMGatewayErrorRateHigh", team="platform"),
        expect={"cause": "stale_backend", **FORBID},
    )


@incident
def replica_down_router_follows() -> None:
    f = fleet(
        "replica-down-node-lost-router-follows-10",
        "A node failed at 45m taking vllm-2, vllm-3 and vllm-7 with it; their pods stay Pending. The "
        "router drops the three within a minute (brief upstream errors on them, then 7 backends), so "
        "the 7 survivors take 1.4x load: queues, KV and TTFT rise on them. The gateway's latency "
        "follows the engines'; its own queue barely moves.",
        replicas=10,
        seed=229,
        noise=1.2,
    )
    edge(f)
    dead = f.who(2, 3, 7)
    surv = [n for n in f.names if n not in dead]
    at = "45m"
    f.set("replicas_ready", "45m30s", 7)
    f.set("backends_routed", "46m", 7)
    for n in dead:
        vanish(f, n, at)
        end_at(f, "upstream_error_ratio", {"instance": n}, "46m")
        f.series[_key("upstream_error_ratio", {"instance": n})][f.idx(at) : f.idx("46m")] = 0.9
    f.add_fleet("error_ratio", 0.002)
    f.series[_key("error_ratio", {})][f.idx(at) : f.idx("46m")] = 0.28
    for sig in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(sig, at, factor=10 / 7, replicas=surv)
    f.step("queue_waiting", at, to=9, replicas=surv, ramp="4m")
    f.step("queue_time_p99_seconds", at, factor=6, replicas=surv, ramp="4m")
    f.step("ttft_p99_seconds", at, factor=2.6, replicas=surv, ramp="4m")
    f.step("ttft_p50_seconds", at, factor=1.7, replicas=surv, ramp="4m")
    f.step("requests_running", at, factor=1.35, replicas=surv, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.86, replicas=surv, ramp="4m")
    f.step("preemption_rate", "48m", to=0.1, replicas=surv, ramp="2m")
    f.step("tpot_p99_seconds", at, factor=1.15, replicas=surv, ramp="4m")
    f.step("gpu_util_ratio", at, to=0.9, replicas=surv, ramp="3m")
    f.step("gateway_latency_p99_seconds", at, factor=2.5, ramp="4m")
    f.step("gateway_queue", at, to=4, ramp="4m")
    f.step("gateway_inflight", at, factor=7 * (22 * 1.35 + 9) / (10 * 22.8), ramp="4m")
    f.write(out(f), "ttft_slow", at="62m", expect={"cause": "replica_down", **FORBID})


@incident
def rate_limit_double_count() -> None:
    f = fleet(
        "rate-limit-counts-twice-429-at-half-quota-20",
        "A gateway release at 40m registered its per-tenant limiter in two hooks, so every request is "
        "counted twice: tenants above half their quota get 429s (28% of requests) at the demand the "
        "gateway admitted all morning. Engines lighter than before: queue, KV and TTFT at or below "
        "baseline. No GPU metrics; the gateway exports no in-flight gauge.",
        replicas=20,
        seed=230,
        gpu_signals=False,
        noise=1.3,
    )
    edge(f, inflight=False)
    f.add_fleet("request_rate", 20 * 4.0)  # arrivals at the gateway, 429s included
    at = "40m"
    step_key(f, "rejected_ratio", {}, at, 280, ramp="1m")
    step_key(f, "request_rate", {}, "41m", 1.06, ramp="3m")  # clients retry some 429s
    for sig in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(sig, at, factor=0.72, ramp="1m", replicas=f.names)
    f.step("requests_running", at, factor=0.75, ramp="2m")
    f.step("kv_usage_ratio", at, to=0.41, ramp="3m")
    f.step("queue_waiting", at, to=0.5, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=0.93, ramp="2m")
    f.write(out(f), "rejected", at="65m", expect={"cause": "rate_limit_misconfigured", **FORBID})


@incident
def traffic_burst_gateway_queue_429() -> None:
    f = fleet(
        "traffic-burst-load-test-gateway-queue-429-16",
        "A tenant pointed a load test at production at 50m: arrivals 2.3x within two minutes. Engine "
        "queues grow at once on all 16 replicas, KV 0.96 with preemptions, TTFT 4x; the gateway's "
        "flow-control queue fills and from 52m it returns 429s (12%).",
        replicas=16,
        seed=231,
        noise=1.2,
    )
    edge(f)
    for t in ("search", "assist", "loadtest-team"):
        add(f, "prompt_tokens_rate", {"tenant": t}, 16 * 4800 / 3)
    f.add_fleet("request_rate", 16 * 4.0)
    at = "50m"
    step_key(f, "prompt_tokens_rate", {"tenant": "loadtest-team"}, at, 4.9, ramp="2m")
    step_key(f, "request_rate", {}, at, 2.3, ramp="2m")
    for sig in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(sig, at, factor=2.0, ramp="2m", replicas=f.names)
    f.step("requests_running", at, factor=1.7, ramp="2m")
    f.step("queue_waiting", at, to=20, ramp="2m")
    f.step("queue_time_p99_seconds", at, factor=15, ramp="2m")
    f.step("kv_usage_ratio", at, to=0.96, ramp="3m")
    f.step("preemption_rate", "52m", to=0.6, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=4.0, ramp="2m")
    f.step("ttft_p50_seconds", at, factor=2.5, ramp="2m")
    f.step("tpot_p99_seconds", at, factor=1.4, ramp="3m")
    f.step("gpu_util_ratio", at, to=0.95, ramp="2m")
    f.step("gateway_queue", "51m", to=300, ramp="2m")
    f.step("gateway_latency_p99_seconds", at, factor=5.0, ramp="2m")
    f.step("gateway_inflight", at, factor=16 * (22 * 1.7 + 20) / (16 * 22.8), ramp="2m")
    step_key(f, "rejected_ratio", {}, "52m", 120, ramp="2m")
    f.write(out(f), "rejected", at="68m", expect={"cause": "traffic_burst", **FORBID})


# --- no incident ------------------------------------------------------------------------
@incident
def no_incident_noisy() -> None:
    f = fleet(
        "no-incident-noisy-20",
        "An ordinary hour at 1.5x noise with scrape gaps and two single-sample "
        "blips; a flapping TTFT warning fired. Nothing departs from baseline.",
        replicas=20,
        seed=225,
        noise=1.5,
        gaps=4,
    )
    f.set("ttft_p99_seconds", "41m", 1.3, replicas=["vllm-4"], until="41m15s")
    f.set("queue_waiting", "63m", 6, replicas=["vllm-15"], until="63m15s")
    f.write(out(f), None, alert=alert("TTFTP99High", severity="warning"), expect={"cause": "none", **FORBID})


@incident
def no_incident_daily_ramp() -> None:
    f = fleet(
        "no-incident-daily-ramp-15pct-30",
        "The morning ramp: +15% requests and tokens over 80 minutes on "
        "30 replicas; batch and KV follow mildly, latency within noise. Not an incident.",
        replicas=30,
        duration="120m",
        seed=226,
        noise=1.2,
    )
    for sig in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.ramp(sig, "20m", "100m", 1.15)
    f.ramp("requests_running", "20m", "100m", 1.12)
    f.ramp("kv_usage_ratio", "20m", "100m", 1.1)
    f.ramp("gpu_util_ratio", "20m", "100m", 1.1)
    f.ramp("ttft_p99_seconds", "20m", "100m", 1.05)
    f.write(
        out(f),
        None,
        at="110m",
        alert=alert("LLMRequestRateChange", severity="info"),
        expect={"cause": "none", **FORBID},
    )


def main(argv: list[str]) -> int:
    global OUT
    parser = argparse.ArgumentParser(description="Write the generality corpus.")
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder to write into (default {OUT})")
    parser.add_argument("names", nargs="*", help="incident function names (default: all)")
    args = parser.parse_args(argv)
    OUT = args.out
    OUT.mkdir(parents=True, exist_ok=True)
    for fn in INCIDENTS:
        if args.names and fn.__name__ not in args.names:
            continue
        fn()
    print(f"wrote {len(list(OUT.glob('*.yaml')))} fixtures to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
