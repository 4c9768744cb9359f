"""The harness against the real Alertmanager binary, what that binary really sends, and the storm client.

These tests pin down the Alertmanager behaviour the webhook service is built around,
measured rather than assumed: the v4 payload and its auth header, retries after a
5xx, repeats after `repeat_interval` carrying the same fingerprint and `startsAt`,
resolved notifications, `max_alerts` truncation, and an HA pair that delivers once
when the receiver is healthy but twice (once per member, identical alert identity)
after the receiver failed. They also check the recording sink's fault modes, which
the service's delivery tests rely on, and that the storm client builds notifications
shaped like Alertmanager's and counts every request's outcome.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.storm_client import (
    EXTERNAL_URLS,
    StormShape,
    alert_fingerprint,
    build_storm,
    episodes,
    main,
    percentile,
    post_storm,
)
from triage.core.model import SYMPTOMS

from .alertmanager import (
    ZERO_TIME,
    AlertmanagerError,
    TemporaryAlertmanager,
    ha_pair,
    make_alert,
    resolved,
)
from .sink import Received, RecordingSink

WEBHOOK_PATH = "/api/alertmanager"
TOKEN = "t0ken-for-tests"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def old_alert(name: str = "LLMTTFTP99High", instance: str = "10.0.0.1:8000") -> dict[str, Any]:
    """An alert that started a minute ago: Alertmanager flushes its new group at once, skipping group_wait."""
    started = datetime.now(UTC) - timedelta(minutes=1)
    return make_alert(name, starts_at=started, symptom="ttft_slow", instance=instance)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def identities(requests: list[Received]) -> set[tuple[str, datetime]]:
    """(fingerprint, startsAt) of every alert in the given notifications: a firing episode's identity."""
    return {(a["fingerprint"], parse_time(a["startsAt"])) for r in requests for a in r.json["alerts"]}


def senders(requests: list[Received], status: int | None = None) -> set[str]:
    """The Alertmanagers (by `externalURL`) that sent these notifications, or only those answered `status`."""
    return {r.json["externalURL"] for r in requests if status is None or r.status == status}


