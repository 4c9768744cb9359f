"""One test cluster for the session: four fleets, their exporters, scraped and backfilled.

Building it starts real HTTP servers on loopback addresses and two real Prometheus
processes (the scrape, then the backfilled history); everything is stopped when the
session ends. Without `prometheus`/`promtool` the tests that need it skip loudly (fail
under CI=true). The real dumps and charts live in the steering repo's `shared/real`,
beside the clone; tests that compare with them skip, saying so, where it is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from promserver import require_prometheus_binaries

from tools.cluster import Scenario, three_fleets

from .clusterkit import REAL


@pytest.fixture(scope="session")
def scenario() -> Iterator[Scenario]:
    require_prometheus_binaries()
    with three_fleets() as built:
        yield built


@pytest.fixture(scope="session")
def real() -> Path:
    if not (REAL / "INDEX.md").is_file():
        pytest.skip(f"the real dumps and charts are not at {REAL} (the steering repo's shared/real)")
    return REAL
