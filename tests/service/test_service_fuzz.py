"""Fuzzing the intake: whatever arrives, never a 5xx, and a rejected request stores nothing.

Alertmanager retries a 5xx every group_interval forever, so a body that crashes the
handler would be re-sent indefinitely; and a half-stored notification would be a
duplicate or a loss later. Hypothesis mutates the real v4 payload field by field
(wrong types, missing keys, odd strings, deep values) and also sends raw bytes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.service.app import create_app

from .servicekit import PAYLOADS, closed_port_url, make_service, rows

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
TOP_KEYS = [*PAYLOADS[0], "notification_reason", "routeLabels", "zzz"]
ALERT_KEYS = [*PAYLOADS[0]["alerts"][0], "extra"]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """The real payload with a few fields replaced, dropped or added."""
    payload = copy.deepcopy(PAYLOADS[draw(st.integers(0, 1))])
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["top", "alert", "label"]))
        if where == "top":
            key = draw(st.sampled_from(TOP_KEYS))
            target: dict[str, Any] = payload
        elif where == "alert" and isinstance(payload.get("alerts"), list) and payload["alerts"]:
            target = payload["alerts"][draw(st.integers(0, len(payload["alerts"]) - 1))]
            if not isinstance(target, dict):
                continue
            key = draw(st.sampled_from(ALERT_KEYS))
        elif (
            isinstance(payload.get("alerts"), list)
            and payload["alerts"]
            and isinstance(payload["alerts"][0], dict)
        ):
            labels = payload["alerts"][0].get("labels")
            if not isinstance(labels, dict):
                continue
            target, key = labels, draw(st.text(max_size=12))
        else:
            continue
        if draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = draw(json_values)
    return payload


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Path]]:
    db = tmp_path_factory.mktemp("fuzz") / "triage.db"
    service = make_service(db, closed_port_url(), token=TOKEN, workers=1)
    with TestClient(create_app(service)) as client:
        yield client, db


def stored(db: Path) -> tuple[int, int, int]:
    counts = rows(db, "SELECT (SELECT count(*) FROM annotations), (SELECT sum(seen) FROM annotations), "
                      "(SELECT count(*) FROM groups)")[0]  # fmt: skip
    return int(counts[0]), int(counts[1] or 0), int(counts[2])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=mutated())
def test_mutated_payloads_never_5xx_and_rejections_store_nothing(
    fuzz_client: tuple[TestClient, Path], payload: dict[str, Any]
) -> None:
    client, db = fuzz_client
    before = stored(db)
    r = client.post("/api/alertmanager", content=json.dumps(payload), headers=AUTH)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.status_code in (400, 413) and r.json()["error"]
        assert stored(db) == before
    else:
        assert r.status_code == 200
        after = stored(db)
        assert after[1] - before[1] == len(
            [a for a in payload["alerts"] if a["labels"].get("alertname") != "Watchdog"]
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=2000))
def test_raw_bytes_never_5xx(fuzz_client: tuple[TestClient, Path], body: bytes) -> None:
    client, db = fuzz_client
    before = stored(db)
    r = client.post("/api/alertmanager", content=body, headers=AUTH)
    assert r.status_code in (400, 413), r.text
    assert stored(db) == before
