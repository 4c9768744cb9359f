"""Fixtures of the webhook service tests: one real, backfilled Prometheus for the whole session,
the Alertmanager binary, a recording sink per test, and the store (SQLite and PostgreSQL).

The Prometheus holds the raw vLLM incident of the live-signal tests (four replicas whose
KV cache fills an hour in), so a diagnosis taken at `AT` names `kv_pressure`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from promserver import require_prometheus_binaries
from test_live import raw_kv_incident

from signals.tempprom import TemporaryPrometheus

from .harness.alertmanager import require_alertmanager_binary
from .harness.sink import RecordingSink
from .servicekit import StoreAt


@pytest.fixture(scope="session")
def prometheus_url() -> Iterator[str]:
    require_prometheus_binaries()
    with TemporaryPrometheus(raw_kv_incident()) as prom:
        yield prom.url


@pytest.fixture
def binary() -> str:
    return require_alertmanager_binary()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreAt:
    """The store contract's tests run on both stores: a SQLite file, and a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "t.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def sink() -> Iterator[RecordingSink]:
    with RecordingSink() as recording:
        yield recording
