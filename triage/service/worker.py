"""Background diagnosis: a pool of threads that take work from the store and fill annotations.

The HTTP intake never waits for Prometheus; it only records work. Each worker claims
one due item (a group at one moment), finds the fleet its alerts name
(`triage.service.scoping`), fetches that fleet's signals through the bounded
`PrometheusSource` seam (its deadline is the per-diagnosis budget; frames and fleets are
shared, see `triage.service.fetches`), walks the graph at the alerts' start, and stores
the result for every alert of the item in one transaction. When Prometheus cannot
answer at all, the annotations are stored with the signals marked unavailable and the
item is retried later with a growing delay, until it can be diagnosed. Threads suit
this: the time goes to HTTP waits and numpy.

The diagnosis itself runs in separate processes by default
(`triage.service.processes.ProcessRunner`), so parsing replies and walking the graph
never hold the GIL the intake needs; worker threads only claim work, wait for the
result and store it. `ThreadRunner` diagnoses
in the worker threads instead (one PrometheusSource per thread, since a source's
connection pool is sized for one round at a time).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from signals.catalog import Catalog, QueryOptions, load_catalog
from signals.errors import SignalError
from signals.fleets import DEFAULT_FLEET_LABELS
from signals.frame import SignalFrame
from signals.live import FetchReport, fetch_frame
from signals.prometheus import PrometheusSource
from signals.vocabulary import DEFAULT_MAX_SERIES
from triage.core.graph import TriageGraph, build_graph
from triage.core.model import AUTO
from triage.core.reads import replica_reads
from triage.core.render import to_text
from triage.core.walk import diagnose, symptom_from_alert
from triage.service.fetches import Breaker, Remembered, SharedFetches
from triage.service.messages import briefed
from triage.service.metrics import Metrics
from triage.service.scoping import FleetScoper
from triage.service.store import Store, WorkItem, WorkResult
from triage.sources import load_playbooks

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
    """How a worker reads signals: the window before the alert and the per-diagnosis budget.

    `max_concurrent` bounds the fetch rounds in flight over the whole service: each
    round sends up to 8 queries in parallel, so workers and diagnosis processes
    fetching at once would otherwise multiply the load on Prometheus in a storm.
    """

    lookback: float
    step: float
    retry_unavailable: float
    max_concurrent: int = 1
    span: float = 300.0
    """Moments within one `span` share a frame: it is fetched once, `span` longer than the
    lookback, up to the span's end (never past now), and each diagnosis reads it up to its
    own moment, as a replay does. A storm's groups about one fleet start within minutes
    of each other: one fetch then serves them all, where one per moment took minutes."""

    def frame_end(self, at: float, now: float) -> float:
        """The end of the frame serving moment `at`: its span's end, or now if sooner (never before `at`)."""
        span_end = math.ceil(at / self.span) * self.span if self.span > 0 else at
        return max(at, min(span_end, math.floor(now / self.step) * self.step))


SourceFactory = Callable[[], PrometheusSource]


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return re.sub(r"\s+", " ", line)[:300]


