"""The verdict corpus: incidents that test whether the triage answers the right *kind* of answer.

`python -m tools.generality_verdict --out DIR` writes one signal-level fixture per case.

Why this corpus exists: a diagnosis can name a plausible cause and still be wrong in kind. It
can answer a symptom the server never had, read a rollout that ended half an hour ago as
live, take a flag that always blinks for a new event, blame one tenant's habits on the fleet,
confuse a step with a ramp, or pick one of two equal causes without saying it picked. Each
case is a short postmortem staged on a simulated fleet (`tools.verdictsim`, written apart from
the triage's own code and generators so the data cannot echo the reasoning it measures), and
its `expect` says the verdict (`cause`, `ambiguous`, `unexplained`, `no_incident`) as well as
the cause. Classes, each with at least one confounder that looks alike but must be answered
differently:

1. absent: the symptom is not on the server (a client's view, a trickle that tripled);
   confounder: a small fleet's real burst.
2. live: a rollout that finished long ago while a stale router still sends to gone backends
   (stale_backend); confounder: a rollout still in progress (rollout_disruption).
3. baseline: a throttle flag blinking at the same duty before and after the onset beside
   another cause; confounder: a GPU that throttles for real from the onset.
4. tenant: one tenant's periodic bursts are its habit, not the fleet's incident; one
   tenant's rejections at flat demand are the gateway's limit; confounder: every tenant
   bursting at once.
5. timescale: a ramp over half an hour past capacity (capacity_shortage) against a step to
   the same level within minutes (traffic_burst).
6. stuck: a rollout's replacement Pending for want of a GPU; confounder: a pod that died
   with no rollout (replica_down).
7. marker: a version or route change near the onset while the slowdown is the gateway's;
   confounder: a release that slows decoding (version_change).
8. tie: two independent mechanisms at the same minute (ambiguous); confounder: only one.
9. sampling: every case with a symptom forbids `tune_sampling`, quality cases above all;
   confounder: a quality drop from truncation, not from a release.
10. born: series that begin inside the window (a new fleet, new replicas, a Prometheus
    restart's hole); confounder: a real burst 40 minutes before `at`.
11. unexplained: TTFT breached everywhere while nothing a cause reads has moved.

Every case draws from a generator seeded by its name, so a rerun writes the same bytes.
"""

from __future__ import annotations

import argparse
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tools.verdictsim import Build, Case, Engine, Expect, Gateway, Sim

LLAMA8 = Build("llama-3.1-8b-instruct", "2026-07")
QWEN7 = Build("qwen2.5-7b-instruct", "2026-04", engine_version="0.10.2", quantization="bf16")
LLAMA70 = Build("llama-3.3-70b-instruct", "2026-06", engine_version="0.11.0", quantization="fp8")
E8 = Engine()
E70 = Engine(capacity=1.2, prompt0=2400, output0=700, tpot0=0.042, prefill0=0.5, kv_base=0.4, tp=2)

SUMMARY = "Write the verdict corpus: one signal-level fixture per case."
CASES: list[Callable[[], Case]] = []


def case(fn: Callable[[], Case]) -> Callable[[], Case]:
    """Register a case; the corpus is written in the order the cases are defined."""
    CASES.append(fn)
    return fn


def cause(name: str, *forbidden: str, not_forbidden: tuple[str, ...] = ()) -> Expect:
    """A case with a symptom: its cause, and `tune_sampling` always forbidden."""
    return Expect("cause", name, tuple(sorted({*forbidden, "tune_sampling"})), not_forbidden)


QUIET = Expect("no_incident", "none")
UNEXPLAINED = Expect("unexplained", "none", ("tune_sampling",))
TIE = Expect("ambiguous", None, ("tune_sampling",))


def sts(n: int, prefix: str = "vllm") -> list[str]:
    """StatefulSet pods: names that survive a restart."""
    return [f"{prefix}-{i}" for i in range(n)]


