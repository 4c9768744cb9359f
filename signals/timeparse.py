"""Prometheus durations (`15s`, `1h30m`) and RFC 3339 instants, as fixtures and flags write them."""

from __future__ import annotations

import datetime as dt
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_DURATION = re.compile(r"^(?:(\d+)(ms|s|m|h|d|w|y))+$")
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as `15s`, `5m` or `1h30m`; ValueError otherwise."""
    text = text.strip()
    if not _DURATION.match(text):
        raise ValueError(f"'{text}' is not a duration like 15s, 5m or 1h30m")
    return sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))


def parse_instant(value: object) -> float:
    """Epoch seconds from an RFC 3339 string, a datetime (YAML makes those) or a number."""
    if isinstance(value, bool):
        raise ValueError("expected a time, got a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return moment.timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(f"'{text}' is not an RFC 3339 time like 2026-10-14T14:00:00Z") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return moment.timestamp()
    raise ValueError(f"expected a time, got {type(value).__name__}")


def format_instant(epoch: float) -> str:
    """RFC 3339 in UTC with a Z, to the second."""
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(seconds: float) -> str:
    """A compact duration: 45s, 12m, 1h05m."""
    seconds = round(seconds)
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{sign}{seconds}s"
    if seconds < 3600:
        m, s = divmod(seconds, 60)
        return f"{sign}{m}m" if s == 0 else f"{sign}{m}m{s:02d}s"
    h, rest = divmod(seconds, 3600)
    return f"{sign}{h}h{rest // 60:02d}m"
