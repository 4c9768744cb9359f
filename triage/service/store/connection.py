"""The store's base: its database (SQLite or PostgreSQL), and transactions that run again on a lost race.

Every other part of the store builds on this base and reaches the database only through
`write()`, `read()` and `transact()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from triage.service.store.backend import Backend, Tx, open_backend
from triage.service.store.records import MessageBuilder

T = TypeVar("T")

_LOG = logging.getLogger("triage.service")

TRIES = 5
"""Runs of a transaction that keeps losing races to other replicas before it fails."""


class StoreBase:
    """A store on the database at `location` (a SQLite path or a `postgresql://` URL)."""

    def __init__(
        self,
        location: str,
        sinks: Sequence[str] = (),
        builder: MessageBuilder | None = None,
        synchronous: str = "normal",
        *,
        timeout: float = 5.0,
        lease: float = 60.0,
    ) -> None:
        self.backend: Backend = open_backend(location, synchronous=synchronous, timeout=timeout)
        self.location = self.backend.location
        """Where the store is, fit for logs (a path, or a URL without its parameters)."""
        self.sinks = tuple(sinks)
        self.builder = builder
        self.lease = lease
        """Seconds a claim on work or on a message holds without being renewed."""

    def close(self) -> None:
        self.backend.close()

    def write(self) -> AbstractContextManager[Tx]:
        """One write transaction, rolled back on any error."""
        return self.backend.write()

    def read(self) -> AbstractContextManager[Tx]:
        return self.backend.read()

    def transact(self, body: Callable[[Tx], T]) -> T:
        """Run `body` in a write transaction, again when a concurrent one won a race (PostgreSQL)."""
        for attempt in range(1, TRIES + 1):
            try:
                with self.write() as db:
                    return body(db)
            except self.backend.conflicts as exc:
                if attempt == TRIES:
                    raise
                _LOG.debug(
                    "transaction lost a race (%s); run %d of %d", type(exc).__name__, attempt + 1, TRIES
                )
        raise AssertionError("unreachable")
