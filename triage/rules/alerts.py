"""The alerting rules: SLO breaches on the recorded series only, each saying where triage starts.

Every alert reads `triage:*` series (so it never depends on an exporter's naming),
carries a `symptom` label (a vocabulary id: where the diagnosis starts) and a severity,
and keeps the labels of the series it fires on: per fleet, the fleet labels, which is
how `triage serve` knows which fleet an alert is about. An alert that compares two
series matches them on the fleet labels too, so two fleets never mix in one condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from triage.core.model import SYMPTOMS
from triage.rules.records import Views, by, record_name
from triage.rules.slo import IdleKvQueueSlo, Slo

VALUE = '{{ $value | printf "%.3g" }}'
"""How an annotation shows a latency or ratio: three significant digits (Go's %g, as Python's)."""
COUNT = "{{ $value | humanize }}"
"""How an annotation shows a count or an amount that can run into thousands: 1.234k, not 1.23e+03."""


def _num(value: float) -> str:
    """A threshold as PromQL and people write it: 1, 0.05, 1.3."""
    return f"{value:.12g}"


@dataclass(frozen=True)
class _Alert:
    """One alerting rule, before it is written out."""

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


def _pick(views: Views, signals: tuple[str, ...], prefer: tuple[str, ...]) -> str | None:
    """The first view, in order of preference, recorded for every one of `signals`."""
    return next((v for v in prefer if all(views.has(s, v) for s in signals)), None)


def _where(view: str, label: str, what: str = "") -> str:
    """Where an annotation says it happened: the replica (and the GPU label `what`), or the fleet."""
    if view != "replica":
        return " across the fleet"
    gpu = " GPU {{ $labels." + what + " }}" if what else ""
    return " on {{ $labels." + label + " }}" + gpu


def _growing_beside_idle_kv(signal: str, q: IdleKvQueueSlo) -> str:
    """A queue (`window` average) over `factor` times its level `baseline` before and `min_increase`
    more, while the fleet's KV use stays under `kv_below`: a queue no capacity shortage explains."""
    now = f"avg_over_time(triage:{signal}[{q.window}])"
    before = f"avg_over_time(triage:{signal}[{q.window}] offset {q.baseline})"
    return (
        f"{now} > {_num(q.factor)} * {before} and {now} > {before} + {_num(q.min_increase)} "
        f"and triage:kv_usage_ratio < {_num(q.kv_below)}"
    )