def deploy(n: int, template: str, prefix: str = "vllm") -> list[str]:
    """Deployment pods: the template's hash and a random suffix, new at every replacement."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    rng = np.random.default_rng(zlib.crc32(f"{prefix}/{template}".encode()))
    return [f"{prefix}-{template}-{''.join(rng.choice(list(alphabet), 5))}" for _ in range(n)]


def fleet(
    name: str,
    pods: list[str],
    at: str,
    *,
    interval: int = 15,
    history: int = 180,
    engine: Engine = E8,
    build: Build = LLAMA8,
    load: float = 0.5,
    desired: int | None = None,
) -> Sim:
    """A fleet whose demand keeps each of its `desired` replicas at `load` of its capacity."""
    s = Sim(
        name,
        pods=pods,
        interval=interval,
        history_min=history,
        at=at,
        engine=engine,
        build=build,
        desired=desired,
    )
    s.demand = s.wavy(load * engine.capacity * float(s.desired[0]))
    return s


def alert(name: str, symptom: str, severity: str = "page") -> dict[str, str]:
    """An alert's labels, its `symptom` label as `triage rules` writes it, for the cases that
    start from an alert rather than from a `symptom:` key."""
    return {"alertname": name, "severity": severity, "symptom": symptom}


# 1. A symptom that is not there -------------------------------------------------------------


@case
def client_only_slow_ttft() -> Case:
    s = fleet("absent-client-reported-slow-first-token", sts(6), "2026-03-11T15:40:00Z", load=0.45)
    return s.case(
        "1-absent",
        "A customer ticket says first tokens take seconds from their office; the engines' TTFT P99 "
        "and queues are as flat as the hour before. Their corporate proxy "
        "buffers server-sent events.",
        QUIET,
        symptom="ttft_slow",
    )


@case
def trickle_tripled() -> Case:
    s = fleet("absent-trickle-rate-tripled", sts(3), "2026-05-02T09:20:00Z", interval=30, load=0.004)
    s.shift(s.demand, 25, 3.0, over_min=2)
    return s.case(
        "1-absent",
        "An anomaly alert fired because the internal eval fleet went from 0.05 to 0.15 req/s when a "
        "second notebook started; no request ever waited and latency did not move.",
        QUIET,
        alert={"alertname": "LLMRequestRateAnomaly", "severity": "warning"},
    )


@case
def client_errors_only() -> Case:
    s = fleet("absent-partner-proxy-resets-streams", sts(5), "2026-08-19T21:05:00Z", load=0.5)
    return s.case(
        "1-absent",
        "A partner reports failed completions: their egress proxy resets streams longer than 60 s. "
        "The engines' error ratio is at its usual 0.06 % and nothing queues.",
        QUIET,
        symptom="errors",
    )


@case
def small_fleet_burst() -> Case:
    engine = Engine(capacity=2.8)
    s = fleet("absent-confounder-small-fleet-burst", sts(3), "2026-02-24T18:32:00Z", engine=engine, load=0.24)
    s.shift(s.demand, 18, 4.0, over_min=2)
    return s.case(
        "1-absent",
        "A three-replica fleet at 2 req/s took 8 req/s within two minutes when a batch client "
        "started backfilling; every queue grew and TTFT P99 went from a quarter second to several.",
        cause("traffic_burst", "scale_out"),
        symptom="ttft_slow",
    )


# 2. Evidence must be live ----------------------------------------------------------------------


def _stale_router(s: Sim, rows: list[int], start: float, every: float, stale: dict[int, str]) -> None:
    """The old addresses of pods the rolling update recreated, which the router never dropped:
    routed from the pod's restart on, refusing connections."""
    s.gateway = Gateway(capacity=np.full(s.T, 1e4))
    for row, address in stale.items():
        s.gateway.stale[address] = (s.i(start - rows.index(row) * every), s.T)


@case
def stale_backend_after_rollout() -> Case:
    s = fleet("live-stale-backends-after-finished-rollout", sts(8), "2026-04-07T14:50:00Z", load=0.5)
    rows = list(range(8))[::-1]
    s.rolling_update(rows, 75, 5, 4, LLAMA8.but(engine_version="0.11.1"))
    _stale_router(s, rows, 75, 5, {6: "10.42.3.17:8000", 3: "10.42.1.44:8000", 1: "10.42.5.9:8000"})
    return s.case(
        "2-live",
        "A rolling update to vLLM 0.11.1 finished 36 minutes ago: all eight pods updated and Ready. "
        "The router missed three endpoint deletions during a watch reconnect and still sends a quarter "
        "of requests to the old pod IPs, which refuse connections.",
        cause("stale_backend"),
        symptom="errors",
    )


