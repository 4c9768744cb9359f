"""Scheduling (调度): batching, max_num_seqs against KV, chunked prefill, length limits, P99 alerts.

max_num_seqs is judged against the KV it must fit (P95 prompt + output per request),
because a batch bigger than the KV holds only preempts; the P99 alert check reads the
rules Prometheus evaluates, expanded through recording rules (`triage.audit.rules`).
max_num_batched_tokens and the preemption mode are not exported by the engines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from signals.timeparse import format_duration
from triage.audit.checks.base import Registry, with_unreadable_rules
from triage.audit.checks.capacity import kv_fit, kv_text, long_prompts
from triage.audit.checks.facts import Facts
from triage.audit.checks.formatting import as_bool, as_float, listed, num
from triage.audit.histograms import buckets_of, max_bound
from triage.audit.model import ChecklistItem, Finding, verdict
from triage.audit.rules import AlertFacts

CHECKS = Registry("scheduling")
CHECKS.not_visible(
    "scheduling.max_num_batched_tokens",
    "scheduling.preemption_mode",
)


@CHECKS.check("scheduling.continuous_batching")
def _check_continuous_batching(x: Facts, item: ChecklistItem) -> Finding:
    engine = x.engine()
    if engine is None:
        return verdict(
            "unknown",
            x.why_no_names()
            if x.names is None
            else "no engine metrics here (vLLM, SGLang, TGI, TensorRT-LLM, Triton)",
        )
    peak = ""
    if x.frame is not None and x.frame.has("requests_running"):
        view = x.frame.replicas("requests_running")
        if view.values.size and np.isfinite(view.values).any():
            peak = f"; the running batch reached {num(float(np.nanmax(view.values)))} requests on one replica"
    return verdict(
        "pass",
        f"{engine} batches continuously (always on){peak}",
        "whether the throughput / tail-latency trade-off is understood is not visible in metrics",
    )


def max_num_seqs_finding(x: Facts, knob: bool) -> Finding:
    fit = kv_fit(x)
    if isinstance(fit, Finding):
        return fit
    kv, prompt, output, where = fit
    if prompt is None or output is None:
        return verdict(
            "unknown",
            kv_text(kv),
            "request lengths unknown (no prompt/generation token histograms"
            + "".join(f"; {p}" for k in ("prompt_buckets", "output_buckets") if (p := x.instant_problem(k)))
            + ") to size the batch against it",
        )
    per_request = prompt + output
    fits = min(kv.values()) / per_request
    lengths = f"P95 prompt {num(prompt)} + output {num(output)} = {num(per_request)} tokens {where}"
    seqs = {
        r: v for r, t in x.config_values("max_num_seqs", "max_running_requests").items() if (v := as_float(t))
    }
    if seqs:
        smallest = min(kv.values())
        load = {r: n * per_request / kv.get(r, smallest) for r, n in seqs.items()}
        worst_replica = max(sorted(load), key=load.__getitem__)
        worst, capacity = seqs[worst_replica], kv.get(worst_replica, smallest)
        need = worst * per_request
        history = x.config_history("max_num_seqs")
        changes = [f"{r}: {' -> '.join(v)}" for r, v in sorted(history.items()) if len(v) > 1]
        changed = f"; changed in the window ({listed(changes, 3)})" if changes else ""
        if need > capacity:
            return verdict(
                "fail",
                f"max_num_seqs {worst:g} x {num(per_request)} tokens = {num(need)} tokens > {num(capacity)} "
                f"the KV holds on {worst_replica}{changed}",
                f"{lengths}; the KV holds about {num(math.floor(capacity / per_request))} such requests: "
                "a batch "
                "larger than that preempts instead of adding throughput",
            )
        return verdict(
            "pass",
            f"max_num_seqs {worst:g} x {num(per_request)} tokens = {num(need)} tokens fits the "
            f"{num(capacity)} the KV holds{changed}",
            lengths,
        )
    observed = ""
    if x.frame is not None and x.frame.has("requests_running"):
        running = x.frame.replicas("requests_running").values
        peak = float(np.nanmax(running)) if running.size and np.isfinite(running).any() else math.nan
        preempt = x.frame.fleet("preemption_rate") if x.frame.has("preemption_rate") else np.array([np.nan])
        preempting = bool(np.nansum(np.where(np.isfinite(preempt), preempt, 0.0)) > 0)
        if math.isfinite(peak):
            observed = f"the running batch peaked at {num(peak)} requests on one replica"
            if peak > fits and preempting and not knob:
                return verdict(
                    "fail",
                    f"{kv_text(kv)}; at {lengths} it holds about {num(math.floor(fits))} requests, "
                    f"yet {observed} "
                    "while preempting: max_num_seqs is at least that",
                    "max_num_seqs itself is not exposed; lower it to what the KV holds",
                )
    return verdict(
        "unknown",
        f"{kv_text(kv)}; at {lengths} it holds about {num(math.floor(fits))} requests"
        + (f"; {observed}" if observed else ""),
        "max_num_seqs is not exposed by the engine's metrics: --max-num-seqs in the deployment (or a "
        "`max_num_seqs` label on config_info via --catalog) settles it; it should be at most "
        f"{num(math.floor(fits))}",
    )


@CHECKS.check("scheduling.max_num_seqs_kv")
def _check_max_num_seqs(x: Facts, item: ChecklistItem) -> Finding:
    return max_num_seqs_finding(x, knob=False)


@CHECKS.check("scheduling.chunked_prefill")
def _check_chunked_prefill(x: Facts, item: ChecklistItem) -> Finding:
    common, evidence = long_prompts(x)
    if common is None:
        return verdict(
            "unknown",
            evidence,
            "settles it: the prompt-length histogram and the engine's chunked prefill setting",
        )
    if not common:
        return verdict("not_applicable", f"long prompts are rare: {evidence}")
    states = {
        r: b
        for r, t in x.config_values("enable_chunked_prefill", "chunked_prefill").items()
        if (b := as_bool(t)) is not None
    }
    if not states:
        return verdict(
            "unknown",
            f"long prompts are common: {evidence}",
            "chunked prefill state not exposed; settles it: " + item.settle,
        )
    off = sorted(r for r, on in states.items() if not on)
    if off:
        return verdict(
            "fail", f"long prompts are common ({evidence}) and chunked prefill is off on {listed(off)}"
        )
    return verdict(
        "pass", f"long prompts are common ({evidence}); chunked prefill is on on {len(states)} replicas"
    )


@CHECKS.check("scheduling.request_length_limit")
def _check_request_length_limit(x: Facts, item: ChecklistItem) -> Finding:
    buckets = buckets_of(x.instant("prompt_buckets"))
    longest = max_bound(buckets)
    limits = x.max_model_len()
    seen = ""
    if longest is not None:
        bound, exact = longest
        how = "at most" if exact else "over"
        seen = f"the longest prompt in the last {format_duration(x.f.lookback)} was {how} {num(bound)} tokens"
    routing = "whether over-long requests have their own route is not visible in metrics"
    if limits:
        limit = min(limits.values())
        if longest is not None and not longest[1] and longest[0] >= limit:
            return verdict(
                "fail",
                f"{seen}, beyond max_model_len {num(limit)}: the limit is not where it is thought to be",
                routing,
            )
        return verdict(
            "pass",
            f"max_model_len {num(limit)} caps a request" + (f"; {seen}" if seen else ""),
            routing,
        )
    hint = ""
    finite = [b for b, _ in buckets if math.isfinite(b)]
    if finite and x.has_prefix("vllm:"):
        hint = f"; vLLM builds these buckets up to max_model_len, so it is at least {num(finite[-1])}"
    return verdict(
        "unknown",
        (seen or "prompt lengths unknown") + hint,
        f"settles it: {item.settle}",
    )


def latency_alert_names(alerts: Iterable[AlertFacts]) -> str:
    return listed((a.label for a in alerts), 4)


def _live_alerts(x: Facts) -> list[AlertFacts]:
    """Alerts that read at least one metric this server has (every alert when names are unknown)."""
    assert x.rules is not None
    if x.names is None:
        return list(x.rules.alerts)
    names = x.names
    return [a for a in x.rules.alerts if any(n in names for n in a.names)]


@CHECKS.check("scheduling.p99_ttft_tpot_alerts")
def _check_p99_alerts(x: Facts, item: ChecklistItem) -> Finding:
    """A live P99 (or higher) alert on TTFT and another on TPOT; what exists instead is named.

    An alert that reads only series this server lacks never fires, so it does not count.
    """
    if x.rules is None:
        return verdict("unknown", x.why_no_rules())
    if not x.rules.alerts and not x.rules.hiding:
        return with_unreadable_rules(
            x,
            verdict(
                "fail",
                "no alerting rules are loaded here; if they run elsewhere (a ruler, another Prometheus), "
                "audit that one",
            ),
            "fail",
        )
    alerts = _live_alerts(x)
    found: dict[str, list[AlertFacts]] = {}
    lines: list[str] = []
    problems: list[str] = []
    for kind in ("ttft", "tpot"):
        label = kind.upper()
        p99 = [a for a in alerts if a.quantiles.get(kind, 0.0) >= 0.99]
        found[kind] = p99
        if p99:
            lines.append(f"P99 {label}: {latency_alert_names(p99)}")
            continue
        dead = [a for a in x.rules.alerts if a.quantiles.get(kind, 0.0) >= 0.99 and a not in alerts]
        other = [a for a in alerts if kind in a.quantiles or any(k == kind for k, _ in a.means)]
        if dead:
            problems.append(
                f"the P99 {label} alert {latency_alert_names(dead)} reads series this server lacks"
            )
        elif other:
            how = "; ".join(
                f"{a.rule.name} reads "
                + (f"P{a.quantiles[kind] * 100:g}" if kind in a.quantiles else "its mean")
                for a in other[:3]
            )
            problems.append(f"no P99 {label} alert ({how})")
        elif x.rules.hiding:
            problems.append(f"no readable {label} alert")
        else:
            problems.append(f"no {label} alert at all")
    shared = {a.rule.name for a in found["ttft"]} & {a.rule.name for a in found["tpot"]}
    if shared and len(found["ttft"]) == 1 and len(found["tpot"]) == 1:
        problems.append(
            f"TTFT and TPOT share one alert ({listed(shared)}): a page cannot say which mechanism"
        )
    if problems:
        return with_unreadable_rules(x, verdict("fail", *problems, *lines), "fail")
    return with_unreadable_rules(x, verdict("pass", *lines), "fail")
