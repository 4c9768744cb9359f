"""`triage rules` on every serving stack: each stack's fleet recorded, and paged, as its own.

The rule file is the one `triage rules` writes by default (per fleet, keyed by `namespace`
and `model_name`), generated through the command line itself. Prometheus's own rule engine
(`promtool test rules`) evaluates it on each stack's raw fixture (`fixtures/stack-X-raw.yaml`:
the stack's real exporter series, in promtool's `input_series` notation already), every
minute from the fixture's start (Prometheus's default evaluation interval), and checks at
the fixture's moment (`at`):

- the fleet series of the stack's engine signals exist under the fleet's labels, and the
  fleet's request rate is what the fixture's own request counters give (Prometheus's `rate`
  computed here from the series) for that fleet alone;
- the alert `triage rules` writes for the fixture's symptom fires for that fleet at `at`
  (its signal-level twin, `fixtures/stack-X.yaml`, breaches the SLO there) and is neither
  pending nor firing at the first moment it could (the rate window plus its `for`);
- TGI, which puts no model label on any series: one series for its namespace's Deployment;
- KServe, whose InferenceServices all serve `model_name=/mnt/models`: each service is
  recorded, and paged, apart, by default (the rules also key by Knative's `service_name`)
  and with `--fleet-labels namespace,service_name`;
- Dynamo: the fleet's request rate is its frontend's, not its prefill and decode workers'
  added together;
- Triton: the request rate is the TensorRT-LLM model's, not its ensemble's and pre- and
  post-processing models' requests added to it;
- DCGM: every GPU signal, the inferred throttle included, joins the fleet whose pods use it.

Expected values come from the fixtures (their series and their twins), never from the rules.
promtool evaluates every rule of the file at every step, so each fixture costs tens of
seconds of CPU; the runs this session needs are started together, one per fixture and rule
file, as the first test asks. Skipped loudly without `promtool` (a failure under CI=true).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import yaml
from rulekit import rules_read_by, rules_reading

from signals.catalog import QueryOptions
from signals.notation import parse_values
from signals.selector import parse_selector
from signals.timeparse import parse_duration
from signals.vocabulary import DEFAULT_FLEET_LABELS
from triage.cli.main import main
from triage.rules import Slo, load_slo
from triage.rules.records import series_names

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
PROMTOOL_TIMEOUT = 1200.0
EVALUATION_INTERVAL = "1m"
"""How often promtool evaluates the rules: Prometheus's own default `global.evaluation_interval`,
which the rules as written (no group `interval`) run at; every moment checked is a whole minute,
and a quarter of the 15 s fixture steps' evaluations keeps each fixture's run to seconds."""
SERVICES = ("namespace", "service_name")
"""The KServe run's `--fleet-labels`: Knative's `service_name=<isvc>-predictor` names the service."""
DEFAULT_KEY = (*DEFAULT_FLEET_LABELS, *series_names())
"""What the default rules record and page per: the fleet labels, and the labels an orchestrator
names a fleet by on the engines' series (signals/stacks.yaml `rules_key`)."""


# ------------------------------------------------------------------ what each stack exports


def _vllm(prefix: str) -> dict[str, str]:
    """vLLM's engine signals, each with the metric (under `prefix`) it is read from."""
    return {
        "ttft_p99_seconds": f"{prefix}time_to_first_token_seconds_bucket",
        "ttft_p50_seconds": f"{prefix}time_to_first_token_seconds_bucket",
        "tpot_p99_seconds": f"{prefix}inter_token_latency_seconds_bucket",
        "tpot_p50_seconds": f"{prefix}inter_token_latency_seconds_bucket",
        "e2e_p99_seconds": f"{prefix}e2e_request_latency_seconds_bucket",
        "request_rate": f"{prefix}request_success_total",
        "error_ratio": f"{prefix}request_success_total",
        "truncated_ratio": f"{prefix}request_success_total",
        "prompt_tokens_p95": f"{prefix}request_prompt_tokens_bucket",
        "long_prompt_ratio": f"{prefix}request_prompt_tokens_bucket",
        "output_tokens_p95": f"{prefix}request_generation_tokens_bucket",
        "queue_waiting": f"{prefix}num_requests_waiting",
        "requests_running": f"{prefix}num_requests_running",
        "queue_time_p99_seconds": f"{prefix}request_queue_time_seconds_bucket",
        "prefill_time_p99_seconds": f"{prefix}request_prefill_time_seconds_bucket",
        "prefix_hit_ratio": f"{prefix}prefix_cache_hits_total",
        "prompt_tokens_rate": f"{prefix}prompt_tokens_total",
        "generation_tokens_rate": f"{prefix}generation_tokens_total",
        "kv_usage_ratio": f"{prefix}kv_cache_usage_perc",
        "preemption_rate": f"{prefix}num_preemptions_total",
    }