@case
def stale_backend_one_address() -> Case:
    s = fleet(
        "live-stale-backend-one-gone-address",
        sts(5, "llama70b"),
        "2026-09-03T11:15:00Z",
        interval=30,
        history=200,
        engine=E70,
        build=LLAMA70,
        load=0.55,
    )
    rows = list(range(5))[::-1]
    s.rolling_update(rows, 62, 7, 5, LLAMA70.but(model_version="2026-08"))
    _stale_router(s, rows, 62, 7, {2: "10.8.14.201:8000"})
    return s.case(
        "2-live",
        "The model refresh rolled through five 70B replicas and was done 29 minutes ago. One old "
        "address stayed in the router's backend list; a sixth of requests fail with 502 while the "
        "engines that answer are healthy.",
        cause("stale_backend"),
        alert=alert("RouterUpstreamErrors", "errors"),
    )


@case
def rollout_in_progress() -> Case:
    s = fleet("live-confounder-rollout-in-progress", sts(6), "2026-04-07T10:12:00Z", load=0.6)
    s.gateway = Gateway(capacity=np.full(s.T, 1e4))
    s.rolling_update([5, 4, 3, 2, 1, 0], 22, 6, 4.5, LLAMA8.but(engine_version="0.11.1"))
    s.err_extra *= 3.0
    return s.case(
        "2-live",
        "A rolling update is on its fourth of six pods: each restart takes a replica out for four and a "
        "half minutes and the freshly started engine fails its first requests while it captures CUDA "
        "graphs. The router follows readiness; errors come and go with the wave.",
        cause("rollout_disruption"),
        symptom="errors",
    )


@case
def rollout_in_progress_small() -> Case:
    s = fleet(
        "live-confounder-small-rollout-midway",
        sts(4, "qwen7b"),
        "2026-10-21T16:44:00Z",
        interval=30,
        build=QWEN7,
        load=0.55,
    )
    s.rolling_update([3, 2, 1, 0], 14, 5, 4, QWEN7.but(model_version="2026-10"))
    s.err_extra *= 3.0
    return s.case(
        "2-live",
        "Three of four pods have been recreated in the last fourteen minutes and the last is due; "
        "each restart leaves three replicas to carry the load and the new engines drop requests "
        "while they warm up.",
        cause("rollout_disruption"),
        symptom="errors",
    )


# 3. Events against their own baseline ----------------------------------------------------------


@case
def blink_beside_replica_down() -> Case:
    s = fleet("baseline-throttle-blink-beside-replica-down", sts(6), "2026-01-15T13:25:00Z", load=0.7)
    s.blink(4, 0.15)
    s.kill(1, 25)
    return s.case(
        "3-baseline",
        "vllm-1's node failed and its pod is gone; the five survivors queue. vllm-4's GPU brushes its "
        "power limit on about one sample in seven, as it has all day.",
        cause("replica_down", "scale_out"),
        symptom="ttft_slow",
    )


@case
def blink_beside_engine_oom() -> Case:
    s = fleet(
        "baseline-throttle-blink-beside-engine-oom", sts(8), "2026-06-30T08:55:00Z", interval=30, load=0.5
    )
    s.blink(6, 0.12)
    for ago in (30, 22, 14, 6):
        s.restart(2, ago, 3, warm_errors=0.09)
    s.oom[2, s.i(30) :] = 1
    return s.case(
        "3-baseline",
        "A leak in the image preprocessor grows vllm-2's container memory until the kubelet OOM-kills it, "
        "every eight minutes since half an hour; requests on it fail. vllm-6's throttle flag blinks "
        "at the same duty as all night.",
        cause("engine_oom"),
        symptom="errors",
    )


@case
def gpu_throttles_for_real() -> Case:
    s = fleet(
        "baseline-confounder-gpu-throttles-from-onset",
        sts(6, "llama70b"),
        "2026-07-22T15:10:00Z",
        engine=E70,
        build=LLAMA70,
        load=0.5,
    )
    s.shift(s.speed[3], 20, 0.6, over_min=3)
    s.throttle[3, s.i(20) :] = 1
    s.move_to(s.temp_extra[3], 20, 14.0, over_min=6)
    s.power_cap[3, s.i(20) :] = 0.62 * E70.tdp
    return s.case(
        "3-baseline",
        "A failed fan in the node of llama70b-3 heats its first GPU, which holds its clocks down from "
        "twenty minutes ago; the tensor-parallel pair runs at the slower GPU's pace and that replica's "
        "TPOT and TTFT rise while the other five are unchanged.",
        cause("gpu_throttling"),
        symptom="tpot_slow",
    )