class Diagnoser:
    """Turns one work item into a WorkResult; no store access, so it can be tested alone.

    The item's alerts say which fleet it is about (`FleetScoper`); the frame is fetched
    for that fleet at the item's moment, or shared with every other item about the same
    fleet at the same moment.
    """

    def __init__(
        self,
        graph: TriageGraph,
        catalog: Catalog,
        options: QueryOptions,
        fetch: FetchSettings,
        rounds: AbstractContextManager[object] | None = None,
        fleet_labels: Sequence[str] = DEFAULT_FLEET_LABELS,
    ) -> None:
        self.graph = graph
        self.replica_reads = replica_reads(graph.knowledge)
        self.catalog = catalog
        self.options = options
        self.fetch = fetch
        breaker = Breaker()
        shared = rounds or threading.BoundedSemaphore(fetch.max_concurrent)
        self.frames: SharedFetches[tuple[str, float], tuple[SignalFrame, FetchReport]] = SharedFetches(
            breaker, shared
        )
        self.scoper = FleetScoper(
            options, fleet_labels, fetch.lookback + fetch.span, SharedFetches(breaker, shared)
        )
        self._hinted: set[str] = set()

    def _hint_recording(self, fleet: str, report: FetchReport) -> None:
        """Once a process and a fleet (`fleet` its name, "" for the service's selector): a large
        fleet read from raw series, which `triage rules` would make far cheaper for the
        Prometheus every diagnosis reads."""
        if fleet in self._hinted or not report.recording_would_pay():
            return
        self._hinted.add(fleet)
        _LOG.warning(
            "%s: %d replicas read from raw series; the series `triage rules` records make each "
            "diagnosis's read about ten times cheaper for Prometheus",
            f"fleet {fleet}" if fleet else "the service's selector",
            report.replicas,
        )

    def run(self, item: WorkItem, source: PrometheusSource) -> WorkResult:
        end = self.fetch.frame_end(item.at, time.time())
        try:
            scoping = self.scoper.decide(item.alerts, end, source)
            if scoping.refused:
                return WorkResult(
                    f"{item.symptom}:no-fleet",
                    item.symptom,
                    None,
                    None,
                    scoping.note,
                    scoping.note,
                    None,
                    0,
                    scope=scoping.note,
                )

            def fetch() -> tuple[SignalFrame, FetchReport]:
                lookback = self.fetch.lookback + self.fetch.span
                return fetch_frame(
                    source, self.catalog, scoping.options, end, lookback, self.fetch.step, self.replica_reads
                )

            (frame, report), fetched = self.frames.get((scoping.key, end), fetch)
            if fetched:
                self._hint_recording(scoping.key, report)
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
                0 if isinstance(exc, Remembered) else 1,
                getattr(exc, "kind", "no_data"),
            )
        at = min(max(item.at, frame.start), frame.end)
        diagnosis = diagnose(self.graph, frame, item.symptom, at, source=item.symptom_source)
        diagnosis = replace(
            diagnosis, signal_problems=tuple(sorted(report.problems().items())), fleet=scoping.fleet
        )
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
            summary=f"Fleet: {scoping.note}\n\n{to_text(diagnosis)}",
            headline=headline,
            unavailable=None,
            fetches=1 if fetched else 0,
            scope=scoping.note,
        )


@dataclass(frozen=True)
class DiagnoserSpec:
    """Everything a diagnosing process needs to build its own Diagnoser and Prometheus source."""

    playbooks: str | None
    catalog: tuple[str, ...]
    options: QueryOptions
    fetch: FetchSettings
    prometheus_url: str
    prometheus_timeout: float
    prometheus_token: str | None = field(default=None, repr=False)
    fleet_labels: tuple[str, ...] = DEFAULT_FLEET_LABELS
    max_series: int = DEFAULT_MAX_SERIES

    def source(self) -> PrometheusSource:
        return PrometheusSource(
            self.prometheus_url,
            timeout=self.prometheus_timeout,
            bearer_token=self.prometheus_token,
            max_series=self.max_series,
        )

    def diagnoser(self, rounds: AbstractContextManager[object] | None = None) -> Diagnoser:
        """A Diagnoser; `rounds` is the service-wide fetch semaphore, when shared with other processes."""
        graph = build_graph(load_playbooks(Path(self.playbooks) if self.playbooks else None))
        catalog = load_catalog(list(self.catalog))
        return Diagnoser(graph, catalog, self.options, self.fetch, rounds, self.fleet_labels)


def run_safely(diagnoser: Diagnoser, item: WorkItem, source: PrometheusSource) -> WorkResult:
    """A result whatever happens: an unexpected error is stored like unavailable signals, and retried.

    The result carries its message headline (`briefed`), rendered here in the diagnosing thread
    or process rather than by the intake's process under the group's lock."""
    try:
        result = diagnoser.run(item, source)
    except Exception as exc:
        _LOG.exception("diagnosis of work %s failed", item.id)
        reason = f"internal error: {type(exc).__name__}"
        result = WorkResult(
            "unavailable", item.symptom, None, None, f"diagnosis failed ({reason})", reason, reason, 0
        )
    return briefed(result)


class ThreadRunner:
    """Diagnoses in the calling worker thread, with one Prometheus source per thread."""

    def __init__(self, diagnoser: Diagnoser, sources: SourceFactory) -> None:
        self.diagnoser = diagnoser
        self.sources = sources
        self._local = threading.local()

    def warm(self) -> None:
        """Nothing to start: diagnoses run in the worker threads."""

    def run(self, item: WorkItem) -> WorkResult:
        source: PrometheusSource | None = getattr(self._local, "source", None)
        if source is None:
            source = self.sources()
            self._local.source = source
        return run_safely(self.diagnoser, item, source)

    def close(self) -> None:
        """Nothing to release beyond what the threads' exit releases."""


