"""The service's only durable state, in SQLite: alerts, diagnosis work, group state, outbox.

Why this shape:

- **Commit before the 2xx.** Alertmanager forgets a notification once it gets a 2xx,
  so the intake transaction commits before the response. The database runs in WAL
  mode. With `synchronous=NORMAL` (the default) a commit is a write to the WAL with
  no fsync: it survives the service being killed at any moment, which is the failure
  the crash tests exercise; only a power loss or kernel crash can take back the last
  commits, and even then the alerts come back, because every Alertmanager
  notification is a snapshot of the whole group and is repeated at the next
  `repeat_interval`. `synchronous=FULL` (`store_sync: full`) also fsyncs every
  commit, closing that window at the price of one fsync per request (cheap on the
  benchmark machine's disk, see docs/benchmarks.md; not on every disk).
- **Identity is per alert episode.** Every notification is a snapshot of the whole
  group, repeated by Alertmanager and by each member of an HA pair, so an annotation
  is keyed on (fingerprint, startsAt) with a UNIQUE constraint; repeats only touch
  `last_seen`.
- **Work is per group and moment.** Alerts of one group (and symptom) that start
  within the coalescing window of each other share one `work` row: one signal fetch
  and one diagnosis for all of them, taken at the first one's start.
- **Exactly once, atomically.** A worker's result, the annotations it fills and the
  messages it causes are written in one transaction, so a crash leaves either none or
  all of them. Work found `running` at start was cut off by a crash and runs again.
- **Outbox.** Messages to sinks are rows with a stable idempotency key
  (UNIQUE per sink), delivered from the table, so a sink outage or a crash delays a
  message and never loses or duplicates one.

All writes go through one connection under one lock (SQLite allows one writer at a
time anyway, and a Python lock queues fairly where `busy_timeout` would spin); reads
use a connection per thread, which WAL lets run beside the writer.

The store is one `Store` class for the rest of the service; its methods are split by
concern into the modules of this package: `schema` (the tables), `records` (the rows
handed in and out), `connection` (connections, transactions, checkpoints), `intake`
(recording notifications), `work` (claiming and completing diagnoses), `outbox`
(group closing, message queueing and delivery state) and `queries` (annotations,
outbox and health reads).
"""

from __future__ import annotations

from triage.service.store.intake import Intake
from triage.service.store.queries import Queries
from triage.service.store.records import IntakeResult, MessageBuilder, OutboxRow, WorkItem, WorkResult
from triage.service.store.work import Work


class Store(Intake, Work, Queries):
    """The SQLite store; one per process, shared by the HTTP handlers and the workers."""


__all__ = ["IntakeResult", "MessageBuilder", "OutboxRow", "Store", "WorkItem", "WorkResult"]