# 4. One tenant is not the fleet -----------------------------------------------------------------


def _tenants(s: Sim, levels: dict[str, float], bursty: str, every: float, factor: float) -> None:
    """Tenants at steady levels, one of which bursts every `every` minutes for three minutes."""
    for tenant, level in levels.items():
        s.tenants[tenant] = s.wavy(level)
    s.tenants[bursty] *= 1 + (factor - 1) * s.periodic(every, 3, offset_min=s.rng.uniform(0, every))


@case
def tenant_bursts_beside_long_prompts() -> Case:
    s = fleet(
        "tenant-periodic-bursts-beside-long-prompt-surge",
        sts(8),
        "2026-03-30T17:45:00Z",
        engine=Engine(kv_base=0.22),
    )
    _tenants(s, {"support-bot": 7.0, "search": 4.5, "batch-etl": 1.0, "internal": 0.6}, "batch-etl", 12, 5)
    s.shift(s.prompt, 28, 2.8, over_min=2)
    return s.case(
        "4-tenant",
        "The support bot shipped a retrieval template that pastes whole manuals into the prompt: prompt "
        "P95 went from 1.8k to 5k tokens and prefill carries TTFT. batch-etl bursts every twelve "
        "minutes, as it has since it was onboarded.",
        cause("long_prompt_surge"),
        symptom="ttft_slow",
    )


@case
def tenant_bursts_healthy_fleet() -> Case:
    s = fleet("tenant-periodic-bursts-healthy-fleet", sts(6), "2026-11-04T10:30:00Z", interval=30)
    _tenants(s, {"web": 5.0, "mobile": 3.2, "nightly-eval": 0.7}, "nightly-eval", 15, 5)
    return s.case(
        "4-tenant",
        "A tenant-rate alert fired on nightly-eval's burst, one of the bursts it sends every fifteen "
        "minutes; the fleet absorbs them as it did all morning.",
        QUIET,
        alert={"alertname": "TenantRequestRateSpike", "severity": "info", "tenant": "nightly-eval"},
    )


@case
def one_tenant_rejected() -> Case:
    s = fleet("tenant-rejections-on-one-tenant", sts(10), "2026-02-10T12:05:00Z", interval=30, load=0.42)
    _tenants(s, {"acme": 6.0, "globex": 5.0, "initech": 3.0, "umbrella": 2.5}, "umbrella", 20, 1.0)
    s.rejected["acme"] = np.full(s.T, 0.001)
    s.move_to(s.rejected["acme"], 22, 0.38, over_min=1)
    return s.case(
        "4-tenant",
        "A gateway quota push divided acme's per-minute limit by the number of gateway replicas twice; "
        "38 % of acme's requests now get 429 at the demand it always sent, while the engines sit at "
        "40 % of their capacity.",
        cause("rate_limit_misconfigured", "scale_out"),
        symptom="rejected",
    )


@case
def one_tenant_rejected_beside_bursts() -> Case:
    s = fleet("tenant-rejections-beside-bursty-tenant", sts(6), "2026-09-17T19:20:00Z", load=0.4)
    _tenants(s, {"mobile-app": 4.0, "web": 3.5, "partner-batch": 0.8}, "partner-batch", 14, 4)
    s.rejected["mobile-app"] = np.full(s.T, 0.002)
    s.move_to(s.rejected["mobile-app"], 17, 0.27, over_min=1)
    return s.case(
        "4-tenant",
        "The mobile app's limit was re-entered in tokens per minute where the gateway expects requests; "
        "a quarter of its requests are refused at an unchanged rate. partner-batch keeps its usual "
        "fourteen-minute bursts; the engines have room.",
        cause("rate_limit_misconfigured", "scale_out"),
        alert=alert("GatewayRejectingRequests", "rejected"),
    )