VLLM_033 = {
    **_vllm("vllm:"),
    "rejected_ratio": "vllm:admission_rejections_total",
    "spec_decode_acceptance_ratio": "vllm:spec_decode_num_accepted_tokens_total",
    "engine_asleep": "vllm:engine_sleep_state",
}
SGLANG = {
    "ttft_p99_seconds": "sglang:time_to_first_token_seconds_bucket",
    "ttft_p50_seconds": "sglang:time_to_first_token_seconds_bucket",
    "tpot_p99_seconds": "sglang:inter_token_latency_seconds_bucket",
    "tpot_p50_seconds": "sglang:inter_token_latency_seconds_bucket",
    "e2e_p99_seconds": "sglang:e2e_request_latency_seconds_bucket",
    "request_rate": "sglang:num_requests_total",
    "error_ratio": "sglang:num_aborted_requests_total",
    "queue_waiting": "sglang:num_queue_reqs",
    "requests_running": "sglang:num_running_reqs",
    "queue_time_p99_seconds": "sglang:queue_time_seconds_bucket",
    "prefix_hit_ratio": "sglang:cached_tokens_total",
    "prompt_tokens_rate": "sglang:prompt_tokens_total",
    "generation_tokens_rate": "sglang:generation_tokens_total",
    "kv_usage_ratio": "sglang:token_usage",
    "preemption_rate": "sglang:num_retracted_requests_total",
}
TGI = {
    "tpot_p99_seconds": "tgi_request_mean_time_per_token_duration_bucket",
    "tpot_p50_seconds": "tgi_request_mean_time_per_token_duration_bucket",
    "e2e_p99_seconds": "tgi_request_duration_bucket",
    "request_rate": "tgi_request_count",
    "error_ratio": "tgi_request_failure",
    "rejected_ratio": "tgi_request_failure",
    "queue_waiting": "tgi_queue_size",
    "requests_running": "tgi_batch_current_size",
    "queue_time_p99_seconds": "tgi_request_queue_duration_bucket",
    "prompt_tokens_p95": "tgi_request_input_length_bucket",
    "output_tokens_p95": "tgi_request_generated_tokens_bucket",
    "prompt_tokens_rate": "tgi_request_input_length_sum",
    "generation_tokens_rate": "tgi_request_generated_tokens_sum",
    "kv_usage_ratio": "tgi_batch_current_max_tokens",
}
TRTLLM = {
    "ttft_p99_seconds": "trtllm_time_to_first_token_seconds_bucket",
    "ttft_p50_seconds": "trtllm_time_to_first_token_seconds_bucket",
    "tpot_p99_seconds": "trtllm_time_per_output_token_seconds_bucket",
    "tpot_p50_seconds": "trtllm_time_per_output_token_seconds_bucket",
    "e2e_p99_seconds": "trtllm_e2e_request_latency_seconds_bucket",
    "queue_time_p99_seconds": "trtllm_request_queue_time_seconds_bucket",
    "request_rate": "trtllm_request_success_total",
    "error_ratio": "trtllm_request_success_total",
    "truncated_ratio": "trtllm_request_success_total",
    "queue_waiting": "trtllm_num_requests_waiting",
    "requests_running": "trtllm_num_requests_running",
    "kv_usage_ratio": "trtllm_kv_cache_utilization",
    "prefix_hit_ratio": "trtllm_kv_cache_hit_rate",
}
TRITON = {
    "ttft_p99_seconds": "nv_inference_first_response_histogram_ms_bucket",
    "ttft_p50_seconds": "nv_inference_first_response_histogram_ms_bucket",
    "e2e_p99_seconds": "nv_inference_request_duration_us",
    "request_rate": "nv_inference_request_success",
    "error_ratio": "nv_inference_request_failure",
    "queue_waiting": "nv_trt_llm_request_metrics",
    "requests_running": "nv_trt_llm_request_metrics",
    "kv_usage_ratio": "nv_trt_llm_kv_cache_block_metrics",
}
GPU = {
    "gpu_temp_celsius": "DCGM_FI_DEV_GPU_TEMP",
    "gpu_util_ratio": "DCGM_FI_DEV_GPU_UTIL",
    "gpu_power_watts": "DCGM_FI_DEV_POWER_USAGE",
    "gpu_memory_used_ratio": "DCGM_FI_DEV_FB_USED",
    "gpu_throttle": "DCGM_FI_DEV_SM_CLOCK",
    "gpu_xid": "DCGM_FI_DEV_XID_ERRORS",
    "gpu_ecc_errors": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
}