def alerts(
    slo: Slo, views: Views, label: str, fleet_labels: Sequence[str] = ()
) -> tuple[list[_Alert], list[str]]:
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
    if need("GatewayLatencyP99High", ("gateway_latency_p99_seconds",), fleet_first):
        s = slo.gateway_latency
        out.append(
            _Alert(
                "GatewayLatencyP99High",
                "ttft_slow",
                s.severity,
                f"triage:gateway_latency_p99_seconds > {_num(s.p99_seconds)}",
                s.for_,
                f"P99 latency at the gateway is {VALUE}s, over the {_num(s.p99_seconds)}s SLO",
                f"The P99 latency the gateway or router measures (the user's wait: the engines' time plus "
                f"the edge's own queueing and routing) has been above {_num(s.p99_seconds)}s for {s.for_}. "
                "Triage from ttft_slow, comparing the edge with the engines behind it first: engine TTFT, "
                "queue and KV at their baseline put the cause in the gateway or router (its own queue, "
                "its admission limit, backends it routes to that do not serve), not in the engines.",
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
    view = need("UpstreamErrorRatioHigh", ("upstream_error_ratio",), ("fleet", "replica"))
    if view:
        r = slo.upstream_error_ratio
        out.append(
            _Alert(
                "UpstreamErrorRatioHigh",
                "errors",
                r.severity,
                f"{record_name('upstream_error_ratio', view)} > {_num(r.ratio)}",
                r.for_,
                f"{VALUE} of requests failed upstream{_where(view, label)}, over {_num(r.ratio)}",
                f"The gateway or router has failed to get above {_num(r.ratio)} of its requests from a "
                f"backend (connect errors, 502/503/504) for {r.for_}{_where(view, label)}. Triage from "
                "errors: which backends fail, whether the router still sends to backends that are gone "
                "or not ready (more routed than ready), and replicas down or restarting.",
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
        kv = f"quantile_over_time(0.5, {record_name('kv_usage_ratio', view)}[{k.window}])"
        on = f"on{by([label, *(f for f in fleet_labels if f != label)])} " if view == "replica" else ""
        out.append(
            _Alert(
                "KVCacheNearFull",
                "tpot_slow",
                k.severity,
                f"{kv} >= {_num(k.ratio)} and "
                f"{on}{record_name('preemption_rate', view)} > {_num(k.min_preemption_rate)}",
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
                f"last_over_time({record_name('gpu_xid', view)}[{g.hold}]) > 0 and "
                f"changes({record_name('gpu_xid', view)}[{g.hold}]) > 0",
                None,
                f"XID {VALUE}{_where(view, label, 'gpu')}",
                f"A GPU reported XID {VALUE} within the last {g.hold}{_where(view, label, 'gpu')}. "
                "Its replica errors or drops out; triage from errors, and drain the node rather than "
                "retrying on it. (DCGM holds the last code until the GPU or the exporter restarts: "
                "this fires when a code appears or changes, not again for one already there.)",
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
                f"max_over_time({record_name('gpu_ecc_errors', view)}[{g.hold}]) > 0",
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
    view = need("EngineStalled", ("replicas_stalled",), replica_first)
    if view:
        e = slo.engine_stalled
        out.append(
            _Alert(
                "EngineStalled",
                "errors",
                e.severity,
                f"{record_name('replicas_stalled', view)} > 0",
                e.for_,
                f"{VALUE} stalled{_where(view, label)}: requests running, no tokens generated",
                "Requests have been in the running batch with not one token generated for a whole rate "
                f"window and {e.for_} more{_where(view, label)}, while the pod is Ready and routed: its "
                "clients time out. Triage from errors; take the replica out of rotation and capture its "
                "stacks before restarting it. Scaling out does not unstick it, and the router keeps "
                "feeding it.",
            )
        )
    if need("AdmissionStall", ("queue_deferred", "kv_usage_ratio"), fleet_first):
        a = slo.admission_stall
        out.append(
            _Alert(
                "AdmissionStall",
                "rejected",
                a.severity,
                _growing_beside_idle_kv("queue_deferred", a),
                a.for_,
                f"{COUNT} requests deferred by admission, with KV use under {_num(a.kv_below)}",
                f"The engines' deferred queue ({a.window} average: held back by admission, not waiting "
                f"for capacity) has been over {_num(a.factor)}x its level {a.baseline} earlier, and at "
                f"least {_num(a.min_increase)} more requests, for {a.for_}, while KV use stayed under "
                f"{_num(a.kv_below)}. Triage from rejected: an admission stall, not a capacity shortage; "
                "scaling out does not drain it.",
            )
        )
    if need("BatchCapped", ("queue_waiting", "kv_usage_ratio"), fleet_first):
        b = slo.batch_capped
        out.append(
            _Alert(
                "BatchCapped",
                "rejected",
                b.severity,
                _growing_beside_idle_kv("queue_waiting", b),
                b.for_,
                f"{COUNT} requests waiting, with KV use under {_num(b.kv_below)}",
                f"The engines' waiting queue ({b.window} average) has been over {_num(b.factor)}x its level "
                f"{b.baseline} earlier, and at least {_num(b.min_increase)} more requests, for {b.for_}, "
                f"while KV use stayed under {_num(b.kv_below)}: each engine runs fewer sequences than its "
                "KV holds. Triage from rejected: the batch cap (max_num_seqs) before capacity; scaling "
                "out multiplies the waste.",
            )
        )
    view = need("GPULinkFaults", ("gpu_nvlink_errors", "gpu_pcie_replays"), replica_first)
    if view:
        links = slo.gpu_links
        nvlink, pcie = record_name("gpu_nvlink_errors", view), record_name("gpu_pcie_replays", view)
        out.append(
            _Alert(
                "GPULinkFaults",
                "tpot_slow",
                links.severity,
                f"{nvlink} > 0 or ({pcie} > {_num(links.pcie_factor)} * ({pcie} offset {links.baseline}) "
                f"and {pcie} > {_num(links.pcie_min_rate)})",
                links.for_,
                f"{VALUE} link errors per second{_where(view, label, 'gpu')}",
                f"NVLink errors, or PCIe replays over {_num(links.pcie_factor)}x their rate {links.baseline} "
                f"before, for {links.for_}{_where(view, label, 'gpu')}. A tensor-parallel step waits for its "
                "slowest link: the whole replica slows or hangs. Triage from tpot_slow; drain the node and "
                "run dcgmi diag, rather than adding replicas.",
            )
        )
    if need("KVTransferFailures", ("kv_transfer_failures",), fleet_first):
        transfers = slo.kv_transfer_failures
        out.append(
            _Alert(
                "KVTransferFailures",
                "errors",
                transfers.severity,
                f"triage:kv_transfer_failures > {_num(transfers.min_rate)}",
                transfers.for_,
                f"{VALUE} KV transfers failing per second",
                f"Requests whose KV transfer from a prefill to a decode instance failed, above "
                f"{_num(transfers.min_rate)} per second for {transfers.for_}: those requests end in errors. "
                "Triage from errors: the transfer path (connector, network, the prefill peer), not the "
                "decode engines' memory.",
            )
        )
    if need("RouteShareShift", ("route_share_shift",), fleet_first):
        shift = slo.route_share_shift
        out.append(
            _Alert(
                "RouteShareShift",
                "ttft_slow",
                shift.severity,
                f"triage:route_share_shift > {_num(shift.share)}",
                shift.for_,
                f"A routing target's share of requests moved by {VALUE}",
                f"A target's share of a model's requests has moved by more than {_num(shift.share)} against "
                f"the hour before for {shift.for_}: the gateway sends the traffic elsewhere than it did. "
                "Triage from ttft_slow with the routing rules' change at hand; more replicas of the pool "
                "that now takes it hide the move.",
            )
        )
    if need("SpendJump", ("spend_rate",), fleet_first):
        j = slo.spend_jump
        total = f"sum by {by(fleet_labels)} " if fleet_labels else "sum"
        before = j.baseline
        out.append(
            _Alert(
                "SpendJump",
                "cost_up",
                j.severity,
                f"{total}(triage:spend_rate) > {_num(j.factor)} * {total}(triage:spend_rate offset {before})",
                j.for_,
                f"Spend {COUNT}/h, over {_num(j.factor)}x the same time {j.baseline} before",
                f"Total spend per hour has been above {_num(j.factor)}x its value {j.baseline} earlier for "
                f"{j.for_}. Triage from cost_up: split price (price per 1k tokens, versions, routes) from "
                "volume (tokens per tenant, cache hit ratio).",
            )
        )
    return out, skipped
