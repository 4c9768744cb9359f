"""The view of a fleet every check shares, derived once from what was fetched.

Several checks need the same derived facts (config labels per replica, KV capacity,
request lengths, which alerts cover a signal); computing them here once keeps the checks
short and their answers consistent with each other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from signals.catalog import Catalog, QueryOptions
from signals.fleets.stacks import engine_specs
from signals.timeparse import format_duration
from triage.audit.checks.formatting import as_float
from triage.audit.histograms import bucket_quantile, buckets_of
from triage.audit.model import AuditSettings, Fetched, Sample
from triage.audit.queries import signal_metrics
from triage.audit.rules import RulesView

FloatArray = npt.NDArray[np.float64]


def finite_values(values: FloatArray) -> FloatArray:
    return np.asarray(values[np.isfinite(values)], dtype=np.float64)


class Facts:
    """What the checks share, derived once from `Fetched` (pure; a cache, not a source)."""

    def __init__(
        self, fetched: Fetched, catalog: Catalog, options: QueryOptions, settings: AuditSettings
    ) -> None:
        self.f = fetched
        self.catalog = catalog
        self.options = options
        self.s = settings
        self.names = fetched.metric_names
        self.frame = fetched.frame
        self.rules = RulesView.of(fetched.rules) if fetched.rules is not None else None
        self.configs = self._configs()
        self._signal_metrics: dict[str, frozenset[str]] = {}

    # -- availability
    def has_metric(self, *names: str) -> bool:
        return self.names is not None and any(n in self.names for n in names)

    def has_prefix(self, *prefixes: str) -> bool:
        return self.names is not None and any(n.startswith(prefixes) for n in self.names)

    def why_no_names(self) -> str:
        return f"metric names could not be read ({self.f.problems.get('metric_names', 'no reply')})"

    def why_no_rules(self) -> str:
        return f"the rules API could not be read ({self.f.problems.get('rules', 'no reply')})"

    def why_no_frame(self) -> str:
        return f"the fleet's signals could not be read ({self.f.problems.get('signals', 'no reply')})"

    def engine(self) -> str | None:
        """The engines the server shows, as on-call knows them (each stack's marker metric,
        signals/stacks.yaml); None when none is there."""
        if self.names is None:
            return None
        found = dict.fromkeys(spec.title for metric, spec in engine_specs().items() if metric in self.names)
        return " and ".join(found) or None

    def instant(self, key: str) -> list[Sample]:
        return list(self.f.instant.get(key, ()))

    def instant_problem(self, key: str) -> str | None:
        return self.f.problems.get(f"instant:{key}")

    def why_no_config(self) -> str:
        """Why the engines' configuration labels are missing: unread names, a failed query, or not exposed."""
        if self.names is None:
            return self.why_no_names()
        problem = self.instant_problem("cache_config")
        if problem is not None:
            return f"vllm:cache_config_info could not be read ({problem})"
        return "vllm:cache_config_info is not exposed"

    def frame_has(self, signal: str) -> bool:
        return self.frame is not None and self.frame.has(signal)

    def metrics_of(self, signal: str) -> frozenset[str]:
        if signal not in self._signal_metrics:
            self._signal_metrics[signal] = signal_metrics(self.catalog, signal)
        return self._signal_metrics[signal]

    # -- configuration per replica
    def _configs(self) -> dict[str, dict[str, str]]:
        """Config labels per replica: vllm:cache_config_info in full, then the frame's latest config_info.

        The instant query keeps every label (vLLM's set changes by version); the frame's
        config_info may add labels a user catalog publishes (max_num_seqs, chunked prefill).
        """
        label = self.options.replica_label
        out: dict[str, dict[str, str]] = {}
        for sample in self.instant("cache_config"):
            labels = {k: v for k, v in sample.labels.items() if k != "__name__"}
            replica = labels.get(label) or labels.get("instance") or "fleet"
            engine = labels.get("engine")
            key = replica if engine in (None, "0") else f"{replica} engine {engine}"
            out.setdefault(key, {}).update(labels)
        latest: dict[str, tuple[int, dict[str, str]]] = {}
        for row in self.frame.rows("config_info") if self.frame is not None else []:
            finite = np.flatnonzero(np.isfinite(row.values))
            if len(finite):
                replica = row.label_map.get("instance", "fleet")
                last = int(finite[-1])
                if replica not in latest or last >= latest[replica][0]:
                    latest[replica] = (last, row.label_map)
        for replica, (_, labels) in latest.items():
            current = out.setdefault(replica, {})
            for key, value in labels.items():
                current.setdefault(key, value)
        return out

    def config_values(self, *keys: str) -> dict[str, str]:
        """replica -> the first of `keys` its config carries."""
        out: dict[str, str] = {}
        for replica, labels in self.configs.items():
            for key in keys:
                if labels.get(key) not in (None, ""):
                    out[replica] = labels[key]
                    break
        return out

    def config_history(self, key: str) -> dict[str, list[str]]:
        """replica -> the values a config_info label took over the window, in order of appearance."""
        seen: dict[str, list[tuple[int, str]]] = {}
        for row in self.frame.rows("config_info") if self.frame is not None else []:
            labels = row.label_map
            finite = np.flatnonzero(np.isfinite(row.values))
            if key in labels and len(finite):
                seen.setdefault(labels.get("instance", "fleet"), []).append((int(finite[0]), labels[key]))
        return {replica: [value for _, value in sorted(values)] for replica, values in seen.items()}

    def kv_tokens(self) -> dict[str, float]:
        """KV capacity in tokens per replica (kv_cache_size_tokens, blocks x block_size, SGLang's pool)."""
        out: dict[str, float] = {}
        for replica, labels in self.configs.items():
            size = as_float(labels.get("kv_cache_size_tokens"))
            blocks, block = as_float(labels.get("num_gpu_blocks")), as_float(labels.get("block_size"))
            if size is not None and size > 0:
                out[replica] = size
            elif blocks is not None and block is not None and blocks > 0 and block > 0:
                out[replica] = blocks * block
        label = self.options.replica_label
        for sample in self.instant("sglang_max_tokens"):
            replica = sample.labels.get(label) or sample.labels.get("instance") or "fleet"
            if math.isfinite(sample.value) and sample.value > 0:
                out.setdefault(replica, sample.value)
        return out

    def max_model_len(self) -> dict[str, float]:
        out = {
            r: v
            for r, text in self.config_values("max_model_len").items()
            if (v := as_float(text)) is not None
        }
        label = self.options.replica_label
        for sample in self.instant("sglang_context_len"):
            replica = sample.labels.get(label) or sample.labels.get("instance") or "fleet"
            if math.isfinite(sample.value) and sample.value > 0:
                out.setdefault(replica, sample.value)
        return out

    # -- request lengths
    def lengths(self, key: str, signal: str) -> tuple[float | None, str]:
        """P95 length over the window from the histogram buckets, else the median of the frame's P95."""
        p95 = bucket_quantile(0.95, buckets_of(self.instant(key)))
        if p95 is not None:
            return p95, f"over the last {format_duration(self.f.lookback)}"
        if self.frame is not None and self.frame.has(signal):
            values = finite_values(self.frame.fleet(signal))
            if len(values):
                return float(np.median(values)), "median of the 5m P95 over the window"
        return None, ""

    # -- alerts
    def coverage(self, signals: Sequence[str]) -> tuple[list[str], list[str]]:
        """(live alerts, dead alerts) that read any of `signals` (raw metric or triage:* recorded name).

        An alert is dead when none of the metrics it reads for those signals exists here:
        it can never fire.
        """
        live: list[str] = []
        dead: list[str] = []
        if self.rules is None:
            return live, dead
        wanted: set[str] = set()
        for signal in signals:
            wanted |= self.metrics_of(signal)
        recorded = tuple(f"triage:{s}" for s in signals)
        for alert in self.rules.alerts:
            hits = {n for n in alert.names if n in wanted}
            records = {n for n in alert.names if _is_record_of(n, recorded)}
            if not hits and not records:
                continue
            name = alert.label
            if self.names is None:
                live.append(name)
                continue
            exists = any(n in self.names for n in hits) or any(
                n in self.names for n in records if n not in self.rules.recordings
            )
            (live if exists else dead).append(name)
        return live, dead


def _is_record_of(name: str, recorded: tuple[str, ...]) -> bool:
    return any(name == r or name == f"{r}:replica" for r in recorded)
