"""Each bundled raw fixture replayed and diagnosed once per engine for the whole session.

A raw replay writes a fixture's exporter series into a real server, which costs a second;
`tests/test_raw_fixtures.py` checks every replay and `tests/test_metamorphic.py` transforms
the Prometheus ones, so both read them from here (the `raw_replays` session fixture of
`tests/conftest.py`) and no fixture is replayed twice on one engine.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from vmserver import replay_engine, require_engine

from signals.catalog import load_catalog
from signals.fixture import Fixture, load_fixture
from signals.live import FetchReport
from signals.rawreplay import replay_raw
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis
from triage.core.walk import diagnose
from triage.replay import fixture_symptom

ROOT = Path(__file__).resolve().parent.parent
_RAW_LEVEL = re.compile(r"^level:\s*['\"]?raw['\"]?\s*(#.*)?$", re.MULTILINE)


def bundled_raw() -> list[Path]:
    """The bundled `level: raw` fixtures, in name order."""
    paths = sorted((ROOT / "fixtures").glob("*.yaml"))
    return [p for p in paths if _RAW_LEVEL.search(p.read_text(encoding="utf-8"))]


@dataclass(frozen=True)
class Replayed:
    raw: Fixture
    signals: Fixture
    report: FetchReport
    diagnosis: Diagnosis


class RawReplays:
    """`get(engine, path)`: the fixture replayed on that engine and diagnosed, the first time only."""

    def __init__(self, graph: TriageGraph) -> None:
        self._graph = graph
        self._catalog = load_catalog()
        self._done: dict[tuple[str, Path], Replayed] = {}
        self._raw: dict[Path, Fixture] = {}

    def warm(self, paths: Iterable[Path]) -> None:
        """Replay each fixture on Prometheus ahead of the tests that read them, where it is
        installed (where it is not, those tests skip or fail on their own)."""
        if shutil.which("prometheus") and shutil.which("promtool"):
            for path in paths:
                self.get("prometheus", path)

    def get(self, engine: str, path: Path) -> Replayed:
        require_engine(engine)
        key = (engine, path.resolve())
        if key not in self._done:
            raw = self._raw.get(key[1]) or load_fixture(str(path))
            assert raw.level == "raw", f"{path.name} is not a raw fixture"
            self._raw[key[1]] = raw
            signals, report = replay_raw(raw, self._catalog, server=partial(replay_engine, engine))
            symptom, source = fixture_symptom(signals, None, self._graph.knowledge)
            diagnosis = diagnose(self._graph, signals.frame, symptom, signals.at, source=source)
            self._done[key] = Replayed(raw, signals, report, diagnosis)
        return self._done[key]
