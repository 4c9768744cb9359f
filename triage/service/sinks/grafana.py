"""Grafana: each group episode as one region annotation, from the diagnosis's onset to its
verdict, closed when the group resolves.

The annotation is found again by its tags: `triage-group:<the first 16 hex of the group
key's SHA-256>` and `triage-episode:<n>`. Every message looks it up first (GET
/api/annotations, those tags, `type=annotation`, the dashboard when one is configured)
and updates it with PATCH /api/annotations/:id when it exists, else adds it with POST
/api/annotations; so a repeated message (at-least-once delivery) never adds a second
annotation. A `diagnosis` or `changed` message writes the text, the tags and the region
from the onset to the verdict's instant; a `resolved` one moves its end to when the
alerts ended and tags it resolved, or, when the region was never added (the diagnosis
message was a dead letter), adds it already closed. A region once resolved keeps its end.

Requests carry the service account token as `Authorization: Bearer`, and the
organisation as `X-Grafana-Org-Id` when `org_id` is set. The text is HTML for Grafana's
tooltip (`grafana.html.j2`): every expression HTML-escaped, each template line a line.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from triage.core.escape import printable
from triage.service.sinks.escape import missing_or
from triage.service.sinks.http import Attempt, Response, exchange
from triage.service.sinks.kind import Delivery, Kind, group_key_hash, instant

TAG_CHARS = 64
"""Tags are cut to this: Grafana stores a tag's key and value in short columns."""

_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})


class GrafanaHTML(str):
    """Markup built by `link()`: the only text that reaches Grafana's tooltip unescaped."""


def grafana_escape(value: Any) -> str:
    """A value for Grafana's tooltip (sanitised HTML): escaped, one line, controls made visible."""
    return printable(" ".join(str(value).split())).translate(_HTML)


def grafana_finalize(value: Any) -> Any:
    if isinstance(value, GrafanaHTML):
        return value
    missing = missing_or(value)
    return missing if missing is not None else grafana_escape(value)


def grafana_link(url: Any, text: Any) -> GrafanaHTML:
    """`<a href="url">text</a>` for an http(s) URL; only the text otherwise."""
    target = str(url or "")
    if not target.startswith(("http://", "https://")) or any(not c.isprintable() for c in target):
        return GrafanaHTML(grafana_escape(text))
    return GrafanaHTML(f'<a href="{grafana_escape(target)}">{grafana_escape(text)}</a>')


def grafana_body(text: str, note: str | None) -> bytes:
    """The tooltip's HTML: each non-blank line of the template one line, the note last."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if note:
        lines.append(f"<i>{grafana_escape(note)}</i>")
    return "<br>\n".join(lines).encode()


def tag(value: Any) -> str:
    """A Grafana tag: one short line, no commas (tag lists are comma-separated in Grafana's UI)."""
    text = printable(" ".join(str(value).split())).replace(",", ";")
    return text if len(text) <= TAG_CHARS else text[: TAG_CHARS - 1] + "…"


def identity_tags(message: Mapping[str, Any]) -> list[str]:
    """The tags that find a group episode's annotation again."""
    return [
        f"triage-group:{group_key_hash(str(message.get('group_key', '')))[:16]}",
        f"triage-episode:{message.get('episode', 0)}",
    ]


def tags(message: Mapping[str, Any]) -> list[str]:
    """Every tag of the annotation: triage, the identity, the fleet, symptom, cause and state."""
    d = message.get("diagnosis") or {}
    out = ["triage", *identity_tags(message)]
    fleet = d.get("fleet")
    if isinstance(fleet, Mapping) and fleet:
        out.append(tag("fleet:" + "/".join(str(v) for _, v in sorted(fleet.items()))))
    elif fleet:
        out.append(tag(f"fleet:{fleet}"))
    for key in ("symptom", "cause"):
        if d.get(key):
            out.append(tag(f"{key}:{d[key]}"))
    out.append("triage-state:resolved" if message.get("kind") == "resolved" else "triage-state:firing")
    return out


def region(message: Mapping[str, Any], now: float | None = None) -> tuple[int, int]:
    """The region in epoch milliseconds: from the diagnosis's onset (else the first alert's
    start) to the verdict's instant, or, once resolved, to when the last alert ended."""
    now = time.time() if now is None else now
    d = message.get("diagnosis") or {}
    alerts: Sequence[Mapping[str, Any]] = message.get("alerts") or []
    starts = [s for s in (instant(a.get("starts_at")) for a in alerts) if s is not None]
    at = instant(d.get("at"))
    start = instant(d.get("onset")) or (min(starts) if starts else None) or at or now
    if message.get("kind") == "resolved":
        ends = [e for e in (instant(a.get("ends_at")) for a in alerts) if e is not None]
        end = max(ends) if ends else now
    else:
        end = at if at is not None else start
    return round(start * 1000), round(max(start, end) * 1000)


def _headers(delivery: Delivery) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {delivery.token}",
        "Accept": "application/json",
        "Content-Type": "application/json",
        "Idempotency-Key": delivery.key,
    }
    if delivery.sink.org_id is not None:
        headers["X-Grafana-Org-Id"] = str(delivery.sink.org_id)
    return headers


