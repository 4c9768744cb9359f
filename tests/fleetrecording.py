"""The bundled two-fleet raw fixture, and a real Prometheus serving its series, for fleet tests.

The fixture was written from the scraped test cluster (`tools.cluster.rawfixture`): its
label sets are the ones a Prometheus really gave the exporters' series, so serving it
back stands for a shared Prometheus holding two fleets, without building the cluster.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from signals.fixture import Fixture, load_fixture
from signals.tempprom import TemporaryPrometheus, to_openmetrics

ROOT = Path(__file__).resolve().parent.parent
TWO_FLEETS = ROOT / "fixtures" / "two-fleets-kv-pressure-beside-gpu-fault-raw.yaml"
SMALL = "llm/meta-llama/Llama-3.1-8B-Instruct@Deployment/vllm"
LARGE = "llm/meta-llama/Llama-3.1-70B-Instruct@LeaderWorkerSet/vllm-70b"


@cache
def recording() -> Fixture:
    return load_fixture(str(TWO_FLEETS))


def serving(fixture: Fixture) -> TemporaryPrometheus:
    """A temporary Prometheus (enter it to start) holding the fixture's raw series."""
    frame = fixture.frame
    text = to_openmetrics((s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series)
    return TemporaryPrometheus(text, lookback_delta=2 * frame.step)
