"""Prometheus rules for a fleet: the vocabulary recorded once, alerts on what was recorded.

Two groups. `triage-signals` records every vocabulary signal that has a source in the
catalog, as `triage:<signal>` (the fleet's view) and `triage:<signal>:replica` (per
replica, keeping the replica label), each the `or` of all the signal's sources in
catalog order: the first flavour that answers wins, so one rule file serves vLLM V1,
V0, a 0.9-0.11 fleet exposing old and new names, and SGLang. `triage-alerts` reads only
those recorded series, so the alerts never depend on an exporter's naming, and each
alert says where the diagnosis starts (`symptom`, a vocabulary id) and how loud it is.

The thresholds come from an SLO file (`load_slo`; the bundled `slo_defaults.yaml`
documents every key). Latency alerts are P99, TTFT and TPOT apart, never the mean: an
SLA on the mean is one of the project's forbidden actions (`average_latency_sla`).

`render_rules` is pure (no IO, deterministic); `load_slo` is the only function that
reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from signals.catalog import BUNDLED, Catalog, QueryOptions, render
from signals.errors import InputError, InputErrors
from signals.timeparse import parse_duration
from signals.vocabulary import suggest
from signals.yamldoc import Document, read_yaml
from triage.core.model import SYMPTOMS

SLO_DEFAULTS = Path(__file__).resolve().parent / "slo_defaults.yaml"
RECORD_PREFIX = "triage:"
REPLICA_SUFFIX = ":replica"
SIGNAL_GROUP = "triage-signals"
ALERT_GROUP = "triage-alerts"
VALUE = '{{ $value | printf "%.3g" }}'
"""How an annotation shows a latency or ratio: three significant digits (Go's %g, as Python's)."""
COUNT = "{{ $value | humanize }}"
"""How an annotation shows a count or an amount that can run into thousands: 1.234k, not 1.23e+03."""

# Exactly what Prometheus accepts: units largest first, each at most once.
_PROM_DURATION = re.compile(r"^(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$")


def _duration(text: str) -> str:
    if not text or not _PROM_DURATION.match(text):
        raise ValueError(f"'{text}' is not a Prometheus duration like 30s, 5m, 1h30m or 1d")
    return text


def _positive_duration(text: str) -> str:
    _duration(text)
    if parse_duration(text) <= 0:
        raise ValueError("must be longer than zero")
    return text


Duration = Annotated[str, AfterValidator(_duration)]
Window = Annotated[str, AfterValidator(_positive_duration)]
Severity = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$")]


class _Strict(BaseModel):
    """Strict on purpose: a typo in an SLO file must not silently keep a default threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class _Alerting(_Strict):
    for_: Duration = Field(alias="for", description="how long the condition holds before it fires")
    severity: Severity


class LatencySlo(_Alerting):
    """A P99 latency SLO (TTFT or TPOT): fire while the fleet's P99 is above it."""

    p99_seconds: float = Field(gt=0)


class RatioSlo(_Alerting):
    """A share of requests (failed, rejected): fire above `ratio`."""

    ratio: float = Field(gt=0, le=1)


class QueueGrowthSlo(_Alerting):
    """The queue against its own past: `factor` times and `min_increase` more than `baseline` ago."""

    factor: float = Field(gt=1)
    min_increase: float = Field(ge=0)
    window: Window
    baseline: Window


class KvNearFullSlo(_Alerting):
    """KV use (median over `window`) at or above `ratio` on a replica that is preempting."""

    ratio: float = Field(gt=0, le=1)
    window: Window
    min_preemption_rate: float = Field(ge=0)


class PrefixHitDropSlo(_Alerting):
    """The hit ratio under `factor` times its value `baseline` ago (when that was above `min_baseline`)."""

    factor: float = Field(gt=0, lt=1)
    baseline: Window
    min_baseline: float = Field(ge=0, lt=1)