@case
def every_tenant_bursts() -> Case:
    s = fleet(
        "tenant-confounder-fleet-wide-burst", sts(8), "2026-12-01T08:03:00Z", engine=Engine(kv_base=0.2)
    )
    _tenants(
        s,
        {"app-ios": 3.0, "app-android": 2.6, "web": 2.4, "partners": 1.6, "email-digest": 1.2},
        "web",
        30,
        1,
    )
    for rate in s.tenants.values():
        s.shift(rate, 16, 2.6, over_min=2)
    return s.case(
        "4-tenant",
        "A push notification went to every user at 07:47: all five tenants' traffic went up 2.6-fold "
        "within two minutes and every replica queues.",
        cause("traffic_burst", "scale_out"),
        symptom="ttft_slow",
    )


# 5. Timescale ---------------------------------------------------------------------------------------


def _afternoon(s: Sim, start_load: float, knee_load: float, end_load: float, ramp_min: float) -> None:
    """Demand growing all afternoon, then steeply over the last `ramp_min` minutes to `end_load`."""
    cap = s.engine.capacity * float(s.desired[0])
    knee = s.T - 1 - s.steps(ramp_min + 4)
    level = np.interp(np.arange(s.T), [0, knee, s.i(4), s.T - 1], [start_load, knee_load, end_load, end_load])
    s.demand = level * cap * s.ou((s.T,), 0.03, 600)


@case
def capacity_ramp() -> Case:
    s = fleet(
        "timescale-demand-ramps-past-capacity",
        sts(8),
        "2026-10-14T16:40:00Z",
        history=200,
        engine=Engine(kv_base=0.28),
    )
    _afternoon(s, 0.42, 0.78, 1.03, 26)
    return s.case(
        "5-timescale",
        "Afternoon demand grew all day and then steadily over the last half hour past what eight "
        "replicas serve; every queue rose together, KV, cache and GPUs are healthy.",
        cause("capacity_shortage", not_forbidden=("scale_out",)),
        symptom="ttft_slow",
    )


@case
def capacity_ramp_large() -> Case:
    s = fleet(
        "timescale-twelve-replicas-outgrown",
        sts(12, "qwen7b"),
        "2026-06-08T17:10:00Z",
        interval=30,
        history=240,
        build=QWEN7,
        engine=Engine(capacity=5.0, kv_base=0.28),
    )
    _afternoon(s, 0.4, 0.8, 1.02, 30)
    return s.case(
        "5-timescale",
        "The summer launch's traffic rose through the afternoon and kept rising for the last thirty "
        "minutes until twelve replicas saturated evenly; nothing else changed.",
        cause("capacity_shortage", not_forbidden=("scale_out",)),
        alert=alert("LLMTTFTP99High", "ttft_slow"),
    )


@case
def step_to_same_level() -> Case:
    s = fleet(
        "timescale-confounder-step-to-same-level",
        sts(8),
        "2026-10-15T16:40:00Z",
        history=200,
        engine=Engine(kv_base=0.28),
        load=0.5,
    )
    s.shift(s.demand, 20, 1.03 / 0.5, over_min=2.5)
    return s.case(
        "5-timescale",
        "A partner switched its whole traffic to us within two and a half minutes: demand stepped to "
        "the level the fleet only reaches on its worst afternoons and every queue jumped at once.",
        cause("traffic_burst", "scale_out"),
        symptom="ttft_slow",
    )


# 6. A stuck rollout ----------------------------------------------------------------------------------


def _maxunavailable_rollout(
    s: Sim, old: list[int], new: list[int], start: float, every: float, build: Build
) -> None:
    """maxSurge 0, maxUnavailable 1: each old pod is removed, then its replacement scheduled; the
    last replacement finds no free GPU and stays Pending (no container, no series)."""
    updated = np.zeros(s.T)
    for k, (o, n) in enumerate(zip(old, new, strict=True)):
        ago = start - k * every
        s.kill(o, ago)
        updated += s.minutes >= -ago
        if k < len(new) - 1:
            s.absent_until(n, ago - 4)
        else:
            s.exists[n] = s.alive[n] = s.ready[n] = False
    s.updated = np.where(s.minutes < -start, s.desired, updated)
    s.release(build, start - 4, None)