Counter = tuple[str, Mapping[str, str]]
"""A request counter of the fixture and the labels that pick the fleet's series of it."""


@dataclass(frozen=True)
class Stack:
    """One stack fixture: its fleet's labels under the default rules, what it exports, what it served."""

    name: str
    fleet: Mapping[str, str]
    """The fleet of `expect.fleet` as the default rules key it; "" where the stack has no such label."""
    signals: Mapping[str, str]
    """Engine signal -> the fixture's metric it is read from (docs/stacks.md)."""
    requests: tuple[Counter, ...]
    """The counters whose rate, summed, is the fleet's request rate (docs/stacks.md)."""
    instead: tuple[Counter, ...] = ()
    """Counters of the fixture whose summed rate the fleet's request rate must NOT be."""


def _fleet(namespace: str, model: str = "") -> dict[str, str]:
    return {"namespace": namespace, "model_name": model}


LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
STACKS = {
    s.name: s
    for s in (
        Stack(
            "ray-serve",
            _fleet("ray", LLAMA_8B),
            _vllm("ray_vllm_"),
            (("ray_vllm_request_success_total", {"model_name": LLAMA_8B}),),
        ),
        # Disaggregated: a request finishes on a prefill worker and again on a decode worker,
        # so the fleet's request rate is the frontend's (docs/stacks.md, NVIDIA Dynamo).
        Stack(
            "dynamo",
            _fleet("dynamo", "Qwen/Qwen3-32B"),
            _vllm("vllm:"),
            (("dynamo_frontend_requests_total", {}),),
            (("vllm:request_success_total", {}),),
        ),
        # Both InferenceServices serve /mnt/models: Knative's service_name keeps them apart
        # (the rules key by it too), and llama-chat's rate is not the two services' added.
        Stack(
            "kserve",
            {**_fleet("serving", "/mnt/models"), "service_name": "llama-chat-predictor"},
            _vllm("vllm:"),
            (("vllm:request_success_total", {"service_name": "llama-chat-predictor"}),),
            (("vllm:request_success_total", {"model_name": "/mnt/models"}),),
        ),
        Stack("tgi", _fleet("llm"), TGI, (("tgi_request_count", {}),)),
        Stack(
            "trtllm",
            _fleet("llm", "meta-llama/Llama-3.1-70B-Instruct"),
            TRTLLM,
            (("trtllm_request_success_total", {}),),
        ),
        Stack(
            "triton",
            _fleet("llm"),
            TRITON,
            (
                ("nv_inference_request_success", {"model": "tensorrt_llm"}),
                ("nv_inference_request_failure", {"model": "tensorrt_llm"}),
            ),
            # ...not with the ensemble's, preprocessing's and postprocessing's requests added
            (("nv_inference_request_success", {}), ("nv_inference_request_failure", {})),
        ),
        Stack(
            "vllm-033",
            _fleet("llm", "Qwen/Qwen3-8B"),
            VLLM_033,
            (("vllm:request_success_total", {"model_name": "Qwen/Qwen3-8B"}),),
        ),
        Stack(
            "sglang",
            _fleet("llm", LLAMA_8B),
            SGLANG,
            (("sglang:num_requests_total", {"model_name": LLAMA_8B}),),
        ),
        Stack(
            "dcgm",
            _fleet("llm", LLAMA_8B),
            _vllm("vllm:"),
            (("vllm:request_success_total", {"model_name": LLAMA_8B}),),
        ),
    )
}
KSERVE_SERVICES = {"llama-chat": "llama-chat-predictor", "llama-batch": "llama-batch-predictor"}
"""Each InferenceService of the KServe fixture and the `service_name` Knative gives its series."""
KSERVE_FLEET = {"namespace": "serving", "service_name": KSERVE_SERVICES["llama-chat"]}
"""`expect.fleet` (serving/llama-chat@InferenceService/llama-chat) under `--fleet-labels` SERVICES."""
SYMPTOM_ALERTS = {
    "ttft_slow": ("TTFTP99High", "ttft_p99_seconds"),
    "tpot_slow": ("TPOTP99High", "tpot_p99_seconds"),
}
"""The P99 latency alert `triage rules` writes for each symptom, and the signal it reads."""


