"""What the gateway in front of a fleet shows: its quotas, its refusals, its metering, and
whether overload reached the engines behind it.

Three lines of the checklist are about the edge: the gateway handles quota and metering in
one place (网关统一鉴权、配额、路由、降级、计量), quotas sit at the gateway so overload never
reaches the GPUs (配额在网关前置，过载不打到 GPU), and tokens and cost are attributed per
tenant (按租户归集). These are the findings they are made of, shared by the deployment and
observability sections.

A gateway is known by its request counter: LiteLLM (`litellm_proxy_total_requests_metric_total`),
the Gateway API Inference Extension's endpoint picker (the EPP, used by llm-d:
`inference_objective_request_total`) or the vLLM production-stack router
(`vllm:num_incoming_requests_total`). Every read is scoped like the fleet's signals, so a
gateway counts only where its series match the selector: one Prometheus holds several
fleets and their gateways. Where no gateway is seen, a finding is unknown and names the
metrics that would settle it, except that a queue the engines let grow without bound is
overload that reached the GPUs, whoever was in front of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from signals.timeparse import format_duration
from triage.audit.checks.base import combine
from triage.audit.checks.facts import Facts, FloatArray
from triage.audit.checks.formatting import listed, num, ratio_text
from triage.audit.model import ChecklistItem, Finding, Sample, verdict
from triage.audit.queries import GATEWAY_QUERIES, TENANT_LABELS

GATEWAYS: Mapping[str, str] = {
    "litellm": "LiteLLM",
    "epp": "the EPP",
    "router": "the production-stack router",
}
COUNTERS = (
    "litellm_proxy_total_requests_metric_total, inference_objective_request_total, "
    "vllm:num_incoming_requests_total"
)
_KEYS = (*(key for key, _, _ in GATEWAY_QUERIES), "gateway_tokens")


@dataclass(frozen=True)
class Gateway:
    """A gateway whose request counter is in the fleet's scope, and what it served over the window."""

    key: str
    name: str
    served: float


def _total(x: Facts, key: str) -> float:
    return float(sum(s.value for s in x.instant(key) if math.isfinite(s.value)))


def _window(x: Facts) -> str:
    return f"the last {format_duration(x.f.lookback)}"


def unreadable(x: Facts) -> Finding | None:
    """Unknown when the metric names or a gateway query could not be read: absence would be a guess."""
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    failed = [f"{key} ({problem})" for key in _KEYS if (problem := x.instant_problem(key)) is not None]
    if failed:
        return verdict("unknown", f"the gateway's metrics could not be read: {listed(failed, 3)}")
    return None


def gateways(x: Facts) -> list[Gateway]:
    out = []
    for key, name in GATEWAYS.items():
        rows = x.instant(f"gateway_requests:{key}")
        if rows:
            out.append(Gateway(key, name, _total(x, f"gateway_requests:{key}")))
    return out


def _named(found: Sequence[Gateway]) -> str:
    return " and ".join(g.name for g in found)


def _counted(count: float, one: str, many: str) -> str:
    return f"{num(count)} {one if count == 1 else many}"


def limits(x: Facts) -> list[str]:
    """The quotas the gateway exports, as evidence."""
    limited = []
    for key, one, many in (("key", "API key", "API keys"), ("team", "team", "teams")):
        rows = x.instant(f"gateway_limits:{key}")
        if rows:
            limited.append(_counted(max(s.value for s in rows), one, many))
    out = [f"rate limits on {' and '.join(limited)} (LiteLLM)"] if limited else []
    if x.instant("gateway_limits:deployment"):
        tracked = _counted(_total(x, "gateway_limits:deployment"), "deployment", "deployments")
        out.append(f"request limits tracked on {tracked} (LiteLLM)")
    if x.instant("gateway_limits:flow_control"):
        out.append("flow control holds requests at the EPP")
    return out


def refused(x: Facts) -> float:
    """Requests the gateway refused with 429 over the window (LiteLLM's and the EPP's)."""
    return _total(x, "gateway_refused:litellm") + _total(x, "gateway_refused:epp")


