"""Fixtures of the TUI tests."""

from __future__ import annotations

import pytest
from tuiapp import fixture_app

from triage.graph import TriageGraph
from tui.app import TriageApp


@pytest.fixture
def kv_app(graph: TriageGraph) -> TriageApp:
    return fixture_app(graph, "kv-pressure-long-context")