# ------------------------------------------------------------------ the fixtures, read here


@dataclass(frozen=True)
class Fixture:
    """A stack fixture, raw or twin: its header, and each series' name, labels and samples."""

    doc: Mapping[str, Any]
    series: tuple[tuple[str, Mapping[str, str], npt.NDArray[np.float64]], ...]

    @property
    def step(self) -> float:
        return parse_duration(str(self.doc["interval"]))

    @property
    def at(self) -> str:
        return str(self.doc["at"])

    def index(self, moment: str) -> int:
        return round(parse_duration(moment) / self.step)

    def select(self, name: str, labels: Mapping[str, str]) -> list[npt.NDArray[np.float64]]:
        return [
            v
            for n, found, v in self.series
            if n == name and all(found.get(k) == x for k, x in labels.items())
        ]

    def names(self) -> set[str]:
        return {n for n, _, _ in self.series}

    def labels(self, name: str) -> list[Mapping[str, str]]:
        return [found for n, found, _ in self.series if n == name]


@cache
def fixture(name: str) -> Fixture:
    """`fixtures/<name>.yaml`, its values expanded from promtool's notation."""
    doc = yaml.load((FIXTURES / f"{name}.yaml").read_text(encoding="utf-8"), Loader=Loader)
    rows = []
    for entry in doc["input_series"]:
        metric, labels = parse_selector(entry["series"])
        rows.append((metric, labels, parse_values(str(entry["values"]))))
    return Fixture(doc, tuple(rows))


def raw(stack: str) -> Fixture:
    return fixture(f"stack-{stack}-raw")


def twin(stack: str) -> Fixture:
    return fixture(f"stack-{stack}")


def prom_rate(values: npt.NDArray[np.float64], index: int, step: float, window: float) -> float | None:
    """Prometheus's `rate(x[window])` at sample `index` (counter resets and extrapolation included,
    the range closed at both ends as in Prometheus 2); None with fewer than two samples."""
    now = index * step
    points = [
        (i * step, float(v))
        for i, v in enumerate(values[: index + 1])
        if not math.isnan(v) and i * step >= now - window
    ]
    if len(points) < 2:
        return None
    (first_t, first_v), (last_t, last_v) = points[0], points[-1]
    increase = last_v - first_v + sum(p for (_, p), (_, q) in itertools.pairwise(points) if q < p)
    sampled = last_t - first_t
    average = sampled / (len(points) - 1)
    to_start, to_end = first_t - (now - window), now - last_t
    if increase > 0 and first_v >= 0:
        to_start = min(to_start, sampled * (first_v / increase))
    extrapolated = sampled
    extrapolated += to_start if to_start < average * 1.1 else average / 2
    extrapolated += to_end if to_end < average * 1.1 else average / 2
    return increase * (extrapolated / sampled) / window


def request_rate(stack: str, counters: Sequence[Counter], moment: str | None = None) -> float:
    """The summed rate of `counters` in the stack's raw fixture at `moment` (default `at`)."""
    fx = raw(stack)
    window = parse_duration(QueryOptions().window)
    index = fx.index(moment or fx.at)
    rates = [
        prom_rate(values, index, fx.step, window)
        for name, labels in counters
        for values in fx.select(name, labels)
    ]
    found = [r for r in rates if r is not None]
    assert found, f"{stack}: none of {counters} has samples at {moment or fx.at}"
    return sum(found)


def twin_peak(stack: str, signal: str, moment: str) -> float:
    """The highest replica's value of `signal` in the stack's signal-level twin at `moment`."""
    fx = twin(stack)
    at = fx.index(moment)
    values = [float(v[at]) for n, _, v in fx.series if n == signal and not math.isnan(v[at])]
    assert values, f"stack-{stack}.yaml has no {signal} at {moment}"
    return max(values)


# ------------------------------------------------------------------ promtool cases


@dataclass(frozen=True)
class Case:
    """One `promql_expr_test` case, and what it checks in words."""

    expr: str
    at: str
    samples: tuple[tuple[str, float], ...]
    why: str

    def doc(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "eval_time": self.at,
            "exp_samples": [{"labels": labels, "value": value} for labels, value in self.samples],
        }

    def key(self) -> tuple[str, float]:
        return self.expr, parse_duration(self.at)