def post(url: str, body: bytes = b"{}") -> int:
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with _NO_PROXY.open(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


# -- Alertmanager ------------------------------------------------------------------------


def test_pushed_alert_arrives_as_a_v4_notification_with_the_bearer_token(
    binary: str, sink: RecordingSink
) -> None:
    alert = old_alert(instance="10.0.0.1:8000")
    with TemporaryAlertmanager(sink.url + WEBHOOK_PATH, bearer_token=TOKEN, binary=binary) as am:
        am.push([alert])
        assert sink.wait_for(1, timeout=10), am.log_tail()
        (held,) = am.alerts()
    request = sink.received[0]
    assert (request.method, request.path, request.status) == ("POST", WEBHOOK_PATH, 200)
    assert request.header("Authorization") == f"Bearer {TOKEN}"
    assert (request.header("User-Agent") or "").startswith("Alertmanager/")
    assert request.header("Content-Type") == "application/json"
    payload = request.json
    assert payload["version"] == "4"
    assert payload["status"] == "firing"
    assert payload["receiver"] == "triage"
    assert payload["truncatedAlerts"] == 0
    assert payload["externalURL"] == am.url
    assert payload["groupLabels"] == {"alertname": "LLMTTFTP99High", "service": "llm"}
    assert payload["groupKey"] == '{}:{alertname="LLMTTFTP99High", service="llm"}'
    (sent,) = payload["alerts"]
    assert sent["status"] == "firing"
    assert sent["labels"] == alert["labels"]
    assert sent["endsAt"] == ZERO_TIME
    assert parse_time(sent["startsAt"]) == parse_time(str(alert["startsAt"]))
    assert re.fullmatch(r"[0-9a-f]{16}", sent["fingerprint"])
    assert sent["fingerprint"] == held["fingerprint"] == alert_fingerprint(sent["labels"])


def test_basic_auth_is_sent_as_configured(binary: str, sink: RecordingSink) -> None:
    with TemporaryAlertmanager(sink.url, basic_auth=("am", "pa:ss"), binary=binary) as am:
        am.push([old_alert()])
        assert sink.wait_for(1, timeout=10), am.log_tail()
    expected = "Basic " + base64.b64encode(b"am:pa:ss").decode()
    assert sink.received[0].header("Authorization") == expected


def test_a_5xx_is_retried_with_the_same_payload(binary: str, sink: RecordingSink) -> None:
    sink.fail_with(503, times=2)
    with TemporaryAlertmanager(sink.url, binary=binary) as am:
        am.push([old_alert()])
        assert sink.wait_for(3, timeout=10), am.log_tail()
    attempts = sink.received[:3]
    assert [r.status for r in attempts] == [503, 503, 200]
    assert len({r.body for r in attempts}) == 1


def test_a_repeat_carries_the_same_fingerprint_and_starts_at(binary: str, sink: RecordingSink) -> None:
    with TemporaryAlertmanager(sink.url, group_interval="1s", repeat_interval="2s", binary=binary) as am:
        am.push([old_alert()])
        assert sink.wait_for(2, timeout=10), am.log_tail()
    first, repeat = sink.received[:2]
    assert first.json["alerts"] == repeat.json["alerts"]
    assert identities([first]) == identities([repeat])
    # The repeat comes on the first group_interval tick at which the notification log
    # entry (written just after the first send) is older than repeat_interval.
    assert 2.0 <= repeat.at - first.at <= 2.0 + 1.0 + 2.0


def test_an_alert_ending_in_the_past_is_delivered_resolved(binary: str, sink: RecordingSink) -> None:
    alert = old_alert()
    with TemporaryAlertmanager(sink.url, group_interval="1s", repeat_interval="1m", binary=binary) as am:
        am.push([alert])
        assert sink.wait_for(1, timeout=10), am.log_tail()
        ending = resolved(alert)
        am.push([ending])
        closed = sink.wait_for(lambda got: any(r.json["status"] == "resolved" for r in got), timeout=10)
        assert closed, am.log_tail()
    firing = sink.received[0]
    closing = next(r for r in sink.received if r.json["status"] == "resolved")
    (sent,) = closing.json["alerts"]
    assert sent["status"] == "resolved"
    assert parse_time(sent["endsAt"]) == parse_time(ending["endsAt"])
    assert identities([closing]) == identities([firing])


def test_max_alerts_truncates_the_snapshot_and_says_how_many(binary: str, sink: RecordingSink) -> None:
    alerts = [old_alert(instance=f"10.0.0.{i}:8000") for i in range(3)]
    with TemporaryAlertmanager(sink.url, group_interval="1s", max_alerts=2, binary=binary) as am:
        am.push(alerts)
        # An alert older than group_wait flushes its new group at once, possibly before
        # the rest of the same POST has joined it; the next tick sends all three.
        truncated = sink.wait_for(lambda got: any(r.json["truncatedAlerts"] for r in got), timeout=10)
        assert truncated, am.log_tail()
    payload = next(r.json for r in sink.received if r.json["truncatedAlerts"])
    assert len(payload["alerts"]) == 2
    assert payload["truncatedAlerts"] == 1


def test_a_bad_config_fails_at_start_with_the_log_tail(binary: str) -> None:
    am = TemporaryAlertmanager("http://127.0.0.1:9/", group_wait="soon", binary=binary)
    with pytest.raises(AlertmanagerError, match=r"exited with code [1-9]") as failed:
        am.start()
    assert 'not a valid duration string: \\"soon\\"' in str(failed.value)


def test_a_healthy_ha_pair_delivers_once_per_episode_identity(binary: str, sink: RecordingSink) -> None:
    with ha_pair(sink.url, peer_timeout="1s", repeat_interval="1m", binary=binary) as pair:
        pair.push([old_alert()])
        assert sink.wait_for(1, timeout=10), pair[0].log_tail()
        # The second member flushes 1s (peer_timeout) later; give it that and a margin.
        sink.wait_for(2, timeout=3)
    got = sink.received
    assert 1 <= len(got) <= 2
    assert len(identities(got)) == 1


def test_after_a_failed_delivery_both_ha_members_deliver_the_same_episode(
    binary: str, sink: RecordingSink
) -> None:
    """The duplicate the service must drop: two members, one (fingerprint, startsAt), both accepted."""
    sink.fail_with(503)
    with ha_pair(sink.url, peer_timeout="1s", repeat_interval="1m", binary=binary) as pair:
        pair.push([old_alert()])
        members = {member.url for member in pair}
        assert sink.wait_for(lambda got: senders(got) == members, timeout=10)
        sink.recover()
        assert sink.wait_for(lambda got: senders(got, status=200) == members, timeout=15)
    accepted = sink.accepted()
    assert len(accepted) == 2
    assert len(identities(accepted)) == 1
    assert accepted[0].json["groupKey"] == accepted[1].json["groupKey"]


# -- RecordingSink -----------------------------------------------------------------------


def test_sink_records_requests_and_waits_without_sleeping(sink: RecordingSink) -> None:
    assert not sink.wait_for(1, timeout=0.05)
    assert post(sink.url + "/hook", b'{"a": 1}') == 200
    assert post(sink.url + "/hook", b"not json") == 200
    assert sink.wait_for(lambda got: len(got) == 2, timeout=1)
    first, second = sink.received
    assert (first.path, first.json, first.body) == ("/hook", {"a": 1}, b'{"a": 1}')
    assert (second.json, second.body) == (None, b"not json")


def test_sink_fails_with_retry_after_then_recovers(sink: RecordingSink) -> None:
    sink.fail_with(503, retry_after="7")
    request = urllib.request.Request(sink.url, data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as failed:
        _NO_PROXY.open(request, timeout=5)
    assert failed.value.code == 503
    assert failed.value.headers["Retry-After"] == "7"
    assert post(sink.url) == 503
    sink.recover()
    assert post(sink.url) == 200
    assert [r.status for r in sink.received] == [503, 503, 200]
    assert len(sink.accepted()) == 1


def test_sink_fails_a_given_number_of_times(sink: RecordingSink) -> None:
    sink.fail_with(500, times=2)
    assert [post(sink.url) for _ in range(3)] == [500, 500, 200]


def test_sink_refuses_connections_while_stopped_and_comes_back_on_the_same_url(sink: RecordingSink) -> None:
    url = sink.url
    sink.stop()
    with pytest.raises(urllib.error.URLError) as refused:
        post(url)
    assert isinstance(refused.value.reason, ConnectionRefusedError)
    sink.restart()
    assert sink.url == url
    assert post(url) == 200


def test_sink_stall_is_released_by_stop(sink: RecordingSink) -> None:
    sink.stall(30)
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        _NO_PROXY.open(urllib.request.Request(sink.url, data=b"{}", method="POST"), timeout=0.3)
    assert sink.wait_for(1, timeout=1)
    sink.stop()


# -- storm client ------------------------------------------------------------------------

V4_KEYS = {
    "receiver", "status", "alerts", "groupLabels", "commonLabels", "commonAnnotations",
    "externalURL", "version", "groupKey", "truncatedAlerts",
}  # fmt: skip
ALERT_KEYS = {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}


def test_storm_fingerprints_are_alertmanagers() -> None:
    """Labels and fingerprint of an alert as Alertmanager 0.25 sent it (shared reference payload)."""
    labels = {
        "alertname": "LLMTPOTP99High",
        "instance": "10.42.0.11:8000",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
        "namespace": "llm",
        "severity": "page",
        "symptom": "tpot_slow",
    }
    assert alert_fingerprint(labels) == "f08b0e875d182657"


def test_default_storm_has_ten_thousand_episodes_as_alertmanager_would_send_them() -> None:
    storm = build_storm()
    shape = StormShape.of(storm)
    assert (shape.episodes, shape.groups, shape.exact_repeats) == (10_000, 200, 200)
    # Three snapshots and one repeat per group, plus the HA duplicates.
    assert shape.notifications == 200 * 4 + shape.ha_duplicates
    assert 0.15 * 200 <= shape.ha_duplicates <= 0.35 * 200
    symptoms = set()
    by_group: dict[str, list[dict[str, Any]]] = {}
    for payload in storm:
        assert set(payload) == V4_KEYS
        assert (payload["version"], payload["status"], payload["truncatedAlerts"]) == ("4", "firing", 0)
        group = payload["groupLabels"]
        assert set(group) == {"alertname", "service"}
        name, service = group["alertname"], group["service"]
        assert payload["groupKey"] == f'{{}}:{{alertname="{name}", service="{service}"}}'
        labels = [a["labels"] for a in payload["alerts"]]
        common = {k: v for k, v in labels[0].items() if all(other.get(k) == v for other in labels)}
        assert payload["commonLabels"] == common
        for alert in payload["alerts"]:
            assert set(alert) == ALERT_KEYS
            assert alert["status"] == "firing"
            assert alert["endsAt"] == ZERO_TIME
            assert parse_time(alert["startsAt"]).tzinfo is not None
            assert {"alertname", "service", "instance", "symptom"} <= set(alert["labels"])
            assert alert["labels"].items() >= group.items()
            assert alert["fingerprint"] == alert_fingerprint(alert["labels"])
            symptoms.add(alert["labels"]["symptom"])
        if payload["externalURL"] == EXTERNAL_URLS[0]:
            by_group.setdefault(payload["groupKey"], []).append(payload)
    assert symptoms == set(SYMPTOMS)
    for notifications in by_group.values():
        # Snapshots, not deltas: each notification holds every alert of the one before.
        sizes = sorted(len(p["alerts"]) for p in notifications)
        ordered = sorted(notifications, key=lambda p: len(p["alerts"]))
        for before, after in itertools.pairwise(ordered):
            assert episodes([before]) <= episodes([after])
        assert sizes[-1] == sizes[-2]  # the exact repeat of the last snapshot


def test_storm_is_deterministic_and_sized_as_asked() -> None:
    assert build_storm(120, 12, seed=3) == build_storm(120, 12, seed=3)
    assert build_storm(120, 12, seed=3) != build_storm(120, 12, seed=4)
    small = build_storm(7, 3, waves=5, ha_share=0.0)
    assert StormShape.of(small).episodes == 7
    assert StormShape.of(small).ha_duplicates == 0
    with pytest.raises(ValueError, match="at least one alert per group"):
        build_storm(2, 3)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([3.0], 99) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_post_storm_delivers_every_payload_and_counts_failures(sink: RecordingSink) -> None:
    storm = build_storm(120, 12, seed=1)
    result = post_storm(sink.url + WEBHOOK_PATH, storm, concurrency=4, token=TOKEN)
    assert (result.requests, result.ok, result.errors) == (len(storm), len(storm), [])
    assert len(result.latencies) == len(storm)
    got = sink.received
    assert sorted(json.dumps(r.json, sort_keys=True) for r in got) == sorted(
        json.dumps(p, sort_keys=True) for p in storm
    )
    assert {r.header("Authorization") for r in got} == {f"Bearer {TOKEN}"}
    assert {r.path for r in got} == {WEBHOOK_PATH}

    sink.fail_with(503, times=5)
    failing = post_storm(sink.url, storm, concurrency=4)
    assert failing.statuses == {200: len(storm) - 5, 503: 5}

    sink.stop()
    refused = post_storm(sink.url, storm[:10], concurrency=2, timeout=1.0)
    assert (refused.ok, len(refused.errors)) == (0, 10)
    assert all("ConnectionRefused" in error for error in refused.errors)


def test_storm_command_line(sink: RecordingSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    size = ["--alerts", "20", "--groups", "2"]
    args = ["--url", sink.url + WEBHOOK_PATH, "--token-file", str(token_file), *size]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "20 unique episodes in 2 groups" in out
    assert re.search(r"latency p99\s+\d", out)
    assert sink.received[0].header("Authorization") == f"Bearer {TOKEN}"
    sink.fail_with(503)
    assert main([*args, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["result"]["statuses"] == {"503": report["result"]["requests"]}
    assert main(["--dry-run", "--json", *size]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 20
