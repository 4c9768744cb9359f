"""The service's fleets: alerts split by the fleet they name, a refusal stored with its reason, old stores.

In process, against a Prometheus where nothing listens: what is tested here happens
before or after the signals are read. The decision itself is tested in
tests/signals/test_fleet_naming.py, and a whole path through a real Alertmanager to the
right cause of each fleet of the scraped cluster in tests/fleets/test_cluster_serve.py.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from signals.errors import InputErrors
from triage.service.app import create_app
from triage.service.config import load_config
from triage.service.payload import Notification, parse_notification
from triage.service.store import Store, WorkResult

from .payloads import alert, notification
from .servicekit import closed_port_url, make_service, rows

T0 = 1_795_000_000.0
M8, M70 = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"


def test_alerts_of_one_group_are_diagnosed_per_fleet_their_labels_name(tmp_path: Path) -> None:
    db = tmp_path / "triage.db"
    service = make_service(db, closed_port_url())
    try:
        alerts = [
            alert("a1", T0, alertname="TPOTP99High", model_name=M8, symptom="tpot_slow"),
            alert("a2", T0 + 20, alertname="TPOTP99High", model_name=M8, symptom="tpot_slow"),
            alert("b1", T0, alertname="TPOTP99High", model_name=M70, symptom="tpot_slow"),
            # Named by a replica only: the group's fleet-less row, whose fleet the worker finds.
            alert("p1", T0, alertname="TPOTP99High", pod="vllm-0", symptom="tpot_slow"),
            alert("p2", T0, alertname="TPOTP99High", instance="10.0.0.2:8000", symptom="tpot_slow"),
        ]
        result = service.accept(_note(alerts))
        assert (result.new, result.new_work) == (5, 3)
        work = rows(db, "SELECT fleet, count(a.id) AS n FROM work w JOIN annotations a ON a.work_id = w.id "
                        "GROUP BY w.id ORDER BY fleet")  # fmt: skip
        assert [(w["fleet"], w["n"]) for w in work] == [
            ("", 2),
            (f'namespace="llm",model_name="{M70}"', 1),
            (f'namespace="llm",model_name="{M8}"', 2),
        ]
        claimed = [service.store.claim() for _ in range(3)]
        items = {i.fleet: i for i in claimed if i is not None}
        assert (
            len(items) == 3 and len(items[f'namespace="llm",model_name="{M8}"'].alerts) == 1
        )  # distinct label sets
        assert sorted(a.get("pod") or a["instance"] for a in items[""].alerts) == ["10.0.0.2:8000", "vllm-0"]
    finally:
        service.store.close()


def _note(alerts: list[dict[str, Any]]) -> Notification:
    return parse_notification(json.dumps(notification(alerts, group="slo")).encode(), 100)


def test_a_group_naming_a_fleet_that_does_not_exist_is_annotated_with_the_reason(tmp_path: Path) -> None:
    db = tmp_path / "triage.db"
    service = make_service(db, closed_port_url())
    service.accept(_note([alert("x1", T0, alertname="TPOTP99High", model_name="gone", symptom="tpot_slow")]))
    item = service.store.claim()
    assert item is not None
    reason = 'not diagnosed: no fleet {namespace="llm",model_name="gone"} in Prometheus; the fleets are: none'
    refused = WorkResult("tpot_slow:no-fleet", "tpot_slow", None, None, reason, reason, None, 0, scope=reason)
    service.store.complete(item, refused, None)
    with TestClient(create_app(service)) as client:
        got = client.get("/api/annotations/1").json()
        assert got["state"] == "annotated" and got["cause"] is None and got["diagnosis"] is None
        assert got["signals"] == "not read" and got["scope"] == reason and got["summary"] == reason
        page = client.get("/annotations/1").text
        assert (
            "not diagnosed</h1>" in page and "Fleet: not diagnosed: no fleet {namespace=&#34;llm&#34;" in page
        )


OLD_WORK = """
CREATE TABLE work (
    id INTEGER PRIMARY KEY, group_key TEXT NOT NULL, at REAL NOT NULL, symptom TEXT NOT NULL,
    symptom_source TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0, fetches INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL,
    created_at REAL NOT NULL, done_at REAL, signature TEXT, unavailable TEXT, summary TEXT, diagnosis TEXT,
    episode INTEGER NOT NULL DEFAULT 1, UNIQUE (group_key, episode, at, symptom)
);
CREATE INDEX work_group ON work (group_key, episode, symptom, at);
INSERT INTO work (group_key, at, symptom, symptom_source, state, next_at, created_at, signature)
VALUES ('g', 100.0, 'tpot_slow', 'alert label', 'done', 0, 0, 'tpot_slow:kv_pressure');
"""


def test_a_store_written_before_fleets_is_migrated_with_every_row(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(OLD_WORK)
    store = Store(str(db))
    try:
        with store.write() as conn:
            conn.execute(
                "INSERT INTO work (group_key, at, symptom, symptom_source, state, next_at, created_at, "
                "fleet) VALUES ('g', 100.0, 'tpot_slow', 'alert label', 'pending', 0, 0, 'namespace=\"llm\"')"
            )
    finally:
        store.close()
    Store(str(db)).close()  # a second open finds nothing to migrate
    got = rows(db, "SELECT group_key, fleet, signature, scope FROM work ORDER BY id")
    assert [tuple(r) for r in got] == [
        ("g", "", "tpot_slow:kv_pressure", None),
        ("g", 'namespace="llm"', None, None),
    ]


def test_fleet_labels_come_from_the_file_or_the_flag() -> None:
    assert load_config(None, {"prometheus": "http://p:9090"}).config.prometheus.fleet_labels == (
        "namespace",
        "model_name",
    )
    flags = {"prometheus": "http://p:9090", "fleet_labels": "cluster, model"}
    assert load_config(None, flags).config.prometheus.fleet_labels == ("cluster", "model")
    assert load_config(None, {**flags, "fleet_labels": ""}).config.prometheus.fleet_labels == ()
    with pytest.raises(InputErrors, match=r"--fleet-labels: .*'model name' is not a label name"):
        load_config(None, {**flags, "fleet_labels": "model name"})
