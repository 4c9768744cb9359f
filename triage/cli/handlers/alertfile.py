"""Reading an Alertmanager alert, or a whole webhook payload, to start a diagnosis from it.

Accepts one alert object (`labels`, `startsAt`, ...), a list of them, or an Alertmanager
webhook payload (version 4: `alerts[]` with `status`). The diagnosis starts from the
first firing alert: its labels pick the symptom, its `startsAt` is the moment diagnosed.
Unknown fields are ignored, as Alertmanager adds fields over time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from signals.errors import InputError
from signals.timeparse import parse_instant


@dataclass(frozen=True)
class AlertStart:
    """Where an alert says to start: its labels and when it started firing."""

    labels: dict[str, str]
    starts_at: float | None
    alertname: str


def _alert(path: str, where: str, raw: Any) -> AlertStart:
    if not isinstance(raw, dict):
        raise InputError(path, 1, where, "an alert is an object with labels")
    labels = raw.get("labels")
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise InputError(path, 1, f"{where}.labels", "expected an object of string labels")
    starts = raw.get("startsAt")
    starts_at = None
    if isinstance(starts, str) and starts and not starts.startswith("0001-"):
        try:
            starts_at = parse_instant(starts)
        except ValueError as exc:
            raise InputError(path, 1, f"{where}.startsAt", str(exc)) from None
    return AlertStart(dict(labels), starts_at, labels.get("alertname", ""))


def read_alert(path: str) -> AlertStart:
    """The first firing alert of an alert file; InputError names what is wrong."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise InputError(path, 0, "(file)", "no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", 1)
        raise InputError(path, line, "(document)", f"not a JSON alert or webhook payload: {exc}") from None
    except OSError as exc:
        raise InputError(path, 0, "(file)", exc.strerror or str(exc)) from None
    if isinstance(data, dict) and "alerts" in data:
        alerts = data["alerts"]
        where = "alerts"
    elif isinstance(data, list):
        alerts, where = data, "(document)"
    else:
        alerts, where = [data], "(document)"
    if not isinstance(alerts, list) or not alerts:
        raise InputError(path, 1, where, "no alert in the file")
    firing = [a for a in alerts if isinstance(a, dict) and a.get("status", "firing") == "firing"]
    chosen = firing[0] if firing else alerts[0]
    return _alert(path, f"{where}[{alerts.index(chosen)}]" if where != "(document)" else where, chosen)