def quota(x: Facts, item: ChecklistItem) -> Finding:
    """Pass when the gateway shows a quota (limits it exports, requests it refused); fail when a gateway
    that can show one carried traffic and shows none."""
    problem = unreadable(x)
    if problem is not None:
        return problem
    found = gateways(x)
    if not found:
        return verdict(
            "unknown", f"no gateway metrics for this fleet ({COUNTERS}); settles it: {item.settle}"
        )
    shown = limits(x)
    count = refused(x)
    if count > 0:
        shown.append(f"{num(count)} requests refused with 429 over {_window(x)}")
    if shown:
        return verdict("pass", f"quotas at the gateway: {'; '.join(shown)}")
    capable = [g for g in found if g.key != "router"]
    if not capable:
        return verdict(
            "unknown",
            "only the production-stack router is seen, and it exports no quota or 429 count; "
            f"settles it: {item.settle}",
        )
    served = sum(g.served for g in capable)
    if served <= 0:
        return verdict(
            "unknown", f"{_named(capable)} carried no traffic over {_window(x)}: no quota can show"
        )
    return verdict(
        "fail",
        f"{_named(capable)} served {num(served)} requests over {_window(x)} with no quota in sight: no "
        "API key or team rate limit, no deployment limit, no flow control, no request refused with 429",
    )


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """(length, end index) of the longest run of True in `mask`."""
    best, end, run = 0, -1, 0
    for i, flag in enumerate(mask.tolist()):
        run = run + 1 if flag else 0
        if run > best:
            best, end = run, i
    return best, end


def _at(values: FloatArray | None, i: int) -> float:
    return float(values[i]) if values is not None and math.isfinite(values[i]) else math.nan


def overload(x: Facts) -> Finding:
    """Fail when the engines' waiting queue outgrew their running batch for `overload_for` (overload
    reached the GPUs); pass when it stayed bounded, saying whether the gateway refused meanwhile."""
    frame = x.frame
    if frame is None:
        return verdict("unknown", f"overload on the engines: {x.why_no_frame()}")
    if not frame.has("queue_waiting"):
        return verdict("unknown", "the engines' waiting queue (queue_waiting) could not be read")
    queue = frame.fleet("queue_waiting")
    if not np.isfinite(queue).any():
        return verdict("unknown", "the engines' waiting queue has no samples in the window")
    running = frame.fleet("requests_running") if frame.has("requests_running") else None
    s = x.s
    over = np.isfinite(queue) & (queue >= s.queue_overload_min)
    if running is not None:
        over &= ~np.isfinite(running) | (queue > running)
    length, end = _longest_run(over)
    count = refused(x)
    if length * frame.step >= s.overload_for:
        start = end - length + 1
        i = start + int(np.nanargmax(queue[start : end + 1]))
        against = f" against {num(_at(running, i))} running" if running is not None else ""
        above = " and above the running batch" if running is not None else ""
        line = (
            f"overload reached the engines: their waiting queue held at {num(s.queue_overload_min)} or more"
            f"{above} for {format_duration(length * frame.step)} (peak {num(float(queue[i]))} waiting"
            f"{against}), "
        )
        if count > 0:
            why = "despite the gateway's refusals: its limits sit above what the engines serve"
        elif gateways(x):
            why = f"while {_named(gateways(x))} refused none"
        else:
            why = "and no gateway metrics show a refusal in front of them"
        return verdict("fail", line + why)
    i = int(np.nanargmax(queue))
    against = f" against {num(_at(running, i))} running" if running is not None else ""
    bounded = f"the engines' waiting queue stayed bounded (peak {num(float(queue[i]))} waiting{against})"
    held = ""
    gateway_queue = frame.fleet("gateway_queue") if frame.has("gateway_queue") else np.zeros(1)
    if np.isfinite(gateway_queue).any() and np.nanmax(gateway_queue) > 0:
        held = f"; the gateway held up to {num(float(np.nanmax(gateway_queue)))} requests in its own queue"
    if count > 0:
        return verdict("pass", f"{bounded} while the gateway refused requests{_refused_share(x)}{held}")
    if not gateways(x):
        return verdict("pass", f"{bounded}{held}: no overload in the window")
    return verdict(
        "pass",
        f"{bounded}{held}: no overload in the window, so whether the limits sit below what the engines "
        "serve is for a load test",
    )


def _refused_share(x: Facts) -> str:
    """The most the gateway refused over 5 minutes, where the frame has its rejected ratio."""
    frame = x.frame
    if frame is None or not frame.has("rejected_ratio"):
        return ""
    share = frame.fleet("rejected_ratio")
    if not (np.isfinite(share).any() and np.nanmax(share) > 0):
        return ""
    return f" (up to {ratio_text(float(np.nanmax(share)))} of its requests over 5 minutes)"


def overload_kept_off(x: Facts, item: ChecklistItem) -> Finding:
    """Quotas at the gateway, and the engines' queue bounded: both halves of the checklist's line."""
    return combine([quota(x, item), overload(x)])


