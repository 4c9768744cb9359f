"""Shared helpers: the bundled knowledge, and synthetic frames for unit tests of the core."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from signals.frame import Series, SignalFrame, labels_of
from signals.selector import parse_selector
from triage.core.graph import TriageGraph, build_graph
from triage.sources import load_playbooks

ROOT = Path(__file__).resolve().parent.parent
START = 1_760_000_000.0
STEP = 15.0


@pytest.fixture(scope="session")
def graph() -> TriageGraph:
    return build_graph(load_playbooks(ROOT / "playbooks"))


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