@case
def rollout_stuck_pending() -> Case:
    old, new = deploy(6, "7f9c6d5b8"), deploy(3, "5b8d4c7f6")
    s = fleet("stuck-rollout-replacement-pending", old + new, "2026-05-20T13:35:00Z", load=0.75, desired=6)
    _maxunavailable_rollout(s, [0, 1, 2], [6, 7, 8], 40, 6, LLAMA8.but(quantization="bf16"))
    return s.case(
        "6-stuck",
        "The rollout to bf16 asks for an 80 GB GPU per pod; two replacements found one, the third "
        "has been Pending for 28 minutes. Five replicas carry six replicas' traffic.",
        cause("rollout_disruption", "scale_out"),
        symptom="ttft_slow",
    )


@case
def rollout_stuck_large() -> Case:
    old, new = deploy(10, "6d4f8b9c7"), deploy(5, "84c7b6d5f")
    s = fleet(
        "stuck-rollout-fifth-pod-pending",
        old + new,
        "2026-07-09T20:50:00Z",
        interval=30,
        load=0.8,
        desired=10,
    )
    _maxunavailable_rollout(
        s, [0, 1, 2, 3, 4], [10, 11, 12, 13, 14], 50, 8, LLAMA8.but(model_version="2026-09")
    )
    return s.case(
        "6-stuck",
        "A model refresh moved four of ten pods; the fifth replacement is Pending on a node pool whose "
        "spare GPU was taken by a training job. Updated 5 of 10, Ready 9, no container restarted.",
        cause("rollout_disruption", "scale_out"),
        symptom="ttft_slow",
    )


@case
def replica_died_no_rollout() -> Case:
    s = fleet(
        "stuck-confounder-pod-died-no-rollout", deploy(8, "7c5d9f6b4"), "2026-05-21T13:35:00Z", load=0.75
    )
    s.kill(5, 26)
    return s.case(
        "6-stuck",
        "A node went NotReady and its pod was evicted; the replacement waits for a GPU. No template "
        "changed: updated equals desired, one of eight is not Ready, the rest queue.",
        cause("replica_down", "scale_out"),
        symptom="ttft_slow",
    )


# 7. A change marker is not a mechanism --------------------------------------------------------------


@case
def route_change_gateway_bottleneck() -> Case:
    s = fleet("marker-route-change-gateway-saturates", sts(8), "2026-08-05T12:25:00Z", load=0.45)
    level = 0.45 * E8.capacity * 8
    s.gateway = Gateway(capacity=np.where(s.minutes < -18, level * 3.5, level / 0.85))
    s.release(LLAMA8.but(route="primary-ab"), 19, 19)
    return s.case(
        "7-marker",
        "The A/B route was switched on at 12:06; the same push set the gateway's worker pool to "
        "its default, so requests queue at the edge. The engines see the same load, queue and TTFT "
        "as before.",
        cause("gateway_bottleneck", "scale_out"),
        alert=alert("GatewayLatencyP99High", "ttft_slow"),
    )


@case
def engine_patch_then_gateway_bottleneck() -> Case:
    s = fleet(
        "marker-engine-patch-beside-gateway-queue", sts(6), "2026-11-12T09:40:00Z", interval=30, load=0.5
    )
    s.rolling_update([5, 4, 3, 2, 1, 0], 45, 4, 3, LLAMA8.but(engine_version="0.11.2"))
    level = 0.5 * E8.capacity * 6
    s.gateway = Gateway(capacity=np.where(s.minutes < -16, level * 4, level / 0.85))
    return s.case(
        "7-marker",
        "vLLM 0.11.2 rolled in place and was done six minutes before the slowdown; then LiteLLM's "
        "proxy was redeployed with one worker and its queue and latency rose. Engines unchanged.",
        cause("gateway_bottleneck", "scale_out"),
        symptom="ttft_slow",
    )


@case
def release_slows_decode() -> Case:
    s = fleet("marker-confounder-release-slows-decode", sts(8), "2026-08-06T12:25:00Z", load=0.4)
    rows = [7, 6, 5, 4, 3, 2, 1, 0]
    s.rolling_update(rows, 40, 3, 2.5, LLAMA8.but(engine_version="0.11.2"))
    for k, row in enumerate(rows):
        s.decode[row, s.i(40 - k * 3) :] *= 1.5
    return s.case(
        "7-marker",
        "vLLM 0.11.2 changed the default attention backend on this GPU: once each pod restarted on it, "
        "its decode steps took half again as long at the same load, batch and prompts.",
        cause("version_change"),
        symptom="tpot_slow",
    )