def metering(x: Facts) -> Finding:
    """Whether the gateway meters usage at all (tokens or spend, by anything)."""
    problem = unreadable(x)
    if problem is not None:
        return problem
    found = gateways(x)
    if not found:
        return verdict("unknown", f"no gateway metrics for this fleet ({COUNTERS})")
    meters = []
    if x.instant("gateway_tokens") or x.instant("gateway_spend"):
        what = " and ".join(
            w for w, k in (("tokens", "gateway_tokens"), ("spend", "gateway_spend")) if x.instant(k)
        )
        meters.append(f"LiteLLM meters {what}")
    if x.instant("gateway_tokens:epp"):
        meters.append("the EPP meters input tokens per model")
    if x.instant("gateway_tokens:router"):
        meters.append("the router meters tokens per backend")
    if meters:
        return verdict("pass", "metering at the gateway: " + "; ".join(meters))
    return verdict("fail", f"{_named(found)} meters no tokens or spend for this fleet")


def gateway_functions(x: Facts, item: ChecklistItem) -> Finding:
    """Quota and metering in one gateway: the parts of the line metrics show."""
    problem = unreadable(x)
    if problem is not None:
        return problem
    if not gateways(x):
        return verdict(
            "unknown", f"no gateway metrics for this fleet ({COUNTERS}); settles it: {item.settle}"
        )
    parts = [quota(x, item), metering(x)]
    rest = "auth, routing and fallback are the gateway's configuration, not judged from metrics"
    return combine([*parts, verdict("pass", rest)])


def _tenants(rows: Sequence[Sample]) -> dict[str, set[str]]:
    """Tenant label -> the values seen with usage above zero."""
    out: dict[str, set[str]] = {}
    for sample in rows:
        if not (math.isfinite(sample.value) and sample.value > 0):
            continue
        for label in TENANT_LABELS:
            if sample.labels.get(label):
                out.setdefault(label, set()).add(sample.labels[label])
    return out


def _described(tenants: Mapping[str, set[str]]) -> str:
    words = {
        "team": ("team", "teams"),
        "hashed_api_key": ("API key", "API keys"),
        "user": ("user", "users"),
        "end_user": ("end user", "end users"),
    }
    return ", ".join(_counted(len(tenants[t]), *words[t]) for t in TENANT_LABELS if t in tenants)


def tenant_cost(x: Facts, item: ChecklistItem) -> Finding:
    """Tokens (and spend) per tenant at the gateway; fail when the gateway meters them for no one."""
    problem = unreadable(x)
    if problem is not None:
        return problem
    tokens, spend = x.instant("gateway_tokens"), x.instant("gateway_spend")
    if tokens or spend:
        by_tokens, by_spend = _tenants(tokens), _tenants(spend)
        if by_spend and not by_tokens:
            return verdict(
                "fail" if tokens else "unknown",
                f"the gateway meters spend per tenant ({_described(by_spend)}, LiteLLM) but "
                + ("its token counters carry no tenant" if tokens else "exports no token counter")
                + f"; settles it: {item.settle}",
            )
        if by_tokens:
            lines = [f"the gateway meters tokens per tenant: {_described(by_tokens)} (LiteLLM)"]
            if by_spend:
                lines.append(f"spend per tenant: {_described(by_spend)}")
            elif spend:
                lines.append(
                    "spend reads 0 for every tenant: cost per 1k tokens needs a price on the model "
                    "(LiteLLM's input_cost_per_token, output_cost_per_token) or the billing pipeline"
                )
            else:
                lines.append("no spend metered: cost per 1k tokens comes from the billing pipeline")
            return verdict("pass", *lines)
        used = _total(x, "gateway_tokens") + _total(x, "gateway_spend")
        if used <= 0:
            return verdict("unknown", f"the gateway metered no usage over {_window(x)}: no tenant can show")
        blank = ", ".join(TENANT_LABELS)
        return verdict(
            "fail",
            f"the gateway meters usage (LiteLLM) but attributes it to no tenant: {blank} are empty on "
            f"every token and spend series over {_window(x)}",
        )
    models = {s.labels.get("model_name", "") for s in x.instant("gateway_tokens:epp") if s.value > 0} - {""}
    if len(models) > 1:
        return verdict(
            "pass",
            f"the EPP meters input tokens per model name ({len(models)}: {listed(models, 3)}), one per "
            "workload or adapter",
            "the EPP meters no spend: cost per 1k tokens comes from the billing pipeline",
        )
    if models:
        return verdict(
            "unknown",
            f"the EPP meters input tokens for one model name only ({listed(models)}): per model, not per "
            f"tenant; settles it: {item.settle}",
        )
    return verdict(
        "unknown",
        f"no gateway meters tokens per tenant for this fleet; settles it: {item.settle}",
    )


__all__ = ["gateway_functions", "overload_kept_off", "tenant_cost"]