def labels(values: Mapping[str, str]) -> str:
    """`{a="x",b="y"}` of the non-empty values (an empty label is no label)."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(values.items()) if v) + "}"


def matchers(values: Mapping[str, str]) -> str:
    """`a="x",b=""`: an empty value matches series without the label."""
    return ",".join(f'{k}="{v}"' for k, v in values.items())


def start_moment(slo_for: str) -> str:
    """The first moment an alert on a rate-window signal could fire: the window, then its `for`."""
    return f"{round(parse_duration(QueryOptions().window) + parse_duration(slo_for))}s"


def signal_cases(stack: Stack) -> list[Case]:
    fx = raw(stack.name)
    wanted = sorted(stack.signals)
    expr = f'count by (__name__) ({{__name__=~"triage:({"|".join(wanted)})",{matchers(stack.fleet)}}})'
    why = f"one triage:<signal> series per engine signal of {stack.name}, under the fleet's labels"
    return [Case(expr, fx.at, tuple((f'{{__name__="triage:{s}"}}', 1.0) for s in wanted), why)]


def ratio_case(
    record: str, fleet: Mapping[str, str], expected: float, at: str, what: str, step: float = 0.01
) -> Case:
    """`record` of `fleet` over `expected`, rounded to `step`: 1 when they agree within half a step
    (and promtool shows the ratio when they do not)."""
    expr = f"round({record}{{{matchers(fleet)}}} / {expected!r}, {step!r})"
    return Case(expr, at, ((labels(fleet), 1.0),), f"{record} of {labels(fleet)} against {what}")


def request_cases(stack: Stack) -> list[Case]:
    fx = raw(stack.name)
    counters = tuple(
        (name, {"namespace": stack.fleet["namespace"], **match}) for name, match in stack.requests
    )
    expected = request_rate(stack.name, counters)
    what = f"the rate of {_counters(counters)} in the fixture ({expected:.4g}/s)"
    if stack.instead:
        wrong = tuple((name, {"namespace": stack.fleet["namespace"], **m}) for name, m in stack.instead)
        other = request_rate(stack.name, wrong)
        # The check must tell the two apart: the wrong sum is off by far more than the tolerance.
        assert abs(other / expected - 1) > 0.1, f"{stack.name}: {_counters(wrong)} is {other:.4g}/s"
        what += f", not that of {_counters(wrong)} ({other:.4g}/s, a ratio of {other / expected:.2f})"
    return [ratio_case("triage:request_rate", stack.fleet, expected, fx.at, what)]


def _counters(counters: Sequence[Counter]) -> str:
    return " + ".join(name + labels(match) for name, match in counters)


def alert_cases(stack: str, fleet: Mapping[str, str], by: Sequence[str]) -> list[Case]:
    fx, slo = raw(stack), load_slo()
    alert, signal = SYMPTOM_ALERTS[str(fx.doc["symptom"])]
    target = _target(slo, signal)
    start = start_moment(target[1])
    grouped = f"count by ({', '.join(by)})"
    return [
        Case(
            f'{grouped} (ALERTS{{alertname="{alert}",alertstate="firing"}})',
            fx.at,
            ((labels(fleet), 1.0),),
            f"{alert} fires at {fx.at} for {labels(fleet)} and no other fleet",
        ),
        Case(
            f'{grouped} (ALERTS{{alertname="{alert}"}})',
            start,
            (),
            f"{alert} neither pending nor firing at {start}, the first moment it could fire",
        ),
        Case(
            f"triage:{signal}{{{matchers(fleet)}}} < bool {target[0]!r}",
            start,
            ((labels(fleet), 1.0),),
            f"triage:{signal} recorded and under its {target[0]} SLO at {start}",
        ),
    ]


def _target(slo: Slo, signal: str) -> tuple[float, str]:
    """The SLO line and `for` of the alert on `signal`."""
    latency = slo.ttft if signal == "ttft_p99_seconds" else slo.tpot
    return latency.p99_seconds, latency.for_


def tgi_cases() -> list[Case]:
    fx = raw("tgi")
    namespace = STACKS["tgi"].fleet["namespace"]
    deployments = {
        found["deployment"]
        for found in fx.labels("kube_deployment_spec_replicas")
        if found["namespace"] == namespace
    }
    assert deployments == {"tgi-mistral-7b"}, f"the TGI fixture's {namespace} holds {deployments}"
    (spec,) = fx.select(
        "kube_deployment_spec_replicas", {"namespace": namespace, "deployment": "tgi-mistral-7b"}
    )
    wanted = sorted(TGI)
    expr = f'count by (__name__) ({{__name__=~"triage:({"|".join(wanted)})",namespace="{namespace}"}})'
    return [
        Case(
            expr,
            fx.at,
            tuple((f'{{__name__="triage:{s}"}}', 1.0) for s in wanted),
            f"one series per TGI signal in {namespace}: the Deployment's, with or without a model label",
        ),
        Case(
            f'triage:replicas_desired{{namespace="{namespace}"}}',
            fx.at,
            ((f'triage:replicas_desired{{namespace="{namespace}"}}', float(spec[fx.index(fx.at)])),),
            "the series is the Deployment tgi-mistral-7b's: its spec.replicas",
        ),
    ]


def kserve_cases() -> list[Case]:
    fx = raw("kserve")
    chat = KSERVE_FLEET
    for service in KSERVE_SERVICES.values():
        assert fx.select("vllm:num_requests_running", {"service_name": service}), service
    cases = [
        Case(
            'count by (namespace, service_name) (triage:request_rate{namespace="serving",service_name!=""})',
            fx.at,
            tuple(
                (labels({"namespace": "serving", "service_name": s}), 1.0)
                for s in sorted(KSERVE_SERVICES.values())
            ),
            "one request_rate series per InferenceService",
        ),
    ]
    for service in KSERVE_SERVICES.values():
        fleet = {"namespace": "serving", "service_name": service}
        counter = ("vllm:request_success_total", fleet)
        expected = request_rate("kserve", (counter,))
        what = f"the rate of {counter[0]}{labels(fleet)} in the fixture ({expected:.4g}/s)"
        cases.append(ratio_case("triage:request_rate", fleet, expected, fx.at, what))
    wanted = sorted(STACKS["kserve"].signals)
    expr = f'count by (__name__) ({{__name__=~"triage:({"|".join(wanted)})",{matchers(chat)}}})'
    cases.append(
        Case(
            expr,
            fx.at,
            tuple((f'{{__name__="triage:{s}"}}', 1.0) for s in wanted),
            "llama-chat's engine signals",
        )
    )
    return cases + alert_cases("kserve", chat, SERVICES)


def triton_cases() -> list[Case]:
    fx = raw("triton")
    stack = STACKS["triton"]
    return [
        Case(
            f'count(triage:request_rate{{namespace="{stack.fleet["namespace"]}"}})',
            fx.at,
            (("{}", 1.0),),
            "one request_rate series for Triton's fleet, none per Triton model",
        ),
        *request_cases(stack),
    ]


def dcgm_cases() -> list[Case]:
    fx = raw("dcgm")
    fleet = STACKS["dcgm"].fleet
    wanted = sorted(GPU)
    expr = f'count by (__name__) ({{__name__=~"triage:({"|".join(wanted)})",{matchers(fleet)}}})'
    start = start_moment(load_slo().tpot.for_)
    cases = [
        Case(
            expr, fx.at, tuple((f'{{__name__="triage:{s}"}}', 1.0) for s in wanted), "the fleet's GPU signals"
        )
    ]
    for moment in (start, fx.at):
        value = twin_peak("dcgm", "gpu_throttle", moment)
        cases.append(
            Case(
                "triage:gpu_throttle",
                moment,
                ((f"triage:gpu_throttle{labels(fleet)}", value),),
                f"the GPU throttle at {moment} is the fleet's, the twin's ({value:g}), and no one else's",
            )
        )
    return cases


Checks = dict[str, list[Case]]


@dataclass(frozen=True)
class Run:
    """One promtool run: a stack fixture under one rule file, and the checks it carries."""

    stack: str
    fleet_labels: tuple[str, ...]
    checks: Callable[[], Checks]


def _stack_checks(name: str) -> Callable[[], Checks]:
    def checks() -> Checks:
        stack = STACKS[name]
        out: Checks = {
            "signals": signal_cases(stack),
            "alert": alert_cases(name, stack.fleet, DEFAULT_KEY),
        }
        if stack.requests:
            out["requests"] = request_cases(stack)
        extra = {"tgi": tgi_cases, "triton": triton_cases, "dcgm": dcgm_cases}.get(name)
        if extra is not None:
            out[name] = extra()
        return out

    return checks


RUNS = {
    **{name: Run(name, tuple(DEFAULT_FLEET_LABELS), _stack_checks(name)) for name in STACKS},
    "kserve-services": Run("kserve", SERVICES, lambda: {"services": kserve_cases()}),
}


@cache
def checks(run: str) -> Checks:
    return RUNS[run].checks()


# ------------------------------------------------------------------ running promtool


def require_promtool() -> str:
    """promtool's path; skip loudly without it, fail under CI=true (as tests/promserver.py does)."""
    found = shutil.which("promtool")
    if found is not None:
        return found
    reason = (
        "!!! promtool not on PATH: `triage rules` per stack NOT RUN "
        "(install the Debian package `prometheus`) !!!"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass(frozen=True)
class Outcome:
    """What promtool said: its exit code, its whole output, and each failed case's report by key."""

    returncode: int
    output: str
    failed: Mapping[tuple[str, float], str]


_QUOTED = r'"(?:[^"\\]|\\.)*"'
_FAILED = re.compile(rf"^    expr: ({_QUOTED}), time: (\S+),", re.MULTILINE)


def parse_failures(output: str) -> dict[tuple[str, float], str]:
    """promtool's report of each failed `promql_expr_test`, by (expression, seconds)."""
    starts = list(_FAILED.finditer(output))
    failed = {}
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(output)
        failed[(json.loads(match.group(1)), parse_duration(match.group(2)))] = output[
            match.start() : end
        ].rstrip()
    return failed


def rule_file(directory: Path, fleet_labels: Sequence[str]) -> Path:
    """The rules as `triage rules` writes them: by default, or with `--fleet-labels`."""
    path = directory / f"triage-rules-{'-'.join(fleet_labels)}.yml"
    argv = ["rules", "-o", str(path)]
    if tuple(fleet_labels) != tuple(DEFAULT_FLEET_LABELS):
        argv += ["--fleet-labels", ",".join(fleet_labels)]
    assert main(argv) == 0
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    alerts = {
        rule["alert"]: rule for group in written["groups"] for rule in group["rules"] if "alert" in rule
    }
    for symptom, (alert, signal) in SYMPTOM_ALERTS.items():
        assert alerts[alert]["labels"]["symptom"] == symptom, alert
        assert alerts[alert]["expr"].startswith(f"triage:{signal} > "), alerts[alert]["expr"]
    return path


def run_promtool(promtool: str, run: str, rules: Path, directory: Path) -> Outcome:
    spec = RUNS[run]
    fx = raw(spec.stack)
    cases = list({case.key(): case for group in checks(run).values() for case in group}.values())
    read = rules_read_by(text for case in cases for text in (case.expr, *(lb for lb, _ in case.samples)))
    if read is not None:  # only the rules the cases read, and the records those read
        cut = directory / f"{run}.rules.yml"
        cut.write_text(rules_reading(rules.read_text(encoding="utf-8"), read), encoding="utf-8")
        rules = cut
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": EVALUATION_INTERVAL,
        "tests": [
            {
                "interval": fx.doc["interval"],
                "input_series": [
                    {"series": e["series"], "values": e["values"]} for e in fx.doc["input_series"]
                ],
                "promql_expr_test": [case.doc() for case in cases],
            }
        ],
    }
    path = directory / f"{run}.test.yml"
    path.write_text(yaml.dump(test, Dumper=Dumper, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT,
        check=False,
    )
    output = result.stdout + result.stderr
    return Outcome(result.returncode, output, parse_failures(output))


@pytest.fixture(scope="module")
def outcomes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mapping[str, Future[Outcome]]]:
    """Every promtool run this session's tests of this module need, started together."""
    promtool = require_promtool()
    wanted = sorted(
        {
            str(params["run"])
            for item in request.session.items
            if getattr(item, "module", None) is request.module
            and "run" in (params := getattr(getattr(item, "callspec", None), "params", {}))
        }
        or set(RUNS),
        key=lambda run: -len(raw(RUNS[run].stack).series),
    )
    directory = tmp_path_factory.mktemp("stacks-rules")
    files = {labels: rule_file(directory, labels) for labels in {RUNS[run].fleet_labels for run in wanted}}
    for run in wanted:
        checks(run)  # the expectations are read (and checked) before promtool starts
    pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="promtool")
    futures = {
        run: pool.submit(run_promtool, promtool, run, files[RUNS[run].fleet_labels], directory)
        for run in wanted
    }
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def check(outcomes: Mapping[str, Future[Outcome]], run: str, name: str) -> None:
    """Fail with promtool's own report of every case of check `name` it failed."""
    outcome = outcomes[run].result()
    cases = checks(run)[name]
    if outcome.returncode != 0 and not outcome.failed:
        pytest.fail(f"promtool test rules on {run} failed:\n{outcome.output[-6000:]}")
    failed = [(case, outcome.failed[case.key()]) for case in cases if case.key() in outcome.failed]
    report = "\n\n".join(f"{case.why}:\n{block}" for case, block in failed)
    assert not failed, f"{RUNS[run].stack} ({', '.join(RUNS[run].fleet_labels)}):\n{report}"