def _find(
    delivery: Delivery, base: str, headers: Mapping[str, str]
) -> tuple[Response, dict[str, Any] | None]:
    """The group episode's annotation, if Grafana has it (on the configured dashboard, or
    organisation-wide when none is)."""
    query: list[tuple[str, str]] = [("tags", t) for t in identity_tags(delivery.message)]
    query += [("type", "annotation"), ("limit", "100")]
    uid = delivery.sink.dashboard_uid
    if uid:
        query.append(("dashboardUID", uid))
    response = exchange(
        "GET",
        f"{base}/api/annotations?{urllib.parse.urlencode(query)}",
        headers=headers,
        timeout=delivery.sink.timeout,
    )
    found = response.json() if response.ok else None
    for item in found if isinstance(found, list) else ():
        if (
            isinstance(item, dict)
            and isinstance(item.get("id"), int)
            and (item.get("dashboardUID") or None) == uid
        ):
            return response, item
    return response, None


def annotate(delivery: Delivery) -> Attempt:
    """Add or update the group episode's region annotation (one attempt: a lookup, then a write)."""
    if not delivery.token:
        return Attempt(False, "no service account token", "no_token", retry=False)
    base = delivery.url.rstrip("/")
    headers = _headers(delivery)
    timeout = delivery.sink.timeout
    message = delivery.message
    text = delivery.body.decode("utf-8", "replace")
    start, end = region(message)
    labels = tags(message)
    looked, existing = _find(delivery, base, headers)
    if looked.failure is not None:
        return looked.failure
    if existing is not None:
        patch: dict[str, Any] = {"text": text, "tags": labels}
        closed = "triage-state:resolved" in (existing.get("tags") or [])
        if message.get("kind") == "resolved" or not closed:
            patch.update(time=start, timeEnd=end)
        else:  # a late `changed` never reopens a closed region
            patch["tags"] = [t for t in labels if t != "triage-state:firing"] + ["triage-state:resolved"]
        response = exchange(
            "PATCH",
            f"{base}/api/annotations/{existing['id']}",
            body=json.dumps(patch).encode(),
            headers=headers,
            timeout=timeout,
        )
        if response.failure is None:
            return Attempt(True)
        if response.status != 404:  # 404: deleted since the lookup; added again below
            return response.failure
    body: dict[str, Any] = {"time": start, "timeEnd": end, "tags": labels, "text": text}
    if delivery.sink.dashboard_uid:
        body["dashboardUID"] = delivery.sink.dashboard_uid
    response = exchange(
        "POST", f"{base}/api/annotations", body=json.dumps(body).encode(), headers=headers, timeout=timeout
    )
    return response.failure or Attempt(True)


GRAFANA = Kind(
    "grafana",
    "grafana.html.j2",
    annotate,
    body=grafana_body,
    finalize=grafana_finalize,
    functions={"link": grafana_link},
)
