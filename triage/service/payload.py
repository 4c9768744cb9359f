"""The Alertmanager webhook payload (version "4"), validated at the edge.

Alertmanager adds fields over time (`notification_reason` in 0.32, `routeLabels` in
0.34), so unknown fields are ignored; what the service relies on is required and
typed, and anything else is a 400 naming the field. Each notification is a snapshot
of the whole group, not a delta, so identity is per alert: (fingerprint, startsAt).
A firing alert's `endsAt` is Alertmanager's zero time (`0001-01-01T00:00:00Z`), which
means "open", never a real moment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ZERO_TIME_YEAR = 1


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WebhookAlert(_Lenient):
    """One alert of the group as Alertmanager sends it."""

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime
    endsAt: datetime | None = None
    generatorURL: str = ""
    fingerprint: str = Field(min_length=1, max_length=128)


class WebhookPayload(_Lenient):
    """A whole notification: the group's alerts and what they share."""

    version: Literal["4"]
    status: Literal["firing", "resolved"]
    receiver: str = ""
    groupKey: str
    truncatedAlerts: int = Field(0, ge=0)
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    alerts: list[WebhookAlert]


class BadPayload(ValueError):
    """Input that is not a usable v4 webhook payload; the message says why (HTTP 400)."""


@dataclass(frozen=True)
class Alert:
    """One alert as the store keeps it: times as epoch seconds, `ends_at` None while open."""

    fingerprint: str
    status: str
    starts_at: float
    ends_at: float | None
    labels: dict[str, str]
    annotations: dict[str, str]
    generator_url: str

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True)
class Notification:
    """A validated notification, ready to store."""

    group_key: str
    receiver: str
    status: str
    truncated: int
    group_labels: dict[str, str]
    external_url: str
    alerts: tuple[Alert, ...]


def _epoch(moment: datetime | None) -> float | None:
    if moment is None or moment.year <= ZERO_TIME_YEAR:
        return None
    if moment.tzinfo is None:
        raise BadPayload("times must carry a time zone (RFC 3339)")
    return moment.timestamp()


def parse_notification(body: bytes, max_alerts: int) -> Notification:
    """Parse and validate a request body; BadPayload says what is wrong."""
    if not body.strip():
        raise BadPayload("empty body: expected an Alertmanager webhook payload (JSON, version 4)")
    try:
        raw: Any = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadPayload("expected a JSON object (an Alertmanager webhook payload)")
    if raw.get("version") != "4":
        raise BadPayload(
            f'version: expected "4" (Alertmanager webhook v4), got {json.dumps(raw.get("version"))[:40]}'
        )
    alerts = raw.get("alerts")
    if isinstance(alerts, list) and len(alerts) > max_alerts:
        raise BadPayload(f"alerts: {len(alerts)} alerts, more than the limit of {max_alerts}; set max_alerts")
    try:
        payload = WebhookPayload.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise BadPayload(f"{where}: {first['msg']}{more}") from None
    out: list[Alert] = []
    for i, a in enumerate(payload.alerts):
        starts = _epoch(a.startsAt)
        if starts is None:
            raise BadPayload(f"alerts.{i}.startsAt: the zero time is not a start")
        ends = _epoch(a.endsAt) if a.status == "resolved" else None
        out.append(
            Alert(a.fingerprint, a.status, starts, ends, dict(a.labels), dict(a.annotations), a.generatorURL)
        )
    return Notification(
        payload.groupKey,
        payload.receiver,
        payload.status,
        payload.truncatedAlerts,
        dict(payload.groupLabels),
        payload.externalURL,
        tuple(out),
    )