# 8. Ties are answers -----------------------------------------------------------------------------------


@case
def tie_long_prompts_and_cache_miss() -> Case:
    s = fleet(
        "tie-prompts-doubled-and-prefix-collapsed",
        sts(8),
        "2026-04-22T14:15:00Z",
        load=0.45,
        engine=Engine(hit0=0.62),
    )
    s.shift(s.prompt, 24, 2.0)
    s.move_to(s.hit, 24, 0.06)
    return s.case(
        "8-tie",
        "In the same deploy window the retrieval app doubled its context and the router's session "
        "affinity was switched off; prompts are twice as long and prefix hits collapsed at the same "
        "minute, each enough alone to breach TTFT.",
        TIE,
        symptom="ttft_slow",
    )


@case
def tie_replica_down_and_cache_miss() -> Case:
    s = fleet("tie-replica-lost-and-prefix-collapsed", sts(6), "2026-09-29T11:00:00Z", interval=30, load=0.6)
    s.kill(3, 20)
    s.move_to(s.hit, 20, 0.08)
    return s.case(
        "8-tie",
        "At 10:40 vllm-3's node lost power and, independently, the app began prefixing every prompt "
        "with a timestamp; the survivors carry more load and recompute every prefix.",
        TIE,
        symptom="ttft_slow",
    )


@case
def prefix_collapse_alone() -> Case:
    s = fleet(
        "tie-confounder-prefix-collapse-alone",
        sts(8),
        "2026-04-23T14:15:00Z",
        load=0.45,
        engine=Engine(hit0=0.6),
    )
    s.move_to(s.hit, 22, 0.08)
    return s.case(
        "8-tie",
        "The app began putting the user's name before the shared system prompt; prefix hits fell from "
        "60 % to 8 % and prefill carries TTFT, at the same prompt length.",
        cause("prefix_cache_miss"),
        symptom="ttft_slow",
    )


# 9. Sampling is never a first action ---------------------------------------------------------------------


@case
def quality_after_model_release() -> Case:
    s = fleet("sampling-quality-down-after-model-release", sts(6), "2026-03-05T16:00:00Z", load=0.5)
    s.rolling_update([5, 4, 3, 2, 1, 0], 52, 4, 3, LLAMA8.but(model_version="2026-09"))
    return s.case(
        "9-sampling",
        "The fine-tune of September replaced July's; answers got terser and eval scores dropped, "
        "with no change in latency or load.",
        cause("version_change"),
        symptom="quality_down",
    )


@case
def quality_after_quantization() -> Case:
    s = fleet(
        "sampling-quality-down-after-int4",
        sts(4, "llama70b"),
        "2026-12-09T10:45:00Z",
        interval=30,
        engine=E70,
        build=LLAMA70,
        load=0.5,
    )
    rows = [3, 2, 1, 0]
    s.rolling_update(rows, 48, 6, 5, LLAMA70.but(quantization="awq-int4"))
    for k, row in enumerate(rows):
        s.decode[row, s.i(48 - k * 6) :] *= 0.92
    return s.case(
        "9-sampling",
        "To free GPUs the 70B fleet moved from fp8 to AWQ int4; decoding got a little faster and the "
        "evaluation's reasoning scores fell.",
        cause("version_change"),
        alert=alert("EvalScoreDrop", "quality_down", "ticket"),
    )


@case
def quality_from_truncation() -> Case:
    s = fleet(
        "sampling-confounder-truncation-not-release",
        sts(6),
        "2026-03-06T16:00:00Z",
        load=0.5,
        engine=Engine(output0=700),
    )
    s.truncated = np.full(s.T, 0.008) * s.ou((s.T,), 0.15, 300)
    s.move_to(s.truncated, 30, 0.21, over_min=2)
    s.move_to(s.output, 30, 512.0, over_min=2)
    return s.case(
        "9-sampling",
        "A gateway default of max_tokens 512 reached requests that never set it; a fifth of answers "
        "stop mid-sentence. No build changed.",
        cause("length_truncation"),
        symptom="quality_down",
    )


# 10. A series born inside the window --------------------------------------------------------------------