class Runner(Protocol):
    def warm(self) -> None: ...

    def run(self, item: WorkItem) -> WorkResult: ...

    def close(self) -> None: ...


class WorkerPool:
    """N threads draining the store's work queue; `wake()` after intake, `stop()` to drain.

    Each claim is a lease (`Store.lease` seconds): one more thread renews the leases of
    the items in hand every third of that, so a long diagnosis keeps its work while a
    replica that died lets its work go to the others.
    """

    def __init__(
        self,
        store: Store,
        runner: Runner,
        retry_unavailable: float,
        metrics: Metrics,
        workers: int,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.retry_unavailable = retry_unavailable
        self.metrics = metrics
        self.workers = workers
        self.on_change = on_change
        self._wake = threading.Condition()
        self._pending_wakes = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._in_hand: dict[int, WorkItem] = {}
        self._in_hand_lock = threading.Lock()

    def start(self) -> None:
        for i in range(self.workers):
            thread = threading.Thread(target=self._loop, name=f"triage-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        keeper = threading.Thread(target=self._renew_leases, name="triage-leases", daemon=True)
        keeper.start()
        self._threads.append(keeper)

    def _renew_leases(self) -> None:
        every = self.store.lease / 3
        while not self._stop.wait(every):
            with self._in_hand_lock:
                items = list(self._in_hand.values())
            try:
                self.store.renew(items)
            except Exception as exc:  # a store down now is retried at the next turn
                _LOG.warning("cannot renew the leases of %d work items (%s)", len(items), type(exc).__name__)

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
        self.runner.close()

    def _sleep(self) -> None:
        try:
            due = self.store.next_due()
            delay = 5.0 if due is None else min(5.0, max(0.0, due - time.time()))
        except self.store.backend.unavailable:
            delay = 1.0  # the store is down: look again shortly
        with self._wake:
            if self._pending_wakes == 0 and not self._stop.is_set():
                self._wake.wait(delay)
            self._pending_wakes = 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self.store.claim()
            except self.store.backend.unavailable as exc:
                _LOG.warning("cannot claim work: the store is unavailable (%s)", type(exc).__name__)
                self._stop.wait(1.0)
                continue
            except Exception:  # the store is the one thing a worker cannot do without
                _LOG.exception("cannot claim work from the store")
                self._stop.wait(1.0)
                continue
            if item is None:
                self._sleep()
                continue
            with self._in_hand_lock:
                self._in_hand[item.id] = item
            try:
                self._process(item)
            finally:
                with self._in_hand_lock:
                    self._in_hand.pop(item.id, None)

    def _unstored(self, item: WorkItem, exc: Exception) -> None:
        """A result the store would not take: the item is put back, or its lease runs out.

        A store that is down is an operational state, logged in one line; anything else
        is a defect, logged with its traceback.
        """
        down = isinstance(exc, self.store.backend.unavailable)
        if down:
            _LOG.warning("cannot store the result of work %s (%s); it will run again", item.id, exc)
        else:
            _LOG.error("cannot store the result of work %s; it will run again", item.id, exc_info=exc)
        try:
            self.store.release(item)
        except self.store.backend.unavailable as again:
            _LOG.warning("cannot release work %s (%s); its lease will run out", item.id, type(again).__name__)
        except Exception:
            _LOG.exception("cannot release work %s", item.id)
        self._stop.wait(1.0)

    def _process(self, item: WorkItem) -> None:
        started = time.monotonic()
        result = self.runner.run(item)
        self.metrics.observe_latency(time.monotonic() - started)
        self.metrics.inc("triage_signal_fetches_total", result.fetches)
        retry_at = None
        if result.unavailable is not None:
            self.metrics.inc("triage_signals_unavailable_total", reason=result.reason or "internal")
            delay = self.retry_unavailable * 2 ** min(max(item.attempts - 1, 0), 6)
            retry_at = time.time() + min(delay, MAX_RETRY_DELAY)
        try:
            annotated = self.store.complete(item, result, retry_at)
        except Exception as exc:
            self._unstored(item, exc)
            return
        self.metrics.inc("triage_annotated_total", annotated)
        self.on_change()
