"""How much load the service puts on Prometheus when many diagnoses are due at once.

A fetch round sends up to 8 queries in parallel. In a storm every worker thread (or
diagnosis process) may be fetching a different moment, which would multiply that;
`prometheus.max_concurrent_fetches` (default 1) bounds the rounds in flight over the
whole service. Counted at a stand-in in front of the session's real Prometheus that
holds every request 0.2 s, so rounds that are allowed to overlap do overlap.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from promserver import PromStandIn, Reply
from test_live import AT

from signals.timeparse import format_instant
from triage.service.app import create_app

from .payloads import alert, notification
from .servicekit import count, make_service, rows, wait_until

QUERIES_PER_ROUND = 8


@pytest.mark.parametrize("processes", [2, 0], ids=["two-diagnosis-processes", "diagnosis-in-threads"])
def test_prometheus_requests_in_flight_stay_within_one_round(
    tmp_path: Path, prometheus_url: str, processes: int
) -> None:
    db = tmp_path / "t.db"
    with PromStandIn(Reply(stall=0.2, proxy_to=prometheus_url)) as stand_in:
        service = make_service(db, stand_in.url, diagnosis_processes=processes, workers=4)
        with TestClient(create_app(service)) as client:
            for g in range(4):  # four groups in four frame spans: four fetches, no frame shared
                alerts = [
                    alert(f"g{g}-{i}", AT - 600 * g, instance=f"10.42.0.{i + 1}:8000", symptom="tpot_slow")
                    for i in range(2)
                ]
                note = notification(alerts, group=f"g{g}")
                assert client.post("/api/alertmanager", json=note).status_code == 200
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 8, timeout=120)
        assert sum(r["fetches"] for r in rows(db, "SELECT fetches FROM work")) == 4
    assert 0 < stand_in.max_in_flight <= QUERIES_PER_ROUND


def test_moments_within_one_span_share_a_frame_and_keep_their_own_moment(
    tmp_path: Path, prometheus_url: str
) -> None:
    """Two groups a minute apart: one fetch serves both, each diagnosed at its own moment."""
    db = tmp_path / "t.db"
    service = make_service(db, prometheus_url, diagnosis_processes=0, workers=2)
    # Both moments in the 5-minute span that ends at or before AT, where the data is.
    end = AT // 300 * 300
    moments = [end - 60, end - 120]
    with TestClient(create_app(service)) as client:
        for g, moment in enumerate(moments):
            alerts = [alert(f"s{g}", moment, instance="10.42.0.1:8000", symptom="tpot_slow")]
            note = notification(alerts, group=f"s{g}")
            assert client.post("/api/alertmanager", json=note).status_code == 200
        wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 2, timeout=120)
    assert sum(r["fetches"] for r in rows(db, "SELECT fetches FROM work")) == 1
    diagnosed = sorted(json.loads(r["diagnosis"])["at"] for r in rows(db, "SELECT diagnosis FROM work"))
    assert diagnosed == sorted(format_instant(m) for m in moments)
