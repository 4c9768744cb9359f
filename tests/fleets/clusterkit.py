"""Helpers of the cluster tests: where the real material is, and raw PromQL over HTTP."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "real"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def instant(url: str, promql: str, at: float) -> list[dict[str, Any]]:
    """An instant query's result, straight over HTTP (independent of signals.prometheus)."""
    params = urllib.parse.urlencode({"query": promql, "time": at})
    with _NO_PROXY.open(f"{url}/api/v1/query?{params}", timeout=30) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def value(url: str, promql: str, at: float) -> float:
    """The single value of an instant query that must return exactly one sample."""
    result = instant(url, promql, at)
    assert len(result) == 1, (promql, result)
    return float(result[0]["value"][1])


def series(url: str, match: str, start: float, end: float) -> list[dict[str, str]]:
    """The label sets of the series matching `match` over [start, end]."""
    data = urllib.parse.urlencode({"match[]": match, "start": start, "end": end}).encode()
    with _NO_PROXY.open(f"{url}/api/v1/series", data=data, timeout=30) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    found: list[dict[str, str]] = body["data"]
    return found
