"""The running service: the store, the knowledge, the workers and the sinks, wired once.

One object the HTTP layer and the tests share. `start()` resumes whatever a previous
process left pending (work and deliveries live in the store), `stop()` drains: the
workers finish the diagnosis in hand, the sinks the delivery in hand, and everything
else stays pending in the store for the next start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from signals.catalog import QueryOptions, load_catalog, normalise_selector
from signals.errors import InputError, InputErrors
from signals.fleets.naming import reference_key
from signals.prometheus import PrometheusSource
from triage.core.graph import TriageGraph, build_graph
from triage.service.config import Loaded
from triage.service.messages import build_message
from triage.service.metrics import Metrics
from triage.service.payload import Notification
from triage.service.processes import ProcessRunner
from triage.service.sinks import Dispatcher, Renderer
from triage.service.store import IntakeResult, Store
from triage.service.store.backend import StoreOpenError
from triage.service.worker import (
    Diagnoser,
    DiagnoserSpec,
    FetchSettings,
    Runner,
    ThreadRunner,
    WorkerPool,
    symptom_chooser,
)
from triage.sources import load_playbooks

READY_PROBE_TIMEOUT = 2.0
PROMETHEUS_STATUS_TTL = 10.0


@dataclass(frozen=True)
class PrometheusStatus:
    reachable: bool
    checked_at: float


class Service:
    """Everything `triage serve` runs, built from a validated configuration."""

    def __init__(self, loaded: Loaded, graph: TriageGraph | None = None) -> None:
        config = loaded.config
        self.config = config
        self.secrets = loaded.secrets
        if config.prometheus.url is None:
            raise InputErrors([InputError("(config)", 0, "prometheus.url", "required (or --prometheus URL)")])
        try:
            selector = normalise_selector(config.prometheus.selector)
        except ValueError as exc:
            raise InputErrors([InputError("(config)", 0, "prometheus.selector", str(exc))]) from None
        if config.templates is not None and not Path(config.templates).is_dir():
            raise InputErrors([InputError("(config)", 0, "templates", f"{config.templates} is not a folder")])
        self.graph = graph or build_graph(
            load_playbooks(Path(config.playbooks) if config.playbooks else None)
        )
        catalog = load_catalog(list(config.prometheus.catalog))
        self.metrics = Metrics()
        self.renderer = Renderer(config.templates, self.metrics)
        sinks = {s.name: s for s in config.sinks}
        problems = self.renderer.check(sinks)
        if problems:
            raise InputErrors(
                [InputError("(config)", 0, p.split(": ", 1)[0], p.split(": ", 1)[1]) for p in problems]
            )
        try:
            self.store = Store(
                config.store,
                list(sinks),
                synchronous=config.store_sync,
                builder=partial(
                    build_message, public_url=config.public_url, label_limit=config.limits.max_label_chars
                ),
                timeout=config.store_timeout,
                lease=config.store_lease,
            )
        except StoreOpenError as exc:
            raise InputErrors([InputError("(config)", 0, "store", str(exc))]) from None
        self.choose = symptom_chooser(self.graph, config.alert_symptoms)
        spec = DiagnoserSpec(
            config.playbooks,
            tuple(config.prometheus.catalog),
            QueryOptions(replica_label=config.prometheus.replica_label, selector=selector),
            FetchSettings(
                config.prometheus.lookback,
                config.prometheus.step,
                config.prometheus.retry_unavailable,
                config.prometheus.max_concurrent_fetches,
            ),
            config.prometheus.url,
            config.prometheus.timeout,
            self.secrets.prometheus_token,
            config.prometheus.fleet_labels,
            config.prometheus.max_series,
        )
        self.runner: Runner
        if config.diagnosis_processes > 0:
            self.runner = ProcessRunner(spec, config.diagnosis_processes)
        else:
            diagnoser = Diagnoser(
                self.graph, catalog, spec.options, spec.fetch, fleet_labels=spec.fleet_labels
            )
            self.runner = ThreadRunner(diagnoser, self.source)
        self.dispatcher = Dispatcher(
            self.store, sinks, self.secrets.sink_urls, self.renderer, self.metrics, self.secrets.sink_tokens
        )
        self.pool = WorkerPool(
            self.store,
            self.runner,
            config.prometheus.retry_unavailable,
            self.metrics,
            config.workers,
            on_change=self.dispatcher.wake,
        )
        self.started_at = time.time()
        self._prom_lock = threading.Lock()
        self._prom_status: PrometheusStatus | None = None
        self._running = False

    def fleet_of(self, labels: Mapping[str, str]) -> str:
        """The fleet an alert names by its fleet labels (what its work row is shared by), else ''."""
        return reference_key(labels, self.config.prometheus.fleet_labels)

    def source(self, timeout: float | None = None) -> PrometheusSource:
        url = self.config.prometheus.url
        assert url is not None
        return PrometheusSource(
            url,
            timeout=timeout or self.config.prometheus.timeout,
            bearer_token=self.secrets.prometheus_token,
            max_series=self.config.prometheus.max_series,
        )

    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self.runner.warm()
        self.pool.start()
        self.dispatcher.start()

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.pool.stop()
        self.dispatcher.stop()

    def accept(self, note: Notification) -> IntakeResult:
        """Commit one notification to the store, then nudge the workers; called before the 2xx."""
        prom = self.config.prometheus
        result = self.store.intake(
            note,
            self.choose,
            prom.step,
            self.config.heartbeat_alertname,
            window=prom.coalesce,
            fleet_of=self.fleet_of,
        )
        m = self.metrics
        m.inc("triage_webhook_alerts_received_total", result.alerts)
        m.inc("triage_webhook_alerts_new_total", result.new)
        m.inc("triage_webhook_duplicates_total", result.duplicates)
        m.inc("triage_webhook_resolved_total", result.resolved)
        m.inc("triage_heartbeats_total", result.heartbeats)
        m.inc("triage_annotated_total", result.annotated)
        if result.new_work:
            self.pool.wake()
        if result.resolved or result.new:
            self.dispatcher.wake()
        return result

    def heartbeat_stale(self, now: float | None = None) -> bool | None:
        """Whether the heartbeat is overdue (None when no `heartbeat_max_age` is set).

        Never seen counts from the service's start, so a pipeline that never delivered
        the heartbeat is reported too, once `heartbeat_max_age` has passed.
        """
        max_age = self.config.heartbeat_max_age
        if max_age is None:
            return None
        now = time.time() if now is None else now
        last = self.store.heartbeat_last_seen()
        return now - (last if last is not None else self.started_at) > max_age

    def prometheus_reachable(self) -> bool:
        """Whether Prometheus answers `vector(1)`, checked at most every few seconds."""
        now = time.monotonic()
        with self._prom_lock:
            cached = self._prom_status
        if cached is not None and now - cached.checked_at < PROMETHEUS_STATUS_TTL:
            return cached.reachable
        with self.source(READY_PROBE_TIMEOUT) as source:
            reachable = source.ping()
        with self._prom_lock:
            self._prom_status = PrometheusStatus(reachable, now)
        return reachable
