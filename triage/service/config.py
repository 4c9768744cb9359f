"""The service's settings: one YAML file, the common ones also as flags, validated once at start.

A receiver that starts with a typo in its sink URL or an unreadable token file would
accept alerts and then fail quietly at 3 a.m., so every problem is found before the
port opens and printed like a playbook problem (`file:line: key: message`, or
`--flag: message` for a value given on the command line). Unknown keys are errors.
Secrets (the intake token, basic-auth password, Prometheus token, sink URLs, which
carry a secret for Slack) are read from files or the environment, kept out of `repr`,
and never echoed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from signals.errors import InputError, InputErrors
from signals.fleets import DEFAULT_FLEET_LABELS
from signals.secret import SecretFileError, read_secret
from signals.timeparse import parse_duration
from signals.vocabulary import DEFAULT_MAX_SERIES
from signals.yamldoc import Document, read_yaml
from triage.core.model import AUTO, SYMPTOMS
from triage.service.command import PROMETHEUS_TOKEN_ENV, TOKEN_ENV
from triage.service.store.backend import is_database_url

_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_LISTEN = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]*):(?P<port>[0-9]{1,5})$")


def _duration(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30s or 5m")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_duration(value)
    else:
        raise ValueError("expected a duration like 30s or 5m")
    if not seconds > 0:
        raise ValueError("must be longer than zero")
    return seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BasicAuth(_Strict):
    """Basic auth as Alertmanager's `http_config.basic_auth` sends it; the password from a file."""

    username: str = Field(min_length=1)
    password_file: str


class AuthSettings(_Strict):
    """How Alertmanager proves itself: a bearer token, basic auth, or both accepted."""

    bearer_token_file: str | None = None
    basic_auth: BasicAuth | None = None


class Limits(_Strict):
    """Bounds on what one request may make the service do (413 beyond them, never 5xx)."""

    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    max_alerts: int = Field(5000, ge=1)
    max_label_chars: int = Field(512, ge=16)