class GpuEventSlo(_Strict):
    """A GPU fault: fires at once and holds for `hold`, as the faulty GPU's series may vanish."""

    hold: Window
    severity: Severity


class ReplicasSlo(_Alerting):
    """Ready replicas at least `min_missing` below the desired count."""

    min_missing: int = Field(ge=1)


class SpendJumpSlo(_Alerting):
    """Spend per hour above `factor` times its value `baseline` ago."""

    factor: float = Field(gt=1)
    baseline: Window


class Slo(_Strict):
    """Every threshold the alert rules use; see `slo_defaults.yaml` for what each key means."""

    schema_version: Literal[1]
    ttft: LatencySlo
    tpot: LatencySlo
    error_ratio: RatioSlo
    rejected_ratio: RatioSlo
    queue_growth: QueueGrowthSlo
    kv_near_full: KvNearFullSlo
    prefix_hit_drop: PrefixHitDropSlo
    gpu_xid: GpuEventSlo
    gpu_ecc: GpuEventSlo
    replicas: ReplicasSlo
    spend_jump: SpendJumpSlo


def _merge(base: Any, override: Any) -> Any:
    """The override on top of the defaults, mapping by mapping; anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    return override


def _allowed(defaults: Any, path: tuple[Any, ...]) -> list[str]:
    node = defaults
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return []
        node = node[part]
    return [str(k) for k in node] if isinstance(node, dict) else []


def _validate(doc: Document, data: Any, defaults: Any) -> Slo:
    """Validate merged data; every problem is located in `doc`, the file the person wrote."""
    try:
        return Slo.model_validate(data)
    except ValidationError as exc:
        problems: list[InputError] = []
        for err in exc.errors():
            path = tuple("for" if p == "for_" else p for p in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                allowed = _allowed(defaults, path[:-1])
                message = f"unknown key{suggest(str(path[-1]), allowed)}; allowed: {', '.join(allowed)}"
            elif err["type"] == "model_type":
                message = f"expected a mapping of {', '.join(_allowed(defaults, path))}"
            problems.append(doc.error(path, message))
        raise InputErrors(problems) from None


def load_slo(path: str | None = None) -> Slo:
    """The bundled defaults, with the file at `path` (if any) on top; InputErrors names file and line."""
    defaults = read_yaml(str(SLO_DEFAULTS))
    if path is None:
        return _validate(defaults, defaults.data, defaults.data)
    doc = read_yaml(path)
    if not isinstance(doc.data, dict):
        raise InputErrors([doc.error((), "an SLO file is a mapping, like the bundled slo_defaults.yaml")])
    return _validate(doc, _merge(defaults.data, doc.data), defaults.data)


def _num(value: float) -> str:
    """A threshold as PromQL and people write it: 1, 0.05, 1.3."""
    return f"{value:.12g}"


@dataclass(frozen=True)
class _Views:
    """Which recorded series exist: the fleet view and the per-replica view, by signal."""

    fleet: frozenset[str]
    replica: frozenset[str]

    def has(self, signal: str, view: str) -> bool:
        return signal in (self.replica if view == "replica" else self.fleet)


def _name(signal: str, view: str) -> str:
    return RECORD_PREFIX + signal + (REPLICA_SUFFIX if view == "replica" else "")


def _recording_rules(catalog: Catalog, options: QueryOptions) -> tuple[list[dict[str, str]], _Views]:
    rules: list[dict[str, str]] = []
    views: dict[str, set[str]] = {"fleet": set(), "replica": set()}
    for signal, sources in catalog.sources.items():
        for view in ("fleet", "replica"):
            queries: list[str] = []
            for source in sources:
                template = source.fleet if view == "fleet" else source.replica
                if template is not None:
                    query = render(template, options)
                    if query not in queries:
                        queries.append(query)
            if not queries:
                continue
            expr = queries[0] if len(queries) == 1 else " or ".join(f"({q})" for q in queries)
            rules.append({"record": _name(signal, view), "expr": expr})
            views[view].add(signal)
    return rules, _Views(frozenset(views["fleet"]), frozenset(views["replica"]))


@dataclass(frozen=True)
class _Alert:
    name: str
    symptom: str
    severity: str
    expr: str
    for_: str | None
    summary: str
    description: str

    def rule(self) -> dict[str, Any]:
        if self.symptom not in SYMPTOMS:  # pragma: no cover - a programming error, caught by the tests
            raise ValueError(f"{self.name}: '{self.symptom}' is not a vocabulary symptom")
        out: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.for_ is not None:
            out["for"] = self.for_
        out["labels"] = {"symptom": self.symptom, "severity": self.severity}
        out["annotations"] = {"summary": self.summary, "description": self.description}
        return out


def _pick(views: _Views, signals: tuple[str, ...], prefer: tuple[str, ...]) -> str | None:
    """The first view, in order of preference, recorded for every one of `signals`."""
    return next((v for v in prefer if all(views.has(s, v) for s in signals)), None)


def _where(view: str, label: str, what: str = "") -> str:
    """Where an annotation says it happened: the replica (and the GPU label `what`), or the fleet."""
    if view != "replica":
        return " across the fleet"
    gpu = " GPU {{ $labels." + what + " }}" if what else ""
    return " on {{ $labels." + label + " }}" + gpu


def _alerts(slo: Slo, views: _Views, label: str) -> tuple[list[_Alert], list[str]]:
    """Every alert whose signals are recorded, and the names of those that are not."""
    out: list[_Alert] = []
    skipped: list[str] = []
    fleet_first = ("fleet",)
    replica_first = ("replica", "fleet")

    def need(name: str, signals: tuple[str, ...], prefer: tuple[str, ...]) -> str | None:
        view = _pick(views, signals, prefer)
        if view is None:
            skipped.append(f"{name} (no source for {', '.join(signals)})")
        return view

    if need("TTFTP99High", ("ttft_p99_seconds",), fleet_first):
        s = slo.ttft
        out.append(
            _Alert(
                "TTFTP99High",
                "ttft_slow",
                s.severity,
                f"triage:ttft_p99_seconds > {_num(s.p99_seconds)}",
                s.for_,
                f"TTFT P99 is {VALUE}s, over the {_num(s.p99_seconds)}s SLO",
                f"The fleet's P99 time to first token has been above {_num(s.p99_seconds)}s for {s.for_}. "
                "Triage from ttft_slow: split queueing (queue depth, queue time) from prefill "
                "(prompt length, prefix hit ratio) before touching capacity.",
            )
        )
    if need("TPOTP99High", ("tpot_p99_seconds",), fleet_first):
        s = slo.tpot
        out.append(
            _Alert(
                "TPOTP99High",
                "tpot_slow",
                s.severity,
                f"triage:tpot_p99_seconds > {_num(s.p99_seconds)}",
                s.for_,
                f"TPOT P99 is {VALUE}s per token, over the {_num(s.p99_seconds)}s SLO",
                f"The fleet's P99 time per output token has been above {_num(s.p99_seconds)}s for {s.for_}: "
                "streaming is slow. Triage from tpot_slow: decode step against memory pressure "
                "(batch size, KV use, preemptions, GPU clocks).",
            )
        )
    if need("ErrorRatioHigh", ("error_ratio",), fleet_first):
        r = slo.error_ratio
        out.append(
            _Alert(
                "ErrorRatioHigh",
                "errors",
                r.severity,
                f"triage:error_ratio > {_num(r.ratio)}",
                r.for_,
                f"{VALUE} of requests fail, over {_num(r.ratio)}",
                f"Failed or aborted requests have been above {_num(r.ratio)} of all for {r.for_}. "
                "Triage from errors: which layer fails (GPU faults and OOM, replicas down or "
                "restarting, over-length input).",
            )
        )
    if need("RejectedRatioHigh", ("rejected_ratio",), fleet_first):
        r = slo.rejected_ratio
        out.append(
            _Alert(
                "RejectedRatioHigh",
                "rejected",
                r.severity,
                f"triage:rejected_ratio > {_num(r.ratio)}",
                r.for_,
                f"{VALUE} of requests rejected, over {_num(r.ratio)}",
                f"The gateway has refused (429, quota) above {_num(r.ratio)} of requests for {r.for_}. "
                "Triage from rejected: a true capacity shortage, or the symptom of something else? "
                "Scale-out is not a first action.",
            )
        )
    if need("QueueGrowing", ("queue_waiting",), fleet_first):
        q = slo.queue_growth
        now = f"avg_over_time(triage:queue_waiting[{q.window}])"
        before = f"avg_over_time(triage:queue_waiting[{q.window}] offset {q.baseline})"
        out.append(
            _Alert(
                "QueueGrowing",
                "rejected",
                q.severity,
                f"{now} > {_num(q.factor)} * {before} and {now} > {before} + {_num(q.min_increase)}",
                q.for_,
                f"{COUNT} requests waiting in the engine queues, over {_num(q.factor)}x {q.baseline} ago",
                f"The fleet's waiting queue ({q.window} average) has been over {_num(q.factor)}x its level "
                f"{q.baseline} earlier, and at least {_num(q.min_increase)} more requests, for {q.for_}. "
                "Triage from rejected: replicas lost, routing, KV pressure or a true capacity shortage.",
            )
        )
    view = need("KVCacheNearFull", ("kv_usage_ratio", "preemption_rate"), replica_first)
    if view:
        k = slo.kv_near_full
        kv = f"quantile_over_time(0.5, {_name('kv_usage_ratio', view)}[{k.window}])"
        on = f"on({label}) " if view == "replica" else ""
        out.append(
            _Alert(
                "KVCacheNearFull",
                "tpot_slow",
                k.severity,
                f"{kv} >= {_num(k.ratio)} and "
                f"{on}{_name('preemption_rate', view)} > {_num(k.min_preemption_rate)}",
                k.for_,
                f"KV cache at {VALUE}{_where(view, label)}, with preemptions",
                f"KV-cache use (median over {k.window}) has been at or above {_num(k.ratio)} with "
                f"sequences preempted for {k.for_}{_where(view, label)}. Preempted sequences are recomputed "
                "or swapped: TPOT, then TTFT, tails follow. Triage from tpot_slow; raising max_num_seqs or "
                "gpu_memory_utilization makes it worse.",
            )
        )
    if need("PrefixHitRatioDrop", ("prefix_hit_ratio",), fleet_first):
        p = slo.prefix_hit_drop
        out.append(
            _Alert(
                "PrefixHitRatioDrop",
                "ttft_slow",
                p.severity,
                f"triage:prefix_hit_ratio < {_num(p.factor)} * "
                f"(triage:prefix_hit_ratio offset {p.baseline} > {_num(p.min_baseline)})",
                p.for_,
                f"Prefix cache hit ratio {VALUE}, under {_num(p.factor)}x its value {p.baseline} before",
                f"The prefix-cache hit ratio has been under {_num(p.factor)}x its own value {p.baseline} "
                f"earlier for {p.for_}. Every miss is a full prefill: TTFT first, then the bill. "
                "Look for a changed prompt prefix or routing that no longer keeps a prefix on its replica.",
            )
        )
    view = need("GPUXidError", ("gpu_xid",), replica_first)
    if view:
        g = slo.gpu_xid
        out.append(
            _Alert(
                "GPUXidError",
                "errors",
                g.severity,
                f"max_over_time({_name('gpu_xid', view)}[{g.hold}]) > 0",
                None,
                f"XID {VALUE}{_where(view, label, 'gpu')}",
                f"A GPU reported XID {VALUE} within the last {g.hold}{_where(view, label, 'gpu')}. "
                "Its replica errors or drops out; triage from errors, and drain the node rather than "
                "retrying on it.",
            )
        )
    view = need("GPUEccErrors", ("gpu_ecc_errors",), replica_first)
    if view:
        g = slo.gpu_ecc
        out.append(
            _Alert(
                "GPUEccErrors",
                "errors",
                g.severity,
                f"max_over_time({_name('gpu_ecc_errors', view)}[{g.hold}]) > 0",
                None,
                f"{VALUE} double-bit ECC errors{_where(view, label, 'gpu')}",
                f"Uncorrectable ECC errors within the last {g.hold}{_where(view, label, 'gpu')}: the GPU's "
                "memory cannot be trusted. Triage from errors; drain it.",
            )
        )
    if need("ReplicasBelowDesired", ("replicas_ready", "replicas_desired"), fleet_first):
        m = slo.replicas
        out.append(
            _Alert(
                "ReplicasBelowDesired",
                "rejected",
                m.severity,
                f"triage:replicas_desired - triage:replicas_ready >= {m.min_missing}",
                m.for_,
                f"{VALUE} serving replicas missing",
                f"Ready serving replicas have been at least {m.min_missing} below the desired count for "
                f"{m.for_}. The survivors queue what the lost ones served; it looks like a capacity "
                "shortage and is not one. Triage from rejected; find why they are down before scaling out.",
            )
        )
    if need("SpendJump", ("spend_rate",), fleet_first):
        j = slo.spend_jump
        out.append(
            _Alert(
                "SpendJump",
                "cost_up",
                j.severity,
                f"sum(triage:spend_rate) > {_num(j.factor)} * sum(triage:spend_rate offset {j.baseline})",
                j.for_,
                f"Spend {COUNT}/h, over {_num(j.factor)}x the same time {j.baseline} before",
                f"Total spend per hour has been above {_num(j.factor)}x its value {j.baseline} earlier for "
                f"{j.for_}. Triage from cost_up: split price (price per 1k tokens, versions, routes) from "
                "volume (tokens per tenant, cache hit ratio).",
            )
        )
    return out, skipped


def _header(catalog: Catalog, options: QueryOptions, skipped: list[str]) -> str:
    files = ["bundled" if f == str(BUNDLED) else f for f in catalog.files]
    selector = options.selector.replace("\n", " ")
    lines = [
        "Prometheus rules generated by `triage rules` (llm-triage): regenerate, do not edit.",
        f"{SIGNAL_GROUP}: the vocabulary signals as triage:<signal> (fleet) and",
        "triage:<signal>:replica, each the `or` of its catalog sources in order.",
        f"{ALERT_GROUP}: SLO alerts on those series only; label `symptom` is where triage starts.",
        f"catalog: {', '.join(files) or 'none'}",
        f"replica label: {options.replica_label}; selector: {{{selector}}}; window: {options.window}",
    ]
    lines += [f"not generated: {s}" for s in skipped]
    return "".join(f"# {line}\n" for line in lines)


def render_rules(catalog: Catalog, slo: Slo, options: QueryOptions) -> str:
    """The rule file (YAML) for `catalog` and `slo` with `options` filled into every query."""
    records, views = _recording_rules(catalog, options)
    alerts, skipped = _alerts(slo, views, options.replica_label)
    document: Mapping[str, Any] = {
        "groups": [
            {"name": SIGNAL_GROUP, "rules": records},
            {"name": ALERT_GROUP, "rules": [a.rule() for a in alerts]},
        ]
    }
    body = yaml.safe_dump(document, sort_keys=False, width=1 << 30, allow_unicode=True)
    return _header(catalog, options, skipped) + body


__all__ = ["ALERT_GROUP", "SIGNAL_GROUP", "SLO_DEFAULTS", "Slo", "load_slo", "render_rules"]