@case
def fleet_born_recently() -> Case:
    s = fleet(
        "born-fleet-deployed-forty-minutes-ago",
        sts(5, "mistral"),
        "2026-01-27T11:30:00Z",
        load=0.45,
        build=Build("mistral-small-3.1-24b", "2026-01", quantization="fp8"),
    )
    for row in range(5):
        s.absent_until(row, 40)
    s.fleet_alive[: s.i(40)] = False
    s.hit[:] = 0.5 * s.ramp(40, 8)
    return s.case(
        "10-born",
        "A new fleet went live forty minutes ago: no series before, request rates rising over the first "
        "minutes as the gateway shifted traffic and the rate windows filled, the prefix cache warming. "
        "Nothing is wrong.",
        QUIET,
    )


@case
def prometheus_restart_hole() -> Case:
    s = fleet("born-prometheus-restart-gap", sts(8), "2026-06-16T22:10:00Z", interval=30, load=0.5)
    s.scrape[s.i(60) : s.i(50)] = False
    return s.case(
        "10-born",
        "Prometheus was restarted for a config change an hour ago and scraped nothing for ten minutes; "
        "every series resumes at the values it left.",
        QUIET,
    )


@case
def replicas_added_recently() -> Case:
    s = fleet("born-two-replicas-scaled-in", sts(8), "2026-02-03T17:20:00Z", load=0.5, desired=6)
    for row in (6, 7):
        s.absent_until(row, 30)
        s.alive[row, : s.i(27)] = s.ready[row, : s.i(27)] = False
    s.desired[s.i(30) :] = 8
    return s.case(
        "10-born",
        "A scheduled scale-up ahead of the evening added two replicas thirty minutes ago; their series "
        "start then, their rates fill their windows and the others' share drops. No incident.",
        QUIET,
    )


@case
def burst_forty_minutes_ago() -> Case:
    s = fleet(
        "born-confounder-burst-forty-minutes-ago",
        sts(6),
        "2026-01-28T11:30:00Z",
        engine=Engine(kv_base=0.15),
        load=0.3,
    )
    s.shift(s.demand, 40, 3.1, over_min=2)
    return s.case(
        "10-born",
        "With three hours of history, a reseller's traffic arrived all at once forty minutes ago and "
        "has stayed; every queue has held high since.",
        cause("traffic_burst", "scale_out"),
        symptom="ttft_slow",
    )


# 11. Unexplained -----------------------------------------------------------------------------------------


@case
def ttft_up_nothing_moved() -> Case:
    s = fleet("unexplained-ttft-breach-nothing-moved", sts(8), "2026-05-13T15:25:00Z", load=0.35)
    s.ttft_extra += 2.1 * s.ramp(18, 2)
    return s.case(
        "11-unexplained",
        "TTFT P99 went from 0.4 s to about 2.5 s on every replica; arrivals, lengths, queues, KV, cache, "
        "GPUs, replicas and versions are all where they were. (Postmortem: host CPU starvation of the "
        "API server's tokenizer, which no exported signal watches.)",
        UNEXPLAINED,
        symptom="ttft_slow",
    )


@case
def ttft_up_nothing_moved_large() -> Case:
    s = fleet(
        "unexplained-ttft-breach-twelve-replicas",
        sts(12, "qwen7b"),
        "2026-10-02T07:50:00Z",
        interval=30,
        build=QWEN7,
        load=0.4,
    )
    s.ttft_extra += 1.8 * s.ramp(25, 3)
    return s.case(
        "11-unexplained",
        "Every replica's first tokens are two seconds later than an hour ago while nothing the engines "
        "or GPUs export has moved. (Postmortem: a guardrail call added in the API server's request path.)",
        UNEXPLAINED,
        alert=alert("LLMTTFTP99High", "ttft_slow"),
    )


def main(argv: list[str] | None = None) -> int:
    """Write every case as `<name>.yaml` into `--out`."""
    parser = argparse.ArgumentParser(prog="python -m tools.generality_verdict", description=SUMMARY)
    parser.add_argument("--out", required=True, type=Path, help="directory to write the fixtures into")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    names: set[str] = set()
    for make in CASES:
        written = make()
        if written.name in names:
            raise SystemExit(f"duplicate case name {written.name}")
        names.add(written.name)
        (out / f"{written.name}.yaml").write_text(written.text(), encoding="utf-8")
    print(f"wrote {len(names)} fixtures to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