class PrometheusSettings(_Strict):
    """Where the signals come from; `timeout` bounds one whole fetch round."""

    url: str | None = None
    timeout: float = 10.0
    lookback: float = 7200.0
    step: float = 30.0
    selector: str = ""
    replica_label: str = "instance"
    fleet_labels: tuple[str, ...] = DEFAULT_FLEET_LABELS
    catalog: tuple[str, ...] = ()
    token_file: str | None = None
    retry_unavailable: float = 30.0
    coalesce: float = 300.0
    max_concurrent_fetches: int = Field(1, ge=1, le=32)
    max_series: int = Field(DEFAULT_MAX_SERIES, ge=0)
    """Series kept per range query (a histogram's buckets count once); 0: no cap."""

    @field_validator("timeout", "lookback", "step", "retry_unavailable", "coalesce", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> float:
        return _duration(value)

    @field_validator("fleet_labels", mode="before")
    @classmethod
    def _fleet_labels(cls, value: Any) -> Any:
        """A list, or `a,b` as the flag gives it; empty turns fleet scoping off."""
        labels = [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else value
        if isinstance(labels, list | tuple):
            for label in labels:
                if not isinstance(label, str) or not _LABEL.match(label):
                    raise ValueError(f"'{label}' is not a label name")
        return labels

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("not an http:// or https:// URL")
        return value


SinkKind = Literal["webhook", "slack", "pagerduty", "opsgenie", "teams", "grafana"]

API_SINKS = frozenset({"pagerduty", "opsgenie", "grafana"})
"""Sinks that call a service's API with a token (`token_file`); the others post to a URL
that is itself the secret."""


class SinkSettings(_Strict):
    """One destination for group messages: a JSON webhook, Slack, Teams, or an API
    (PagerDuty, Opsgenie, Grafana) that the diagnosis is written into."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    kind: SinkKind
    url: str | None = Field(None, repr=False)
    """The webhook URL; for an API sink its base URL (PagerDuty's and Opsgenie's have defaults)."""
    url_file: str | None = None
    token_file: str | None = None
    """An API sink's token: PagerDuty's REST API key, Opsgenie's API key, a Grafana service account's."""
    from_email: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+$")
    """PagerDuty: the user the notes are written as (its REST API's `From` header)."""
    region: Literal["us", "eu"] = "us"
    """Opsgenie: the API host (api.opsgenie.com or api.eu.opsgenie.com) when `url` is not given."""
    org_id: int | None = Field(None, ge=1)
    """Grafana: the organisation the annotations go to (its `X-Grafana-Org-Id`)."""
    dashboard_uid: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,40}$")
    """Grafana: the one dashboard the annotations are on; none: organisation-wide."""
    retry_window: float = 600.0
    """PagerDuty and Opsgenie: how long a note waits for its incident or alert to exist."""
    template: str | None = None
    max_alerts_listed: int = Field(10, ge=1, le=1000)
    max_tries: int = Field(10, ge=1, le=1000)
    backoff: float = 1.0
    max_backoff: float = 300.0
    timeout: float = 10.0

    @field_validator("backoff", "max_backoff", "timeout", "retry_window", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> float:
        return _duration(value)

    @model_validator(mode="after")
    def _one_url(self) -> SinkSettings:
        if self.url is not None and self.url_file is not None:
            raise ValueError("give one of url and url_file, not both")
        if self.url is None and self.url_file is None and self.kind not in DEFAULT_URLS:
            raise ValueError(f"a {self.kind} sink needs url or url_file")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url: not an http:// or https:// URL")
        if (self.token_file is not None) != (self.kind in API_SINKS):
            raise ValueError(
                f"a {self.kind} sink needs token_file"
                if self.kind in API_SINKS
                else f"token_file is for {', '.join(sorted(API_SINKS))} sinks"
            )
        if self.kind == "pagerduty" and self.from_email is None:
            raise ValueError(
                "a pagerduty sink needs from_email (the PagerDuty user its notes are written as)"
            )
        return self

    def base_url(self, configured: str | None) -> str:
        """The URL to use: the one configured, else the kind's default (Opsgenie's by `region`)."""
        if configured:
            return configured
        default = DEFAULT_URLS[self.kind]
        return default if isinstance(default, str) else default[self.region]


DEFAULT_URLS: Mapping[str, str | Mapping[str, str]] = {
    "pagerduty": "https://api.pagerduty.com",
    "opsgenie": {"us": "https://api.opsgenie.com", "eu": "https://api.eu.opsgenie.com"},
}


class ServiceConfig(_Strict):
    """Everything `triage serve` reads at start; see docs/serve.md for each key."""

    listen: str = "127.0.0.1:9095"
    store: str = "triage.db"
    store_sync: Literal["normal", "full"] = "normal"
    store_timeout: float = Field(5.0, gt=0, le=60)
    """PostgreSQL: the longest a store transaction may take before it fails (the intake answers 503)."""
    store_lease: float = Field(60.0, ge=1, le=3600)
    """How long a claim on work or on a message holds unrenewed (another replica takes it on after)."""
    playbooks: str | None = None
    templates: str | None = None
    workers: int = Field(4, ge=1, le=64)
    diagnosis_processes: int = Field(1, ge=0, le=32)
    heartbeat_alertname: str = "Watchdog"
    heartbeat_max_age: float | None = None
    public_url: str | None = None
    auth: AuthSettings = Field(default_factory=AuthSettings)
    limits: Limits = Field(default_factory=Limits)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    alert_symptoms: dict[str, str] = Field(default_factory=dict)
    sinks: tuple[SinkSettings, ...] = ()

    @field_validator("heartbeat_max_age", mode="before")
    @classmethod
    def _max_age(cls, value: Any) -> float | None:
        return None if value is None else _duration(value)

    @field_validator("store_timeout", "store_lease", mode="before")
    @classmethod
    def _store_durations(cls, value: Any) -> float:
        return _duration(value)

    @field_validator("store")
    @classmethod
    def _store(cls, value: str) -> str:
        if is_database_url(value) and urlsplit(value).password is not None:
            raise ValueError(
                "a password in the store URL would show in `ps` and in logs; "
                "give it in PGPASSWORD or a ~/.pgpass file instead"
            )
        return value

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        match = _LISTEN.match(value)
        if not match or not 0 <= int(match["port"]) <= 65535:
            raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:9095 or :9095")
        return value

    @field_validator("alert_symptoms")
    @classmethod
    def _symptoms(cls, value: dict[str, str]) -> dict[str, str]:
        for name, symptom in value.items():
            if symptom not in (*SYMPTOMS, AUTO):
                raise ValueError(f"{name}: unknown symptom '{symptom}'; choose one of {', '.join(SYMPTOMS)}")
        return value

    @model_validator(mode="after")
    def _unique_sinks(self) -> ServiceConfig:
        names = [s.name for s in self.sinks]
        if len(names) != len(set(names)):
            raise ValueError("sink names must be unique (they key the delivery log)")
        return self

    @property
    def host(self) -> str:
        host = self.listen.rsplit(":", 1)[0].strip("[]")
        return host or "0.0.0.0"

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


@dataclass(frozen=True)
class Secrets:
    """The secret values, read once at start; `repr` never shows them."""

    bearer_token: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    prometheus_token: str | None = field(default=None, repr=False)
    sink_urls: Mapping[str, str] = field(default_factory=dict, repr=False)
    sink_tokens: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def auth_required(self) -> bool:
        return self.bearer_token is not None or self.basic_auth is not None


@dataclass(frozen=True)
class Loaded:
    """A validated configuration and its secrets."""

    config: ServiceConfig
    secrets: Secrets


_FLAG_PATHS: dict[str, tuple[str, ...]] = {
    "listen": ("listen",),
    "store": ("store",),
    "store_sync": ("store_sync",),
    "store_lease": ("store_lease",),
    "store_timeout": ("store_timeout",),
    "playbooks": ("playbooks",),
    "templates": ("templates",),
    "workers": ("workers",),
    "diagnosis_processes": ("diagnosis_processes",),
    "heartbeat": ("heartbeat_alertname",),
    "heartbeat_max_age": ("heartbeat_max_age",),
    "public_url": ("public_url",),
    "prometheus": ("prometheus", "url"),
    "prometheus_timeout": ("prometheus", "timeout"),
    "prometheus_token_file": ("prometheus", "token_file"),
    "selector": ("prometheus", "selector"),
    "replica_label": ("prometheus", "replica_label"),
    "fleet_labels": ("prometheus", "fleet_labels"),
    "lookback": ("prometheus", "lookback"),
    "step": ("prometheus", "step"),
    "coalesce": ("prometheus", "coalesce"),
    "max_concurrent_fetches": ("prometheus", "max_concurrent_fetches"),
    "token_file": ("auth", "bearer_token_file"),
    "max_body_bytes": ("limits", "max_body_bytes"),
    "max_alerts": ("limits", "max_alerts"),
}


def _flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def load_config(
    path: str | None,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Loaded:
    """Read the YAML file (if any), apply the flags over it, validate, and read the secrets.

    `flags` maps flag destinations (`listen`, `prometheus`, `token_file`, ...) to the
    values given; None means not given. Also understood: `token` (the bearer token
    itself), `sink_webhook` and `sink_slack` (lists of URLs, added as sinks) and
    `alert_symptom` (a list of `ALERTNAME=SYMPTOM`). Raises InputErrors naming every problem.
    """
    env = os.environ if env is None else env
    flags = dict(flags or {})
    doc = read_yaml(path) if path else Document("(flags)", {})
    if doc.data is None:
        doc = Document(doc.source, {}, doc.lines)
    if not isinstance(doc.data, dict):
        raise InputErrors([doc.error((), "expected a mapping of settings")])
    data: dict[str, Any] = {k: v for k, v in doc.data.items()}
    from_flag: dict[tuple[str | int, ...], str] = {}
    for key, target in _FLAG_PATHS.items():
        value = flags.get(key)
        if value is not None:
            _set(data, target, value)
            from_flag[target] = _flag_name(key)
    sinks = list(data.get("sinks") or []) if isinstance(data.get("sinks", []), list) else data["sinks"]
    for kind in ("webhook", "slack"):
        for i, url in enumerate(flags.get(f"sink_{kind}") or []):
            if isinstance(sinks, list):
                from_flag[("sinks", len(sinks))] = f"--sink-{kind}"
                sinks.append({"name": f"{kind}-{i + 1}", "kind": kind, "url": url})
    if sinks != data.get("sinks") and isinstance(sinks, list):
        data["sinks"] = sinks
    pairs = flags.get("alert_symptom") or []
    if pairs:
        mapping = (
            dict(data.get("alert_symptoms") or {}) if isinstance(data.get("alert_symptoms"), dict) else {}
        )
        for pair in pairs:
            name, sep, symptom = str(pair).partition("=")
            if not sep or not name:
                raise InputErrors(
                    [InputError("(flags)", 0, "--alert-symptom", f"expected ALERTNAME=SYMPTOM, got '{pair}'")]
                )
            mapping[name] = symptom
        data["alert_symptoms"] = mapping
        from_flag[("alert_symptoms",)] = "--alert-symptom"
    try:
        config = ServiceConfig.model_validate(data)
    except ValidationError as exc:
        raise InputErrors(_problems(doc, exc, from_flag)) from None
    return Loaded(config, _secrets(doc, config, flags, env))


def _problems(
    doc: Document, exc: ValidationError, from_flag: Mapping[tuple[str | int, ...], str]
) -> list[InputError]:
    out: list[InputError] = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if isinstance(p, str | int))
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        flag = next((f for p, f in from_flag.items() if loc[: len(p)] == p), None)
        if flag is not None:
            out.append(InputError("(flags)", 0, flag, message))
        else:
            out.append(doc.error(loc, message))
    return out


def _secrets(
    doc: Document, config: ServiceConfig, flags: Mapping[str, Any], env: Mapping[str, str]
) -> Secrets:
    problems: list[InputError] = []

    def read(path: str, where: tuple[str | int, ...], flag: str | None) -> str | None:
        try:
            return read_secret(path, flag or ".".join(map(str, where)))
        except SecretFileError as exc:
            problems.append(
                InputError("(flags)", 0, flag, str(exc).split(": ", 1)[1])
                if flag
                else doc.error(where, str(exc).split(": ", 1)[1])
            )
            return None

    token: str | None = flags.get("token") or None
    if token is None and config.auth.bearer_token_file:
        token = read(
            config.auth.bearer_token_file,
            ("auth", "bearer_token_file"),
            "--token-file" if flags.get("token_file") else None,
        )
    if token is None:
        token = env.get(TOKEN_ENV) or None
    basic: tuple[str, str] | None = None
    if config.auth.basic_auth is not None:
        password = read(config.auth.basic_auth.password_file, ("auth", "basic_auth", "password_file"), None)
        if password is not None:
            basic = (config.auth.basic_auth.username, password)
    prom_token: str | None = None
    if config.prometheus.token_file:
        prom_token = read(
            config.prometheus.token_file,
            ("prometheus", "token_file"),
            "--prometheus-token-file" if flags.get("prometheus_token_file") else None,
        )
    elif env.get(PROMETHEUS_TOKEN_ENV):
        prom_token = env[PROMETHEUS_TOKEN_ENV]
    urls: dict[str, str] = {}
    tokens: dict[str, str] = {}
    for i, sink in enumerate(config.sinks):
        if sink.url is not None:
            urls[sink.name] = sink.url
        elif sink.url_file is not None:
            url = read(sink.url_file, ("sinks", i, "url_file"), None)
            if url is not None:
                if not url.startswith(("http://", "https://")):
                    problems.append(
                        doc.error(("sinks", i, "url_file"), "the file does not hold an http(s) URL")
                    )
                urls[sink.name] = url
        if sink.token_file is not None:
            sink_token = read(sink.token_file, ("sinks", i, "token_file"), None)
            if sink_token is not None:
                tokens[sink.name] = sink_token
    if token is not None and (token != token.strip() or any(ord(c) < 33 for c in token)):
        problems.append(
            InputError("(flags)", 0, "--token", "the token contains whitespace or control characters")
        )
    if problems:
        raise InputErrors(problems)
    return Secrets(token, basic, prom_token, urls, tokens)
