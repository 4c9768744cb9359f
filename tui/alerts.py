"""Firing alerts from Alertmanager's v2 API, joined with the webhook service's annotations.

Both are plain HTTP GETs with a timeout, run in a thread worker. A server that cannot be
read becomes an error line on the Alerts tab, never an exception on screen.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from signals.timeparse import parse_instant

TIMEOUT = 5.0


@dataclass(frozen=True)
class AlertView:
    """One firing alert as the Alerts tab lists it."""

    fingerprint: str
    alertname: str
    labels: dict[str, str]
    starts_at: float | None
    state: str
    annotation: dict[str, Any] = field(default_factory=dict)

    @property
    def symptom(self) -> str:
        return self.labels.get("symptom", "")

    @property
    def cause(self) -> str:
        """The service's top cause for this alert, if it annotated it."""
        value = self.annotation.get("top_cause") or self.annotation.get("cause") or ""
        return str(value)


def _get_json(url: str, token: str | None = None) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise OSError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OSError(f"{url}: {reason}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise OSError(f"{url}: the answer is not JSON") from None


def _instant(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_instant(value)
    except ValueError:
        return None


def alertmanager_alerts(base: str) -> list[AlertView]:
    """Active, unsilenced alerts from Alertmanager's v2 API, newest first."""
    query = urllib.parse.urlencode({"active": "true", "silenced": "false", "inhibited": "false"})
    data = _get_json(f"{base.rstrip('/')}/api/v2/alerts?{query}")
    if not isinstance(data, list):
        raise OSError(f"{base}: /api/v2/alerts did not return a list")
    out = []
    for item in data:
        if not isinstance(item, dict):
            continue
        labels = {str(k): str(v) for k, v in (item.get("labels") or {}).items()}
        status = item.get("status") or {}
        out.append(
            AlertView(
                fingerprint=str(item.get("fingerprint", "")),
                alertname=labels.get("alertname", "?"),
                labels=labels,
                starts_at=_instant(item.get("startsAt")),
                state=str(status.get("state", "active")) if isinstance(status, dict) else "active",
            )
        )
    out.sort(key=lambda a: (-(a.starts_at or 0), a.alertname))
    return out


def service_annotations(base: str, token: str | None = None) -> list[dict[str, Any]]:
    """Open annotations from the webhook service (`GET /api/annotations?status=firing`)."""
    data = _get_json(f"{base.rstrip('/')}/api/annotations?status=firing", token)
    items = data.get("annotations", data.get("items", [])) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise OSError(f"{base}: /api/annotations did not return a list")
    return [i for i in items if isinstance(i, dict)]


def annotation_alerts(annotations: list[dict[str, Any]]) -> list[AlertView]:
    """Alerts known only to the service (no Alertmanager given)."""
    out = []
    for a in annotations:
        labels = {str(k): str(v) for k, v in (a.get("labels") or {}).items()}
        out.append(
            AlertView(
                fingerprint=str(a.get("fingerprint", "")),
                alertname=str(a.get("alertname") or labels.get("alertname", "?")),
                labels=labels,
                starts_at=_instant(a.get("starts_at") or a.get("startsAt")),
                state=str(a.get("status", "firing")),
                annotation=a,
            )
        )
    return out


def load_alerts(
    alertmanager: str | None, service: str | None, token: str | None = None
) -> tuple[list[AlertView], list[str]]:
    """Alertmanager's alerts with the service's annotations attached by fingerprint."""
    errors: list[str] = []
    alerts: list[AlertView] = []
    annotations: list[dict[str, Any]] = []
    if service:
        try:
            annotations = service_annotations(service, token)
        except OSError as exc:
            errors.append(f"service: {exc}")
    if alertmanager:
        try:
            alerts = alertmanager_alerts(alertmanager)
        except OSError as exc:
            errors.append(f"alertmanager: {exc}")
        by_fp = {str(a.get("fingerprint", "")): a for a in annotations}
        alerts = [
            AlertView(
                a.fingerprint, a.alertname, a.labels, a.starts_at, a.state, by_fp.get(a.fingerprint, {})
            )
            for a in alerts
        ]
    else:
        alerts = annotation_alerts(annotations)
    return alerts, errors