# ------------------------------------------------------------------ the tests

STACK_RUNS = list(STACKS)
KNOWN_GAPS: dict[tuple[str, str], str] = {}
"""Per-fleet rules that are wrong on a stack today, each strict: a fix turns the case red until
it is taken off this list."""


def gap(what: str, run: str) -> list[pytest.MarkDecorator]:
    reason = KNOWN_GAPS.get((what, run))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def runs(what: str, chosen: list[str]) -> list[Any]:
    return [pytest.param(run, marks=gap(what, run), id=run) for run in chosen]


def test_each_stack_fixture_names_its_engine_metrics_and_fleet() -> None:
    """The tables above hold what the fixtures hold: every signal's metric, the fleet's labels."""
    for name, stack in STACKS.items():
        fx = raw(name)
        assert fx.doc["interval"] == twin(name).doc["interval"] and fx.at == twin(name).at, name
        missing = {s: m for s, m in stack.signals.items() if m not in fx.names()}
        assert not missing, f"{name}: {missing}"
        engine = [found for n, found, _ in fx.series if n in set(stack.signals.values())]
        assert any(all(found.get(k, "") == v for k, v in stack.fleet.items()) for found in engine), name
    assert set(GPU.values()) <= raw("dcgm").names()


@pytest.mark.parametrize("run", STACK_RUNS)
def test_engine_signals_are_recorded_under_the_fleets_labels(
    outcomes: Mapping[str, Future[Outcome]], run: str
) -> None:
    check(outcomes, run, "signals")


