"""HTTP: the webhook intake, the read API, the annotation page and the operations endpoints.

The intake does the least it can before answering: check the credentials, read at
most `max_body_bytes`, validate, commit to the store, answer. Prometheus is never on
the request path, so the answer takes milliseconds whatever Prometheus is doing; the
workers do the rest. Bad input is a 4xx that says what is wrong and stores nothing:
Alertmanager retries a 5xx every group_interval forever, and a 4xx never.
Credentials are compared in constant time and never echoed; a token in the query
string is not a credential.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from signals.timeparse import format_instant, parse_instant
from triage import __version__
from triage.service.messages import annotation_url
from triage.service.payload import BadPayload, WebhookAlert, WebhookPayload, parse_notification
from triage.service.runtime import Service
from triage.service.store.backend import Row

_LOG = logging.getLogger("triage.service")


def _payload_schema() -> dict[str, Any]:
    """The v4 payload's JSON schema with its alert model inlined (OpenAPI has no `$defs` root)."""
    schema = WebhookPayload.model_json_schema()
    schema.pop("$defs", None)
    schema["properties"]["alerts"]["items"] = WebhookAlert.model_json_schema()
    return schema


READY_STORE_TIMEOUT = 2.0
"""Seconds `/readyz` waits for its write probe: a probe must answer within its own timeout."""

STORE_RETRY_AFTER = 5
"""Seconds a 503 from the intake asks the sender to wait (Alertmanager keeps its own backoff)."""

_RETRY_LATER = {"Retry-After": str(STORE_RETRY_AFTER)}


