"""Background diagnosis: a pool of threads that take work from the store and fill annotations.

The HTTP intake never waits for Prometheus; it only records work. Each worker claims
one due item (a group at one moment), fetches the signals once through the bounded
`PrometheusSource` seam (its deadline is the per-diagnosis budget), walks the graph at
the alerts' start, and stores the result for every alert of the item in one
transaction. When Prometheus cannot answer at all, the annotations are stored with
the signals marked unavailable and the item is retried later with a growing delay,
until it can be diagnosed. Threads suit this: the time goes to HTTP waits and numpy.

Each worker thread has its own PrometheusSource, since a source's connection pool is
sized for one round at a time.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from signals.catalog import Catalog, QueryOptions
from signals.errors import SignalError
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource
from triage.graph import TriageGraph
from triage.model import AUTO
from triage.render import to_text
from triage.service.metrics import Metrics
from triage.service.store import Store, WorkItem, WorkResult
from triage.walk import diagnose, symptom_from_alert

_LOG = logging.getLogger("triage.service")

MAX_RETRY_DELAY = 600.0


def symptom_chooser(
    graph: TriageGraph, configured: Mapping[str, str]
) -> Callable[[Mapping[str, str]], tuple[str, str]]:
    """labels -> (symptom, source): the `symptom` label, the configured map, the playbooks, else auto."""
    kb = graph.knowledge

    def choose(labels: Mapping[str, str]) -> tuple[str, str]:
        label = labels.get("symptom")
        if label and label in kb.symptoms:
            return label, "alert label"
        name = labels.get("alertname", "")
        if name in configured:
            return configured[name], "configured map"
        found = symptom_from_alert({"alertname": name}, kb) if name else None
        if found:
            return found, "playbook alert_symptoms"
        return AUTO, "auto"

    return choose


@dataclass(frozen=True)
class FetchSettings:
    """How a worker reads signals: the window before the alert and the per-diagnosis budget."""

    lookback: float
    step: float
    retry_unavailable: float


SourceFactory = Callable[[], PrometheusSource]


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return re.sub(r"\s+", " ", line)[:300]


class Diagnoser:
    """Turns one work item into a WorkResult; no store access, so it can be tested alone."""

    def __init__(
        self, graph: TriageGraph, catalog: Catalog, options: QueryOptions, fetch: FetchSettings
    ) -> None:
        self.graph = graph
        self.catalog = catalog
        self.options = options
        self.fetch = fetch

    def run(self, item: WorkItem, source: PrometheusSource) -> WorkResult:
        try:
            frame, report = fetch_frame(
                source, self.catalog, self.options, item.at, self.fetch.lookback, self.fetch.step
            )
        except SignalError as exc:
            reason = _first_line(str(exc)) or type(exc).__name__
            return WorkResult(
                "unavailable",
                item.symptom,
                None,
                None,
                f"signals unavailable ({reason})",
                f"signals unavailable ({reason})",
                reason,
                1,
            )
        diagnosis = diagnose(self.graph, frame, item.symptom, frame.end, source=item.symptom_source)
        diagnosis = replace(diagnosis, signal_problems=tuple(sorted(report.problems().items())))
        top = diagnosis.top
        headline = (
            f"{diagnosis.symptom} -> {top.cause} ({top.layer}), score {top.score:.2f}"
            if top
            else f"{diagnosis.symptom} -> no cause departs from its baseline"
        )
        return WorkResult(
            signature=f"{diagnosis.symptom}:{top.cause if top else 'none'}",
            symptom=diagnosis.symptom,
            cause=top.cause if top else None,
            diagnosis=diagnosis.to_json(),
            summary=to_text(diagnosis),
            headline=headline,
            unavailable=None,
            fetches=1,
        )


class WorkerPool:
    """N threads draining the store's work queue; `wake()` after intake, `stop()` to drain."""

    def __init__(
        self,
        store: Store,
        diagnoser: Diagnoser,
        sources: SourceFactory,
        metrics: Metrics,
        workers: int,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.diagnoser = diagnoser
        self.sources = sources
        self.metrics = metrics
        self.workers = workers
        self.on_change = on_change
        self._wake = threading.Condition()
        self._pending_wakes = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for i in range(self.workers):
            thread = threading.Thread(target=self._loop, name=f"triage-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        with self._wake:
            self._pending_wakes += 1
            self._wake.notify_all()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the items in hand, take no new ones; what is left stays pending in the store."""
        self._stop.set()
        self.wake()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _sleep(self) -> None:
        due = self.store.next_due()
        delay = 5.0 if due is None else min(5.0, max(0.0, due - time.time()))
        with self._wake:
            if self._pending_wakes == 0 and not self._stop.is_set():
                self._wake.wait(delay)
            self._pending_wakes = 0

    def _loop(self) -> None:
        source = self.sources()
        try:
            while not self._stop.is_set():
                try:
                    item = self.store.claim()
                except Exception:  # the store is the one thing a worker cannot do without
                    _LOG.exception("cannot claim work from the store")
                    self._stop.wait(1.0)
                    continue
                if item is None:
                    self._sleep()
                    continue
                self._process(item, source)
        finally:
            source.close()

    def _process(self, item: WorkItem, source: PrometheusSource) -> None:
        started = time.monotonic()
        try:
            result = self.diagnoser.run(item, source)
        except Exception as exc:
            _LOG.exception("diagnosis of work %s failed", item.id)
            reason = f"internal error: {type(exc).__name__}"
            result = WorkResult(
                "unavailable", item.symptom, None, None, f"diagnosis failed ({reason})", reason, reason, 0
            )
        self.metrics.observe_latency(time.monotonic() - started)
        self.metrics.inc("triage_signal_fetches_total", result.fetches)
        retry_at = None
        if result.unavailable is not None:
            self.metrics.inc("triage_signals_unavailable_total")
            delay = self.diagnoser.fetch.retry_unavailable * 2 ** min(max(item.attempts - 1, 0), 6)
            retry_at = time.time() + min(delay, MAX_RETRY_DELAY)
        try:
            annotated = self.store.complete(item, result, retry_at)
        except Exception:
            _LOG.exception("cannot store the result of work %s; it will run again", item.id)
            try:
                self.store.release(item)
            except Exception:
                _LOG.exception("cannot release work %s", item.id)
            self._stop.wait(1.0)
            return
        self.metrics.inc("triage_annotated_total", annotated)
        self.on_change()
