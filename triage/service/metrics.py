"""The service's own metrics, in the Prometheus text format (version 0.0.4).

Counters live in memory (a restart resets them, which `rate()` handles); the backlog,
outbox and dead-letter figures are read from the store at scrape time, so they are
true after a restart too. Written by hand rather than with a client library: a dozen
series do not justify another dependency, and the format is small and stable.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Mapping

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_HELP: dict[str, tuple[str, str]] = {
    "triage_webhook_requests_total": ("counter", "Webhook requests by outcome (accepted, rejected reason)."),
    "triage_webhook_alerts_received_total": ("counter", "Alerts received in accepted notifications."),
    "triage_webhook_alerts_new_total": ("counter", "Alert episodes seen for the first time."),
    "triage_webhook_duplicates_total": ("counter", "Alerts already known (repeats, HA peers, retries)."),
    "triage_webhook_resolved_total": ("counter", "Alert episodes closed by a resolved notification."),
    "triage_heartbeats_total": ("counter", "Heartbeat (dead man's switch) alerts received."),
    "triage_annotated_total": ("counter", "Alerts that received their diagnosis."),
    "triage_signal_fetches_total": (
        "counter",
        "Signal fetch rounds against Prometheus (one per group and moment).",
    ),
    "triage_signals_unavailable_total": (
        "counter",
        "Diagnoses stored with signals unavailable (retried later), by reason.",
    ),
    "triage_diagnosis_seconds": (
        "histogram",
        "Time to fetch the signals and diagnose one group at one moment.",
    ),
    "triage_sink_deliveries_total": ("counter", "Sink deliveries by sink and outcome."),
    "triage_sink_failures_total": ("counter", "Failed sink delivery attempts by sink and reason."),
    "triage_sink_shortened_total": (
        "counter",
        "Messages a sink refused as too large, delivered shortened (with a note saying so).",
    ),
    "triage_template_errors_total": (
        "counter",
        "Sink template errors (the bundled template was used instead).",
    ),
    "triage_backlog": ("gauge", "Work not yet done: diagnosis jobs pending or running."),
    "triage_annotations_pending": ("gauge", "Alerts waiting for their first diagnosis."),
    "triage_annotations_unavailable": (
        "gauge",
        "Alerts whose signals were unavailable, waiting for a retry.",
    ),
    "triage_annotations": ("gauge", "Alert episodes in the store."),
    "triage_alert_groups": ("gauge", "Alert groups in the store."),
    "triage_outbox_pending": ("gauge", "Sink messages waiting for delivery."),
    "triage_dead_letters": ("gauge", "Sink messages given up after the maximum number of tries."),
    "triage_heartbeat_last_seen_timestamp_seconds": (
        "gauge",
        "When the heartbeat alert last arrived (0: never).",
    ),
    "triage_heartbeat_stale": (
        "gauge",
        "1 when the heartbeat is older than heartbeat_max_age: the alerting pipeline is broken.",
    ),
    "triage_ready": ("gauge", "1 when the playbooks are loaded (/readyz also checks the store)."),
    "triage_store_up": ("gauge", "1 when the store answered this scrape; 0 while it cannot be reached."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Metrics:
    """Thread-safe counters and one latency histogram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
        self._buckets = [0] * len(LATENCY_BUCKETS)
        self._count = 0
        self._sum = 0.0

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._counters[name]
            series[key] = series.get(key, 0.0) + amount

    def value(self, name: str, **labels: str) -> float:
        key = tuple(sorted(labels.items()))
        with self._lock:
            return self._counters.get(name, {}).get(key, 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every series of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        with self._lock:
            return sum(v for k, v in self._counters.get(name, {}).items() if wanted <= set(k))

    def observe_latency(self, seconds: float) -> None:
        with self._lock:
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self._buckets[i] += 1
            self._count += 1
            self._sum += seconds

    def render(self, gauges: Mapping[str, float]) -> str:
        """The exposition: counters, the histogram, then the gauges given (name -> value)."""
        lines: list[str] = []
        with self._lock:
            counters = {k: dict(v) for k, v in self._counters.items()}
            buckets, count, total = list(self._buckets), self._count, self._sum
        for name, (kind, text) in _HELP.items():
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")
            if kind == "histogram":
                for bound, n in zip(LATENCY_BUCKETS, buckets, strict=True):
                    lines.append(f'{name}_bucket{{le="{bound}"}} {n}')
                lines.append(f'{name}_bucket{{le="+Inf"}} {count}')
                lines.append(f"{name}_sum {_number(total)}")
                lines.append(f"{name}_count {count}")
            elif kind == "counter":
                series = counters.get(name) or {(): 0.0}
                for labels, value in sorted(series.items()):
                    lines.append(f"{name}{_labels(labels)} {_number(value)}")
            elif name in gauges:
                lines.append(f"{name} {_number(gauges[name])}")
        return "\n".join(lines) + "\n"