def _problem(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def _authorized(service: Service, request: Request) -> bool:
    secrets = service.secrets
    if not secrets.auth_required:
        return True
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and secrets.bearer_token is not None:
        return hmac.compare_digest(value.encode(), secrets.bearer_token.encode())
    if scheme.lower() == "basic" and secrets.basic_auth is not None:
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        want_user, want_password = secrets.basic_auth
        return hmac.compare_digest(user.encode(), want_user.encode()) & hmac.compare_digest(
            password.encode(), want_password.encode()
        )
    return False


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None once it passes `limit` bytes (read no further)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _row_json(row: Row, public_url: str | None, full: bool) -> dict[str, Any]:
    ends = row["ends_at"]
    out: dict[str, Any] = {
        "id": row["id"],
        "fingerprint": row["fingerprint"],
        "alertname": row["alertname"],
        "group_key": row["group_key"],
        "status": row["status"],
        "starts_at": format_instant(row["starts_at"]),
        "ends_at": format_instant(ends) if ends is not None else None,
        "duration_seconds": round(ends - row["starts_at"], 3) if ends is not None else None,
        "state": row["state"],
        "symptom": row["symptom"],
        "cause": row["cause"],
        "signals": row["signals"],
        "scope": row["scope"],
        "seen": row["seen"],
        "first_seen": format_instant(row["first_seen"]),
        "last_seen": format_instant(row["last_seen"]),
        "truncated_alerts": row["truncated"],
        "labels": json.loads(row["labels"]),
        "url": annotation_url(public_url, row["id"]) or f"/annotations/{row['id']}",
    }
    if full:
        out["annotations"] = json.loads(row["annotations"])
        out["generator_url"] = row["generator_url"]
        out["annotated_at"] = format_instant(row["annotated_at"]) if row["annotated_at"] else None
        out["summary"] = row["summary"]
        out["diagnosis"] = json.loads(row["diagnosis"]) if row["diagnosis"] else None
    return out


def _instant(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value) if value.replace(".", "", 1).isdigit() else parse_instant(value)
    except ValueError as exc:
        raise BadPayload(f"{name}: {exc}") from None


def create_app(service: Service, *, manage: bool = True) -> FastAPI:
    """The ASGI app; with `manage`, its lifespan starts and drains the service."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage:
            service.start()
        try:
            yield
        finally:
            if manage:
                await run_in_threadpool(service.stop)

    app = FastAPI(
        title="llm-triage webhook service",
        version=__version__,
        description="Receives Alertmanager webhooks, diagnoses each alert group in the background, "
        "stores one annotation per alert episode, and delivers one message per group event to sinks.",
        lifespan=lifespan,
    )
    config = service.config

    async def store_unavailable(request: Request, exc: Exception) -> Response:
        _LOG.warning("cannot read the store for %s (%s)", request.url.path, type(exc).__name__)
        return _problem(503, "the store cannot be reached now; retry", **_RETRY_LATER)

    for error in service.store.backend.unavailable:
        app.add_exception_handler(error, store_unavailable)  # type: ignore[arg-type]

    @app.post(
        "/api/alertmanager",
        summary="Alertmanager webhook intake (payload version 4)",
        openapi_extra={
            "requestBody": {"required": True, "content": {"application/json": {"schema": _payload_schema()}}}
        },
        responses={
            200: {"description": "stored; diagnosis follows in the background"},
            400: {"description": "not a v4 webhook payload"},
            401: {"description": "missing or wrong credentials"},
            413: {"description": "body or alert count over the limits"},
            503: {"description": "the store cannot commit now; retry (Retry-After)"},
        },
    )
    async def intake(request: Request) -> Response:
        if not _authorized(service, request):
            service.metrics.inc("triage_webhook_requests_total", outcome="unauthorized")
            return _problem(
                401, "missing or wrong credentials", **{"WWW-Authenticate": 'Bearer realm="triage"'}
            )
        body = await _read_capped(request, config.limits.max_body_bytes)
        if body is None:
            service.metrics.inc("triage_webhook_requests_total", outcome="too_large")
            return _problem(
                413,
                f"body larger than {config.limits.max_body_bytes} bytes; "
                "set max_alerts on the Alertmanager webhook_config",
            )
        try:
            note = await run_in_threadpool(parse_notification, body, config.limits.max_alerts)
        except BadPayload as exc:
            too_many = str(exc).startswith("alerts:") and "more than the limit" in str(exc)
            service.metrics.inc(
                "triage_webhook_requests_total", outcome="too_many" if too_many else "bad_payload"
            )
            _LOG.info("rejected a webhook: %s", str(exc)[:300])
            return _problem(413 if too_many else 400, str(exc)[:1000])
        except Exception as exc:  # anything a hostile body provokes is still the body's fault
            service.metrics.inc("triage_webhook_requests_total", outcome="bad_payload")
            return _problem(400, f"unreadable payload ({type(exc).__name__})")
        try:
            result = await run_in_threadpool(service.accept, note)
        except service.store.backend.unavailable as exc:
            # Nothing is acknowledged unstored: Alertmanager retries a 5xx, another replica
            # or this one once the store is back.
            service.metrics.inc("triage_webhook_requests_total", outcome="store_unavailable")
            _LOG.warning("cannot commit a notification (%s): answered 503", type(exc).__name__)
            return _problem(
                503,
                "the store cannot commit the notification now; retry",
                **_RETRY_LATER,
            )
        service.metrics.inc("triage_webhook_requests_total", outcome="accepted")
        return JSONResponse(
            {
                "status": "accepted",
                "alerts": result.alerts,
                "new": result.new,
                "duplicates": result.duplicates,
                "resolved": result.resolved,
                "heartbeats": result.heartbeats,
            }
        )

    @app.get("/api/annotations", summary="Alert episodes and their diagnoses, newest first")
    def list_annotations(
        status: str | None = Query(None, description="firing or resolved"),
        alertname: str | None = None,
        symptom: str | None = None,
        cause: str | None = None,
        state: str | None = Query(None, description="pending, annotated or unavailable"),
        since: str | None = Query(None, description="alerts that started at or after (RFC 3339 or epoch)"),
        until: str | None = Query(None, description="alerts that started at or before"),
        limit: int = Query(100, ge=1, le=1000),
        offset: int = Query(0, ge=0),
    ) -> Response:
        try:
            rows = service.store.annotations(
                status=status,
                alertname=alertname,
                symptom=symptom,
                cause=cause,
                state=state,
                since=_instant(since, "since"),
                until=_instant(until, "until"),
                limit=limit,
                offset=offset,
            )
        except BadPayload as exc:
            return _problem(400, str(exc))
        return JSONResponse({"annotations": [_row_json(r, config.public_url, False) for r in rows]})

    @app.get(
        "/api/annotations/{annotation_id}", summary="One alert episode with its diagnosis (VOCABULARY JSON)"
    )
    def get_annotation(annotation_id: int) -> Response:
        row = service.store.annotation(annotation_id)
        if row is None:
            return _problem(404, f"no annotation {annotation_id}")
        return JSONResponse(_row_json(row, config.public_url, True))

    @app.get("/annotations/{annotation_id}", response_class=HTMLResponse, summary="The annotation as a page")
    def annotation_page(annotation_id: int) -> Response:
        row = service.store.annotation(annotation_id)
        if row is None:
            return HTMLResponse("<!doctype html><p>No such annotation.</p>", status_code=404)
        data = _row_json(row, config.public_url, True)
        data["truncated"] = data["truncated_alerts"]
        return HTMLResponse(service.renderer.page({"a": data, "d": data["diagnosis"]}))

    @app.get("/api/deliveries", summary="Sink messages: pending, delivered and dead letters")
    def deliveries(state: str | None = Query(None, description="pending, delivered or dead")) -> Response:
        rows = service.store.outbox(state)
        out = []
        for r in rows:
            item = dict(r)
            for key in ("next_at", "created_at", "delivered_at"):
                item[key] = format_instant(item[key]) if item[key] else None
            out.append(item)
        return JSONResponse({"deliveries": out})

    @app.get("/healthz", summary="The process is alive")
    def healthz() -> Response:
        return JSONResponse({"status": "ok"})

    @app.get("/readyz", summary="Store writable and playbooks loaded; Prometheus and heartbeat reported")
    def readyz() -> Response:
        writable = service.store.writable(timeout=READY_STORE_TIMEOUT)
        loaded = bool(service.graph.knowledge.causes)
        try:
            reachable: bool | None = service.prometheus_reachable()
        except Exception:
            reachable = False
        beat = service.store.heartbeat_last_seen() if writable else None
        ready = writable and loaded
        body = {
            "ready": ready,
            "store_writable": writable,
            "playbooks_loaded": loaded,
            "prometheus_reachable": reachable,
            "heartbeat": {
                "alertname": config.heartbeat_alertname,
                "last_seen": format_instant(beat) if beat is not None else None,
                "age_seconds": round(time.time() - beat, 3) if beat is not None else None,
                "max_age_seconds": config.heartbeat_max_age,
                "stale": service.heartbeat_stale() if writable else None,
            },
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus text exposition")
    def metrics() -> Response:
        # The counters are the process's own: a scrape while the store is down still gets
        # them, with `triage_store_up 0` and without the gauges read from the store.
        values = {"triage_ready": 1.0 if service.graph.knowledge.causes else 0.0, "triage_store_up": 0.0}
        try:
            gauges = service.store.gauges()
            beat = service.store.heartbeat_last_seen()
            stale = service.heartbeat_stale()
        except service.store.backend.unavailable:
            gauges = None
        if gauges is not None:
            values |= {
                "triage_store_up": 1.0,
                "triage_backlog": gauges["work_pending"],
                "triage_annotations_pending": gauges["annotations_pending"],
                "triage_annotations_unavailable": gauges["annotations_unavailable"],
                "triage_annotations": gauges["annotations_total"],
                "triage_alert_groups": gauges["groups_total"],
                "triage_outbox_pending": gauges["outbox_pending"],
                "triage_dead_letters": gauges["outbox_dead"],
                "triage_heartbeat_last_seen_timestamp_seconds": beat or 0.0,
                "triage_heartbeat_stale": 1.0 if stale else 0.0,
            }
        return PlainTextResponse(
            service.metrics.render(values), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    return app
