"""Webhook v4 payloads as Alertmanager 0.25 sends them, built for the service tests."""

from __future__ import annotations

import copy
from typing import Any

from signals.timeparse import format_instant

from .servicekit import PAYLOADS

ZERO = "0001-01-01T00:00:00Z"


def alert(
    fingerprint: str,
    starts_at: float,
    *,
    status: str = "firing",
    ends_at: float | None = None,
    alertname: str = "LLMTPOTP99High",
    **labels: str,
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": alertname, "namespace": "llm", **labels},
        "annotations": {"summary": f"{alertname} on {labels.get('instance', '?')}"},
        "startsAt": format_instant(starts_at),
        "endsAt": format_instant(ends_at) if ends_at is not None else ZERO,
        "generatorURL": "http://prometheus.example:9090/graph",
        "fingerprint": fingerprint,
    }


def notification(
    alerts: list[dict[str, Any]], group: str = "g1", truncated: int = 0, **extra: Any
) -> dict[str, Any]:
    """A whole-group snapshot; the status is firing while any alert fires."""
    firing = any(a["status"] == "firing" for a in alerts)
    base = copy.deepcopy(PAYLOADS[0])
    base.update(
        {
            "status": "firing" if firing else "resolved",
            "alerts": alerts,
            "groupKey": f'{{}}:{{alertname="{group}"}}',
            "groupLabels": {"alertname": group},
            "truncatedAlerts": truncated,
        }
    )
    base.update(extra)
    return base
