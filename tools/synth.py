"""Synthesise realistic incident fixtures: a healthy fleet, then what goes wrong.

Used by `tools/make_fixtures.py` (the bundled fixtures) and `bench/` (the 64-replica
benchmark fixture). A `Fleet` starts from typical values of a vLLM fleet serving an 8B
model on H100s, every series with its own noise; an incident then moves some series
(`step`, `ramp`, `spike`), silences a replica, or changes an info series' labels.
Output is a fixture in the format of VOCABULARY.md: per-series values in promtool
notation, runs compressed, gaps as `_`, a vanished replica ending in `stale`.
Seeded: the same spec always writes the same file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from signals.notation import compress
from signals.timeparse import parse_duration

Array = np.ndarray

# Typical per-replica values of a healthy fleet, and the relative noise of each.
HEALTHY: dict[str, tuple[float, float]] = {
    "ttft_p99_seconds": (0.45, 0.08),
    "ttft_p50_seconds": (0.14, 0.06),
    "tpot_p99_seconds": (0.032, 0.06),
    "tpot_p50_seconds": (0.021, 0.04),
    "e2e_p99_seconds": (9.0, 0.07),
    "request_rate": (4.0, 0.06),
    "error_ratio": (0.002, 0.35),
    "timeout_ratio": (0.001, 0.4),
    "truncated_ratio": (0.012, 0.2),
    "prompt_tokens_p95": (1800.0, 0.05),
    "output_tokens_p95": (420.0, 0.05),
    "long_prompt_ratio": (0.03, 0.15),
    "queue_waiting": (0.8, 0.6),
    "requests_running": (22.0, 0.1),
    "queue_time_p99_seconds": (0.12, 0.15),
    "prefill_time_p99_seconds": (0.26, 0.08),
    "prefix_hit_ratio": (0.62, 0.04),
    "prompt_tokens_rate": (4800.0, 0.06),
    "generation_tokens_rate": (1250.0, 0.06),
    "kv_usage_ratio": (0.52, 0.06),
    "preemption_rate": (0.0, 0.0),
}
GPU_HEALTHY: dict[str, tuple[float, float]] = {
    "gpu_memory_used_ratio": (0.91, 0.005),
    "gpu_util_ratio": (0.72, 0.06),
    "gpu_temp_celsius": (66.0, 0.03),
    "gpu_power_watts": (520.0, 0.05),
    "gpu_throttle": (0.0, 0.0),
    "gpu_xid": (0.0, 0.0),
    "gpu_ecc_errors": (0.0, 0.0),
}
FLEET_HEALTHY: dict[str, tuple[float, float]] = {
    "rejected_ratio": (0.001, 0.4),
    "fallback_ratio": (0.002, 0.4),
    "cost_per_1k_tokens": (0.0021, 0.01),
}
# The edge in front of the fleet (a gateway or router), added by `Fleet.add_edge`: fleet-level
# except upstream errors (per backend) and the kubelet's and kube-state-metrics' per-pod series.
EDGE_HEALTHY: dict[str, tuple[float, float]] = {
    "gateway_latency_p99_seconds": (0.62, 0.08),
    "gateway_queue": (0.5, 0.0),
}
EDGE_REPLICA: dict[str, tuple[float, float]] = {
    "upstream_error_ratio": (0.001, 0.4),
    "probe_failures": (0.0, 0.0),
    "terminated_error": (0.0, 0.0),
    "exit_code": (0.0, 0.0),
}
RATIOS = {
    "upstream_error_ratio",
    "error_ratio",
    "timeout_ratio",
    "truncated_ratio",
    "long_prompt_ratio",
    "prefix_hit_ratio",
    "kv_usage_ratio",
    "gpu_memory_used_ratio",
    "gpu_util_ratio",
    "rejected_ratio",
    "fallback_ratio",
}
COUNTS = {"queue_waiting", "requests_running", "gateway_queue", "gateway_inflight", "queue_deferred"}
FLAGS = {
    "replicas_stalled",
    "gpu_throttle",
    "gpu_xid",
    "gpu_ecc_errors",
    "restarts",
    "oom_killed",
    "probe_failures",
    "terminated_error",
    "exit_code",
}

BUILD = {
    "model": "llama-3.1-8b-instruct",
    "model_version": "2026-09",
    "engine": "vllm",
    "engine_version": "0.11.0",
    "quantization": "fp8",
    "route": "primary",
}
CONFIG = {
    "gpu_memory_utilization": "0.90",
    "max_num_seqs": "128",
    "max_num_batched_tokens": "8192",
    "chunked_prefill": "true",
    "prefix_caching": "true",
}


def _key(signal: str, labels: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return signal, tuple(sorted(labels.items()))


@dataclass
class Fleet:
    """A fleet's series over an incident; mutate with the helpers, then `write`."""

    name: str
    description: str
    replicas: int = 6
    duration: str = "90m"
    interval: str = "15s"
    start: str = "2026-10-14T13:00:00Z"
    seed: int = 1
    prefix: str = "vllm"
    gpu_signals: bool = True
    fleet_signals: bool = True
    kube_signals: bool = True
    info_signals: bool = True
    omit: tuple[str, ...] = ()
    gaps: int = 2
    series: dict[tuple[str, tuple[tuple[str, str], ...]], Array] = field(default_factory=dict)
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.step_s = parse_duration(self.interval)
        self.n = int(parse_duration(self.duration) / self.step_s) + 1
        self.names = [f"{self.prefix}-{i}" for i in range(self.replicas)]
        for name in self.names:
            for signal, (base, _noise) in HEALTHY.items():
                self.series[_key(signal, {"instance": name})] = np.full(self.n, base * self._jitter(0.05))
            if self.gpu_signals:
                for signal, (base, _) in GPU_HEALTHY.items():
                    self.series[_key(signal, {"instance": name, "gpu": "0"})] = np.full(
                        self.n, base * (self._jitter(0.02) if base else 1.0)
                    )
            if self.kube_signals:
                self.series[_key("restarts", {"instance": name})] = np.zeros(self.n)
                self.series[_key("oom_killed", {"instance": name})] = np.zeros(self.n)
            if self.info_signals:
                self.series[_key("build_info", {"instance": name, **BUILD})] = np.ones(self.n)
                self.series[_key("config_info", {"instance": name, **CONFIG})] = np.ones(self.n)
        if self.fleet_signals:
            for signal, (base, _) in FLEET_HEALTHY.items():
                self.series[_key(signal, {})] = np.full(self.n, base)
        if self.kube_signals:
            self.series[_key("replicas_ready", {})] = np.full(self.n, float(self.replicas))
            self.series[_key("replicas_desired", {})] = np.full(self.n, float(self.replicas))

    def add_edge(self, inflight: bool = True) -> None:
        """A gateway or router in front of the replicas: its latency, queue, backends routed and
        (optionally) its own in-flight count, per-backend upstream errors, and the kubelet's
        probe and kube-state-metrics' termination series per pod."""
        for signal, (base, _) in EDGE_HEALTHY.items():
            self.series[_key(signal, {})] = np.full(self.n, base)
        self.series[_key("backends_routed", {})] = np.full(self.n, float(self.replicas))
        if inflight:
            held = HEALTHY["requests_running"][0] + HEALTHY["queue_waiting"][0]
            self.series[_key("gateway_inflight", {})] = np.full(self.n, held * self.replicas)
        for name in self.names:
            for signal, (base, _) in EDGE_REPLICA.items():
                self.series[_key(signal, {"instance": name})] = np.full(
                    self.n, base * (self._jitter(0.05) if base else 1.0)
                )

    def _jitter(self, spread: float) -> float:
        return float(1.0 + self.rng.normal(0, spread))

    # --- time --------------------------------------------------------------------------
    def idx(self, offset: str | float) -> int:
        """Step index of an offset such as '40m'."""
        seconds = parse_duration(offset) if isinstance(offset, str) else float(offset)
        return max(0, min(self.n - 1, round(seconds / self.step_s)))

    # --- selection ---------------------------------------------------------------------
    def keys(
        self, signal: str, replicas: Iterable[str] | None = None
    ) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
        wanted = set(replicas) if replicas is not None else None
        out = []
        for key in self.series:
            if key[0] != signal:
                continue
            labels = dict(key[1])
            if wanted is not None and labels.get("instance") not in wanted:
                continue
            out.append(key)
        return sorted(out)

    def who(self, *indices: int) -> list[str]:
        return [self.names[i] for i in indices]

    # --- shaping -----------------------------------------------------------------------
    def shape(
        self, signal: str, at: str, fn: Callable[[Array, int], None], replicas: Iterable[str] | None = None
    ) -> None:
        for key in self.keys(signal, replicas):
            fn(self.series[key], self.idx(at))

    def step(
        self,
        signal: str,
        at: str,
        factor: float | None = None,
        to: float | None = None,
        replicas: Iterable[str] | None = None,
        ramp: str = "1m",
    ) -> None:
        """From `at`, move to `to` (or multiply by `factor`) over `ramp`."""
        width = max(1, self.idx(ramp))

        def apply(series: Array, i: int) -> None:
            start = series[i - 1] if i > 0 else series[i]
            target = to if to is not None else series[i:] * (factor if factor is not None else 1.0)
            weights = np.clip((np.arange(self.n - i) + 1) / width, 0, 1)
            series[i:] = (
                start + (target - start) * weights
                if to is not None
                else series[i:] + (target - series[i:]) * weights
            )

        self.shape(signal, at, apply, replicas)

    def ramp(
        self, signal: str, start: str, end: str, factor: float, replicas: Iterable[str] | None = None
    ) -> None:
        """Grow steadily from `start` to `end` by `factor`, and stay there."""
        i0, i1 = self.idx(start), self.idx(end)
        for key in self.keys(signal, replicas):
            series = self.series[key]
            weights = np.clip((np.arange(self.n) - i0) / max(1, i1 - i0), 0, 1)
            series[:] = series * (1 + (factor - 1) * weights)

    def set(
        self,
        signal: str,
        at: str,
        value: float,
        replicas: Iterable[str] | None = None,
        until: str | None = None,
    ) -> None:
        """Hold `value` from `at` (to `until`, else the end)."""
        i0 = self.idx(at)
        i1 = self.idx(until) if until else self.n
        for key in self.keys(signal, replicas):
            self.series[key][i0:i1] = value

    def pulse(
        self, signal: str, at: str, value: float, width: str = "5m", replicas: Iterable[str] | None = None
    ) -> None:
        """A windowed count such as restarts: `value` for `width` from `at`, zero after."""
        self.set(signal, at, value, replicas, until=_add(at, width))

    def restart(self, replica: str, at: str, down: str, width: str = "5m") -> None:
        """The replica's container restarts at `at`: one restart counted for `width`, and its
        engine series silent for `down` while the model loads again."""
        self.pulse("restarts", at, 1, width=width, replicas=[replica])
        for signal in ("request_rate", "requests_running", "queue_waiting", "ttft_p99_seconds"):
            self.set(signal, at, np.nan, replicas=[replica], until=_add(at, down))

    def vanish(self, replica: str, at: str) -> None:
        """The replica stops reporting at `at` (its series end with stale markers)."""
        i = self.idx(at)
        for key in list(self.series):
            if dict(key[1]).get("instance") == replica:
                self.series[key][i:] = np.nan
                self.series[key][i] = -math.inf  # marker: written as stale

    def relabel(
        self, signal: str, at: str, changes: dict[str, str], replicas: Iterable[str] | None = None
    ) -> None:
        """An info series changes labels at `at`: the old series ends, a new one begins."""
        i = self.idx(at)
        for key in self.keys(signal, replicas):
            old = self.series[key]
            labels = dict(key[1])
            labels.update(changes)
            new = np.full(self.n, np.nan)
            new[i:] = 1.0
            old[i:] = np.nan
            self.series[_key(signal, labels)] = new

    def drop(self, signal: str, replicas: Iterable[str] | None = None) -> None:
        for key in self.keys(signal, replicas):
            del self.series[key]

    def add_fleet(self, signal: str, base: float) -> None:
        self.series[_key(signal, {})] = np.full(self.n, base)

    # --- output ------------------------------------------------------------------------
    def _noisy(self, signal: str, values: Array) -> Array:
        spec = (
            HEALTHY.get(signal)
            or GPU_HEALTHY.get(signal)
            or FLEET_HEALTHY.get(signal)
            or EDGE_HEALTHY.get(signal)
            or EDGE_REPLICA.get(signal)
        )
        rel = spec[1] if spec else 0.03
        out = values.copy()
        finite = np.isfinite(out)
        if signal in FLAGS or signal in (
            "build_info",
            "config_info",
            "replicas_ready",
            "replicas_desired",
            "backends_routed",
        ):
            return out
        if signal in COUNTS:
            noisy = self.rng.poisson(np.clip(out[finite], 0, None)).astype(float)
            out[finite] = noisy
            return out
        if signal == "preemption_rate":
            out[finite] = np.clip(out[finite] * (1 + self.rng.normal(0, 0.15, finite.sum())), 0, None)
            return out
        out[finite] = out[finite] * (1 + self.rng.normal(0, rel, finite.sum()))
        if signal in RATIOS:
            out[finite] = np.clip(out[finite], 0, 1)
        else:
            out[finite] = np.clip(out[finite], 0, None)
        return out

    def document(
        self,
        symptom: str | None,
        at: str | None,
        expect: dict[str, Any] | None,
        alert: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        items = []
        for signal, labels in sorted(self.series):
            if signal in self.omit:
                continue
            values = self._noisy(signal, self.series[(signal, labels)])
            stale_at = np.flatnonzero(np.isneginf(self.series[(signal, labels)]))
            if self.gaps and signal not in ("build_info", "config_info"):
                for _ in range(int(self.rng.integers(0, self.gaps + 1))):
                    i = int(self.rng.integers(1, self.n - 1))
                    if np.isfinite(values[i]):
                        values[i] = np.nan
            text = compress(values, precision=4)
            if stale_at.size:
                cut = int(stale_at[0])
                head = compress(values[:cut], precision=4)
                text = (head + " " if head else "") + "stale"
            if not np.isfinite(values).any():
                continue  # a series with no sample at all is not written
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            items.append({"series": f"{signal}{{{label_text}}}" if labels else signal, "values": text})
        head = {
            "name": self.name,
            "description": self.description,
            "interval": self.interval,
            "start": self.start,
        }
        return fixture_document(head, items, symptom, at, expect, alert)

    def write(
        self,
        path: str,
        symptom: str | None,
        at: str | None = None,
        expect: dict[str, Any] | None = None,
        alert: dict[str, Any] | None = None,
        header: str = "",
    ) -> None:
        write_document(path, self.document(symptom, at, expect, alert), header)


def fixture_document(
    head: dict[str, Any],
    items: list[dict[str, str]],
    symptom: str | None,
    at: str | None,
    expect: dict[str, Any] | None,
    alert: dict[str, Any] | None,
) -> dict[str, Any]:
    """A fixture in the key order of VOCABULARY.md: metadata, at, symptom, alert, series, expect."""
    doc = dict(head)
    for key, value in (("at", at), ("symptom", symptom), ("alert", alert)):
        if value is not None:
            doc[key] = value
    doc["input_series"] = items
    if expect is not None:
        doc["expect"] = expect
    return doc


def write_document(path: str, doc: dict[str, Any], header: str = "") -> None:
    """Write a fixture as YAML, values on one line each, with an optional comment header."""
    text = yaml.safe_dump(doc, sort_keys=False, width=100000, allow_unicode=True)
    with open(path, "w", encoding="utf-8") as handle:
        if header:
            handle.write("".join(f"# {line}\n" for line in header.strip().splitlines()))
        handle.write(text)


def _add(offset: str, width: str) -> str:
    return f"{int(parse_duration(offset) + parse_duration(width))}s"