@pytest.mark.parametrize("run", runs("requests", [s for s in STACK_RUNS if STACKS[s].requests]))
def test_request_rate_is_the_fleets_own(outcomes: Mapping[str, Future[Outcome]], run: str) -> None:
    check(outcomes, run, "requests")


@pytest.mark.parametrize("run", runs("alert", STACK_RUNS))
def test_symptom_alert_fires_for_the_fleet_at_its_moment_only(
    outcomes: Mapping[str, Future[Outcome]], run: str
) -> None:
    fx, slo = raw(run), load_slo()
    _, signal = SYMPTOM_ALERTS[str(fx.doc["symptom"])]
    line, wait = _target(slo, signal)
    # The twin says the fleet breaches the SLO at `at` and is healthy before: the alert must follow.
    assert twin_peak(run, signal, fx.at) > line, f"stack-{run}.yaml: {signal} under {line} at {fx.at}"
    assert twin_peak(run, signal, start_moment(wait)) < line, (
        f"stack-{run}.yaml: {signal} over {line} at start"
    )
    check(outcomes, run, "alert")


@pytest.mark.parametrize("run", ["tgi"])
def test_tgi_records_one_series_for_its_namespaces_deployment(
    outcomes: Mapping[str, Future[Outcome]], run: str
) -> None:
    check(outcomes, run, "tgi")


@pytest.mark.parametrize("run", ["kserve-services"])
def test_kserve_services_are_recorded_and_paged_apart_with_fleet_labels(
    outcomes: Mapping[str, Future[Outcome]], run: str
) -> None:
    check(outcomes, run, "services")


@pytest.mark.parametrize("run", ["triton"])
def test_triton_request_rate_is_the_tensorrt_llm_models_alone(
    outcomes: Mapping[str, Future[Outcome]], run: str
) -> None:
    check(outcomes, run, "triton")


@pytest.mark.parametrize("run", runs("dcgm", ["dcgm"]))
def test_dcgm_gpu_signals_join_the_fleet(outcomes: Mapping[str, Future[Outcome]], run: str) -> None:
    check(outcomes, run, "dcgm")
