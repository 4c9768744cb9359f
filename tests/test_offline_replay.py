"""A postmortem replay is deterministic and offline: the same bytes twice, no connection made."""

from __future__ import annotations

import socket

import pytest

from triage.cli.main import main

FIXTURE = "fixtures/replica-down-queue-growth.yaml"


def test_replay_and_diagnosis_are_byte_identical_with_the_network_blocked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    outputs = []
    for _ in range(2):
        assert main(["replay", FIXTURE, "--every", "1m", "--format", "json"]) == 0
        assert main(["diagnose", "--fixture", FIXTURE, "--format", "json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert '"top_cause": "replica_down"' in outputs[0]
    assert attempts == []
