"""Shared helpers: the bundled knowledge, synthetic frames for the core's unit tests, a real PostgreSQL,
and what costs seconds to build, built once per session: the generated corpora and the raw replays."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from signals.frame import Series, SignalFrame, labels_of
from signals.selector import parse_selector
from triage.core.graph import TriageGraph, build_graph
from triage.sources import load_playbooks

if TYPE_CHECKING:
    from metamorphic import GeneratedCorpora
    from rawreplays import RawReplays

    from tools.pgserver import TemporaryPostgres

ROOT = Path(__file__).resolve().parent.parent
START = 1_760_000_000.0
STEP = 15.0


@pytest.fixture(scope="session")
def graph() -> TriageGraph:
    return build_graph(load_playbooks(ROOT / "playbooks"))


RAW_READERS = frozenset({"test_metamorphic", "test_raw_fixtures"})
"""The modules that read every bundled raw fixture's replay (`raw_replays`)."""
SESSION_BUILT = RAW_READERS | {"test_generality"}
"""The modules that read what is built once per session (`generated`, `raw_replays`)."""
SESSION_BUILT_GROUP = "session-built"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default, see pyproject.toml): a worker per CPU, at most four; each runs its
    own servers and the service's tests start several processes of their own."""
    return max(1, min(4, os.cpu_count() or 1))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's `loadgroup`: every test file runs whole on one worker (its module's
    servers are started once), and the files that read what is built once per session share
    one worker, so it is built once in the run, not once per worker."""
    for item in items:
        module = getattr(getattr(item, "module", None), "__name__", "")
        group = SESSION_BUILT_GROUP if module in SESSION_BUILT else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def generated(
    request: pytest.FixtureRequest, graph: TriageGraph, raw_replays: RawReplays
) -> GeneratedCorpora:
    """The corpora, written in two worker processes while this one replays the bundled raw
    fixtures, when the session holds a test that reads those replays."""
    from metamorphic import GeneratedCorpora
    from rawreplays import bundled_raw

    modules = {getattr(item.module, "__name__", "") for item in request.session.items}
    if modules & RAW_READERS:
        return GeneratedCorpora(graph, warm=lambda: raw_replays.warm(bundled_raw()))
    return GeneratedCorpora(graph)


@pytest.fixture(scope="session")
def raw_replays(graph: TriageGraph) -> RawReplays:
    from rawreplays import RawReplays

    return RawReplays(graph)


def frame_of(series: Mapping[str, object], steps: int, step: float = STEP) -> SignalFrame:
    """A frame from `{'kv_usage_ratio{instance="a"}': values}`; scalars repeat, arrays are used as given."""
    rows = []
    for selector, values in series.items():
        name, labels = parse_selector(selector)
        array = np.full(steps, float(values)) if np.isscalar(values) else np.asarray(values, dtype=float)
        assert array.shape == (steps,), selector
        rows.append(Series(name, labels_of(labels), array))
    return SignalFrame(START + step * np.arange(steps), rows)


def stepped(
    before: float, after: float, at: int, steps: int, noise: float = 0.0, seed: int = 0
) -> np.ndarray:
    """`before` until index `at`, then `after`, with optional relative noise."""
    values = np.where(np.arange(steps) < at, before, after).astype(float)
    if noise:
        values = values * (1 + np.random.default_rng(seed).normal(0, noise, steps))
    return values


# ------------------------------------------------------------------ a real PostgreSQL


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    """One real PostgreSQL for the session (`tools/pgserver.py`), removed at its end.

    Without the server binaries the tests that use it are skipped loudly, and fail under
    CI=true, like the real-Prometheus and real-Alertmanager tests. Imported here rather
    than at the top so a run without these tests does not load psycopg.
    """
    from tools.pgserver import TemporaryPostgres, require_postgres

    with TemporaryPostgres(bindir=require_postgres()) as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: TemporaryPostgres) -> Iterator[str]:
    """The URL of a fresh database of the session's server, dropped after the test.

    A test that stopped the server (a restart fault left half-way) gets it started again
    on the same port, so the tests after it still find it.
    """
    from urllib.parse import unquote, urlsplit

    url = postgres_server.create_database()
    yield url
    if not postgres_server.running:
        postgres_server.start()
    postgres_server.drop_database(unquote(urlsplit(url).path.lstrip("/")))


# ------------------------------------------------------------------ the metamorphic table


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """The invariance table of tests/test_metamorphic.py, when any of its relations ran."""
    import sys

    module = sys.modules.get("metamorphic")
    lines = module.table() if module is not None else []
    if not lines:
        return
    terminalreporter.write_sep("=", "metamorphic relations")
    for line in lines:
        terminalreporter.write_line(line)
