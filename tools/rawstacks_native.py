"""Raw series of the stacks whose exporters write families of their own, on `tools.rawstacks`'
base: TGI 3.3, trtllm-serve (TensorRT-LLM's own collector), Triton with the TensorRT-LLM
backend, NVIDIA Dynamo's frontend and planner beside its vLLM workers, and dcgm-exporter
running its default counters only.

Why apart from rawstacks: these are not vLLM's or SGLang's series renamed but other quantities
(TGI's per-request mean time per token, Triton's cumulative microsecond counters per model of
its repository, Dynamo's user-facing frontend over disaggregated pools, an SM clock where the
throttle counters are off), each on its own bucket edges:

- TGI: every `*duration` histogram on 35 edges 0.0001 x 1.5^k (router/src/server.rs; the
  excerpt's `le` strings), the input and generated lengths on 100 linear edges up to
  max_input_tokens / max_total_tokens; counters without `_total`, no model label, no TTFT;
- trtllm-serve: vLLM's edges (its collector copies them, as the excerpt shows), `model_name`
  and `engine_type="trtllm"`, prometheus_client's `_created`;
- Triton: per model (`ensemble`, `preprocessing`, `tensorrt_llm`, `postprocessing`,
  `version="1"`), the opt-in first-response histogram on the decoupled models only, on
  Triton's default millisecond edges, and the backend's `nv_trt_llm_*` gauges;
- Dynamo: the frontend's edges as its /metrics shows them (shared/real/newer fe.log), request
  families under the lower-cased model, `dynamo_namespace` dashed from the PodMonitor; the
  workers' vLLM series with the labels Dynamo 1.6 injects (`dynamo_namespace` underscored).

The stories are the `tools.synth.Fleet` signals of each replica: rates, quantile targets,
queue and KV, turned into each stack's families. `le` is written as each client writes it
(Rust and Go: `100`, `0.00015000000000000001`; prometheus_client: `100.0`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tools.rawedge import _k8s_hash
from tools.rawstacks import Fmt, Labels, Site, StackFleet, Target
from tools.rawsynth import (
    VLLM_ITL_BUCKETS,
    VLLM_REQUEST_LATENCY_BUCKETS,
    VLLM_TTFT_BUCKETS,
    Array,
    RawSpec,
    _digest,
    _fmt_float,
    _fmt_gauge,
    _fmt_int,
    _Life,
)
from tools.synth import Fleet

TGI_MAX_INPUT_TOKENS, TGI_MAX_TOTAL_TOKENS, TGI_MAX_BATCH_TOTAL_TOKENS = 8191, 8192, 162480
TGI_INPUT_BUCKETS = tuple(TGI_MAX_INPUT_TOKENS / 100.0 * (x + 1) for x in range(100))
TGI_GENERATED_BUCKETS = tuple(TGI_MAX_TOTAL_TOKENS / 100.0 * (x + 1) for x in range(100))
TRITON_FIRST_RESPONSE_MS = (100.0, 500.0, 2000.0, 5000.0)
TRITON_MODELS = ("ensemble", "preprocessing", "tensorrt_llm", "postprocessing")
TRITON_FAILURES = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
DYNAMO_TTFT_BUCKETS = (
    0,
    0.0022,
    0.0047,
    0.01,
    0.022,
    0.047,
    0.1,
    0.22,
    0.47,
    1,
    2.2,
    4.7,
    10,
    22,
    48,
    100,
    220,
    480,
)
DYNAMO_ITL_BUCKETS = (0, 0.0019, 0.0035, 0.0067, 0.013, 0.024, 0.045, 0.084, 0.16, 0.3, 0.56, 1.1, 2)
DYNAMO_DURATION_BUCKETS = (0, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260)
DYNAMO_INPUT_BUCKETS = (0, 100, 210, 430, 870, 1800, 3600, 7400, 15000, 31000, 63000, 130000)
DYNAMO_OUTPUT_BUCKETS = (0, 100, 210, 430, 880, 1800, 3700, 7600, 16000, 32000)
DCGM = Target(
    "nvidia-dcgm-exporter", "gpu-metrics", 9400, "nvidia-dcgm-exporter", service="nvidia-dcgm-exporter"
)
H100_SM_MHZ, H100_MEM_MHZ, H100_FB_MIB = 1980.0, 2619.0, 80989.0
MEAN_OF_P99 = float(np.exp(-2.3263478740408408 * 0.45 + 0.45**2 / 2))
"""mean / P99 of a lognormal of sigma 0.45, as rawsynth draws e2e latencies."""

Hist = tuple[str, tuple[float, ...], Mapping[float, Array], Array, float, Array | None]


def _tgi_durations() -> tuple[float, ...]:
    edges, value = [], 0.0001
    for _ in range(35):
        value *= 1.5
        edges.append(value)
    return tuple(edges)


TGI_DURATION_BUCKETS = _tgi_durations()
"""0.0001 times 1.5, 35 times over, accumulated as TGI does (a power would differ in the last digit)."""


class NativeFleet(StackFleet):
    """Shared by the stacks below: a replica's requests, tokens, histograms and gauges."""

    def requests(self, name: str) -> tuple[Array, Array, Array, Array]:
        """Finished requests per step, the failed ones among them, prompt and generated tokens."""
        n, split = self._requests(name, ("stop", "length", "abort"))
        prompt, gen = (
            self._tokens(name, "prompt_tokens_rate", n),
            self._tokens(name, "generation_tokens_rate", n),
        )
        return n, split["abort"], prompt, gen

    def hists(self, labels: Mapping[str, str], life: _Life, rows: list[Hist], le: bool = False) -> None:
        """(metric, edges, quantile targets, counts, sigma, sums) histograms; `le` as Go and Rust write it."""
        for metric, edges, targets, counts, sigma, sums in rows:
            self._hist(metric, labels, edges, targets, counts, life, sigma=sigma, sums=sums, jitter=0.04)
            if le:
                self.go_le(f"{metric}_bucket")

    def gauges(
        self, labels: Mapping[str, str], life: _Life, rows: list[tuple[str, Array]], fmt: Fmt = _fmt_int
    ) -> None:
        for metric, values in rows:
            self.gauge(metric, labels, values, life, fmt)

    def quantiles(self, name: str, signal: str, scale: float = 1.0) -> dict[float, Array]:
        """The P50 and P99 targets of a latency signal (`ttft`, `tpot`)."""
        return {q: self.sig(f"{signal}_p{int(q * 100)}_seconds", name) * scale for q in (0.5, 0.99)}

    def fleet_or(self, signal: str, default: float) -> Array:
        raw = self.f.series.get((signal, ()))
        return np.full(self.n, default) if raw is None else np.nan_to_num(raw, nan=default)


# --- TGI -----------------------------------------------------------------------------------------
class TgiFleet(NativeFleet):
    """Text Generation Inference 3.3 (metrics-exporter-prometheus): no model label on any series,
    counters without `_total`, no TTFT; per-request mean time per token, queue and forward-pass
    durations on TGI's exponential edges; KV shows as the current batch's reserved tokens
    against `tgi_batch_max_total_tokens`."""

    def engine(self, name: str) -> None:
        life = self.life(name, f"{name}/engine")
        base = {"instance": name}
        n, failed, prompt, gen = self.requests(name)
        ok, validation = n - failed, np.floor(failed * 0.7)
        for metric, labels, inc in (
            ("tgi_request_count", base, n),
            ("tgi_request_success", base, ok),
            ("tgi_request_failure", {**base, "err": "validation"}, validation),
            ("tgi_request_failure", {**base, "err": "generation"}, failed - validation),
        ):
            self.steady_counter(metric, labels, inc, life)
        running = self.poisson(self.sig("requests_running", name))
        kv = np.clip(self._gauge(name, "kv_usage_ratio"), 0, 1)
        self.gauges(
            base,
            life,
            [
                ("tgi_queue_size", self.poisson(self.sig("queue_waiting", name))),
                ("tgi_batch_current_size", running),
                ("tgi_batch_current_max_tokens", np.round(kv * TGI_MAX_BATCH_TOTAL_TOKENS)),
                ("tgi_batch_max_total_tokens", np.full(self.n, float(TGI_MAX_BATCH_TOTAL_TOKENS))),
            ],
        )
        tpot = self.quantiles(name, "tpot")
        prompt_p95 = np.minimum(self.sig("prompt_tokens_p95", name), 8000)
        self.hists(
            base,
            life,
            [
                (
                    "tgi_request_duration",
                    TGI_DURATION_BUCKETS,
                    {0.99: self.sig("e2e_p99_seconds", name)},
                    ok,
                    0.45,
                    None,
                ),
                (
                    "tgi_request_queue_duration",
                    TGI_DURATION_BUCKETS,
                    {0.99: self.sig("queue_time_p99_seconds", name)},
                    ok,
                    1.0,
                    None,
                ),
                ("tgi_request_mean_time_per_token_duration", TGI_DURATION_BUCKETS, tpot, ok, 0.5, None),
                ("tgi_request_input_length", TGI_INPUT_BUCKETS, {0.95: prompt_p95}, n, 0.3, prompt),
                (
                    "tgi_request_generated_tokens",
                    TGI_GENERATED_BUCKETS,
                    {0.95: self.sig("output_tokens_p95", name)},
                    ok,
                    0.35,
                    gen,
                ),
            ],
            le=True,
        )
        step = np.clip(self.sig("tpot_p50_seconds", name), 1e-3, None)
        forward = {
            "prefill": (np.round(n / 1.6), {0.99: self.sig("prefill_time_p99_seconds", name)}),
            "decode": (self.poisson(np.where(running > 0, self.dt / step, 0.0)), tpot),
        }
        for method, (count, targets) in forward.items():
            own = {**base, "method": method}
            self.hists(
                own, life, [("tgi_batch_forward_duration", TGI_DURATION_BUCKETS, targets, count, 0.5, None)]
            )
            self.steady_counter("tgi_batch_inference_count", own, count, life)
            self.steady_counter("tgi_batch_inference_success", own, count, life)
        self.go_le("tgi_batch_forward_duration_bucket")


# --- trtllm-serve ----------------------------------------------------------------------------------
class TrtllmFleet(NativeFleet):
    """trtllm-serve's own collector: `trtllm_*` with `model_name` and `engine_type="trtllm"`,
    prometheus_client's `_created` beside each counter and histogram, vLLM's bucket edges; KV use
    and the KV cache's (prefix) hit rate are gauges between 0 and 1."""

    def engine(self, name: str) -> None:
        life = self.life(name, f"{name}/engine")
        created = self.t0 - life.uptime
        life = _Life(life.segments, life.mask, life.vanished, life.uptime, life.target, created)
        base = {"model_name": self.spec.model, "engine_type": "trtllm", "instance": name}
        n, failed, _prompt, _gen = self.requests(name)
        ok = n - failed
        length = np.floor(np.clip(self.sig("truncated_ratio", name), 0, 1) * ok)
        born = self.finish(self._created(life.segments, created), life.mask, life.vanished)
        for reason, inc in (("stop", ok - length), ("length", length), ("cancelled", failed)):
            own = {**base, "finished_reason": reason}
            self.steady_counter("trtllm_request_success_total", own, inc, life)
            self.put("trtllm_request_success_created", own, born, life.target, _fmt_float)
        self.gauges(
            base,
            life,
            [
                ("trtllm_num_requests_waiting", self.poisson(self.sig("queue_waiting", name))),
                ("trtllm_num_requests_running", self.poisson(self.sig("requests_running", name))),
            ],
        )
        self.gauges(
            base,
            life,
            [
                ("trtllm_kv_cache_utilization", np.clip(self._gauge(name, "kv_usage_ratio"), 0, 1)),
                (
                    "trtllm_kv_cache_hit_rate",
                    np.clip(self.noisy(self.sig("prefix_hit_ratio", name), 0.03), 0, 1),
                ),
            ],
            _fmt_gauge,
        )
        self.hists(
            base,
            life,
            [
                (
                    "trtllm_time_to_first_token_seconds",
                    VLLM_TTFT_BUCKETS,
                    self.quantiles(name, "ttft"),
                    ok,
                    0.5,
                    None,
                ),
                (
                    "trtllm_time_per_output_token_seconds",
                    VLLM_ITL_BUCKETS,
                    self.quantiles(name, "tpot"),
                    ok,
                    0.5,
                    None,
                ),
                (
                    "trtllm_e2e_request_latency_seconds",
                    VLLM_REQUEST_LATENCY_BUCKETS,
                    {0.99: self.sig("e2e_p99_seconds", name)},
                    ok,
                    0.45,
                    None,
                ),
                (
                    "trtllm_request_queue_time_seconds",
                    VLLM_REQUEST_LATENCY_BUCKETS,
                    {0.99: self.sig("queue_time_p99_seconds", name)},
                    ok,
                    1.0,
                    None,
                ),
            ],
        )


# --- Triton with the TensorRT-LLM backend ---------------------------------------------------------
class TritonFleet(NativeFleet):
    """Triton Inference Server serving an ensemble over the TensorRT-LLM backend: per model
    cumulative microsecond counters (no latency histogram but the opt-in first-response one), a
    pending count that stays near zero (the decoupled backend takes every request at once and
    queues it itself: `nv_trt_llm_request_metrics{request_type="waiting"}`), and the backend's
    KV-block gauges on `tensorrt_llm`."""

    MAX_BLOCKS, MAX_BATCH = 10240, 256

    def engine(self, name: str) -> None:
        life = self.life(name, f"{name}/engine")
        n, failed, _prompt, _gen = self.requests(name)
        rejected = self.poisson(n * np.clip(self.fleet_or("rejected_ratio", 0.001), 0, 1))
        e2e = self.sig("e2e_p99_seconds", name) * MEAN_OF_P99
        seconds = {
            "ensemble": e2e + 0.008,
            "preprocessing": 0.0031,
            "tensorrt_llm": e2e,
            "postprocessing": 0.0019,
        }
        for model in TRITON_MODELS:
            own = {"model": model, "version": "1", "instance": name}
            llm = model in ("ensemble", "tensorrt_llm")
            ok = n - failed if llm else n
            fails = {"BACKEND": failed, "REJECTED": rejected} if llm else {}
            for reason in TRITON_FAILURES:
                inc = fails.get(reason, np.zeros(self.n))
                self.steady_counter("nv_inference_request_failure", {**own, "reason": reason}, inc, life)
            queue = 0.0 if model == "ensemble" else 0.00004
            for metric, inc in (
                ("nv_inference_request_success", ok),
                ("nv_inference_count", ok),
                ("nv_inference_exec_count", ok),
                ("nv_inference_request_duration_us", np.round(ok * seconds[model] * 1e6)),
                ("nv_inference_queue_duration_us", np.round(ok * queue * 1e6)),
            ):
                self.steady_counter(metric, own, inc, life)
            pending = self.poisson(np.full(self.n, 0.05 if llm else 0.0))
            self.gauge("nv_inference_pending_request_count", own, pending, life, _fmt_int)
            if llm:  # the decoupled models only
                ttft = self.quantiles(name, "ttft", 1000.0)
                first = {q: v + (8.0 if model == "ensemble" else 0.0) for q, v in ttft.items()}
                hist = (
                    "nv_inference_first_response_histogram_ms",
                    TRITON_FIRST_RESPONSE_MS,
                    first,
                    ok,
                    0.5,
                    None,
                )
                self.hists(own, life, [hist], le=True)
        llm_labels = {"model": "tensorrt_llm", "version": "1", "instance": name}
        active = self.poisson(self.sig("requests_running", name))
        prefilling = np.clip(self.sig("request_rate", name), 0, None) * self.sig(
            "prefill_time_p99_seconds", name
        )
        requests = {
            "waiting": self.poisson(self.sig("queue_waiting", name)),
            "context": self.poisson(prefilling * 0.4),
            "scheduled": active,
            "max": np.full(self.n, float(self.MAX_BATCH)),
            "active": active,
        }
        for kind, values in requests.items():
            self.gauge(
                "nv_trt_llm_request_metrics", {**llm_labels, "request_type": kind}, values, life, _fmt_int
            )
        used = np.round(np.clip(self._gauge(name, "kv_usage_ratio"), 0, 1) * self.MAX_BLOCKS)
        blocks = {
            "max": np.full(self.n, float(self.MAX_BLOCKS)),
            "free": self.MAX_BLOCKS - used,
            "used": used,
            "tokens_per": np.full(self.n, 64.0),
            "fraction": used / self.MAX_BLOCKS,
        }
        for kind, values in blocks.items():
            fmt = _fmt_gauge if kind == "fraction" else _fmt_int
            self.gauge(
                "nv_trt_llm_kv_cache_block_metrics",
                {**llm_labels, "kv_cache_block_type": kind},
                values,
                life,
                fmt,
            )


# --- NVIDIA Dynamo ---------------------------------------------------------------------------------
class DynamoFleet(NativeFleet):
    """Dynamo 1.6 serving one model disaggregated: vLLM 0.31 prefill and decode workers (the
    replicas; the first `prefill` of them prefill) with the labels Dynamo injects into their vLLM
    series and its own KV gauges, and beside them the frontend (what users feel: TTFT, ITL,
    request duration, queue and in-flight counts under the lower-cased model) and the planner's
    replica counts. The dashed `dynamo_namespace` on the frontend and planner comes from their
    PodMonitor; the workers' own series keep Dynamo's underscored spelling."""

    def __init__(
        self, fleet: Fleet, spec: RawSpec, site: Site, prefill: int, graph: str = "llm-prod"
    ) -> None:
        super().__init__(fleet, spec, site, Target(f"{site.namespace}/dynamo-worker", "system", 9090, "main"))
        self.prefill, self.graph = set(fleet.names[:prefill]), graph
        self.side = {
            part: f"{self.replicaset(f'{graph}-{part}')}-{_k8s_hash(graph, part, length=5)}"
            for part in ("frontend", "planner")
        }

    def component(self, name: str) -> str:
        return "prefill" if name in self.prefill else "backend"

    def _gauge(self, name: str, signal: str, rel: float | None = None) -> Array:
        """KV use held high by design moves little from one scrape to the next."""
        return super()._gauge(name, signal, 0.025 if signal == "kv_usage_ratio" else rel)

    def engine(self, name: str) -> None:
        self._vllm(name, mixed=False)
        life = self.life(name, f"{name}/engine")
        own = {
            "model": self.spec.model,
            "dynamo_component": self.component(name),
            "dp_rank": "0",
            "instance": name,
        }
        kv = self.own_values("vllm:kv_cache_usage_perc", name)
        self.put("dynamo_component_gpu_cache_usage_percent", own, kv, life.target, _fmt_gauge)
        hit = np.clip(self.noisy(self.sig("prefix_hit_ratio", name), 0.03), 0, 1)
        self.gauge("dynamo_component_kv_cache_hit_rate", own, hit, life)

    def engine_series(self, metric: str, labels: Labels, name: str) -> list[tuple[str, Labels]]:
        if not metric.startswith("vllm:"):
            return [(metric, labels)]
        dynamo = {
            "dynamo_namespace": self.graph.replace("-", "_"),
            "dynamo_component": self.component(name),
            "dynamo_endpoint": "generate",
            "worker_id": _digest(self.f.name, name, "lease")[:16],
            "model": self.spec.model,
        }
        return [(metric, {**labels, **dynamo})]

    def cluster_pods(self) -> list[tuple[str, str, Labels]]:
        return [(pod, f"{self.graph}-{part}", {}) for part, pod in self.side.items()]

    def monitor(self, part: str, endpoint: str, port: int) -> Labels:
        target = Target(f"{self.site.namespace}/dynamo-{part}", endpoint, port, "main")
        pod = self.side[part]
        return {**target.labels(self.site.namespace, pod, self.side_ip(pod)), "dynamo_namespace": self.graph}

    def extra(self) -> None:
        decode = [x for x in self.f.names if x not in self.prefill]
        prefill = sorted(self.prefill)

        def pool(signal: str, names: list[str], how: str = "mean") -> Array:
            return np.asarray(getattr(np, how)([self.sig(signal, x) for x in names], axis=0), dtype=float)

        where = "frontend"
        everywhere = _Life([(0, self.n)], np.ones(self.n, dtype=bool), False, 86400.0, where)
        model = {**self.monitor("frontend", "http", 8000), "model": self.spec.model.lower()}
        rate = np.clip(pool("request_rate", decode, "sum"), 0, None)
        n = self.poisson(rate * self.dt)
        per_request = n / np.clip(rate * self.dt, 1e-9, None)
        gen = np.round(pool("generation_tokens_rate", decode, "sum") * self.dt * per_request)
        prompt = np.round(pool("prompt_tokens_rate", decode, "sum") * self.dt * per_request)
        errors = self.poisson(n * 0.0015)
        request = {**model, "endpoint": "chat_completions", "request_type": "stream"}
        for metric, labels, inc in (
            ("dynamo_frontend_requests_total", {**request, "status": "success"}, n - errors),
            (
                "dynamo_frontend_requests_total",
                {**request, "status": "error", "error_type": "internal"},
                errors,
            ),
            (
                "dynamo_frontend_model_rejection_total",
                model,
                self.poisson(n * self.fleet_or("rejected_ratio", 0.001)),
            ),
            ("dynamo_frontend_output_tokens_total", model, gen),
        ):
            self.steady_counter(metric, labels, inc, everywhere)
        ttft = {
            0.5: pool("ttft_p50_seconds", prefill) + 0.02,
            0.99: pool("ttft_p99_seconds", prefill, "max") * 1.05 + 0.03,
        }
        e2e = pool("e2e_p99_seconds", decode)
        queued = self.poisson(rate * ttft[0.5])
        self.put("dynamo_frontend_queued_requests", model, queued, where)
        self.put(
            "dynamo_frontend_inflight_requests", model, queued + self.poisson(rate * e2e * MEAN_OF_P99), where
        )
        itl = {0.5: pool("tpot_p50_seconds", decode), 0.99: pool("tpot_p99_seconds", decode)}
        edges = [
            tuple(float(v) for v in e)
            for e in (
                DYNAMO_TTFT_BUCKETS,
                DYNAMO_ITL_BUCKETS,
                DYNAMO_DURATION_BUCKETS,
                DYNAMO_INPUT_BUCKETS,
                DYNAMO_OUTPUT_BUCKETS,
            )
        ]
        self.hists(
            model,
            everywhere,
            [
                ("dynamo_frontend_time_to_first_token_seconds", edges[0], ttft, n, 0.5, None),
                (
                    "dynamo_frontend_inter_token_latency_seconds",
                    edges[1],
                    itl,
                    np.clip(gen - n, 0, None),
                    0.5,
                    None,
                ),
                ("dynamo_frontend_request_duration_seconds", edges[2], {0.99: e2e}, n, 0.45, None),
                (
                    "dynamo_frontend_input_sequence_tokens",
                    edges[3],
                    {0.95: pool("prompt_tokens_p95", decode)},
                    n,
                    0.3,
                    prompt,
                ),
                (
                    "dynamo_frontend_output_sequence_tokens",
                    edges[4],
                    {0.95: pool("output_tokens_p95", decode)},
                    n,
                    0.35,
                    gen,
                ),
            ],
            le=True,
        )
        display = {**self.monitor("frontend", "http", 8000), "model": self.spec.model}
        for metric, value in (
            ("context_length", 40960.0),
            ("kv_cache_block_size", 16.0),
            ("total_kv_blocks", 24576.0),
        ):
            self.put(f"dynamo_frontend_model_{metric}", display, np.full(self.n, value), where)
        planner = self.monitor("planner", "metrics", 9085)
        for part, names in (("prefill", prefill), ("decode", decode)):
            self.put(
                f"dynamo_planner_num_{part}_replicas", planner, np.full(self.n, float(len(names))), "planner"
            )


# --- dcgm-exporter with its default counters only ---------------------------------------------------
class DcgmDefaultFleet(StackFleet):
    """A vLLM fleet whose GPU Operator runs dcgm-exporter's default counters
    (etc/default-counters.csv): no THERMAL/POWER_VIOLATION, no CLOCKS_EVENT_REASONS, no ECC_DBE
    counters, so a throttled GPU shows only as an SM clock below its own baseline, beside its
    temperature and power. Scraped by the GPU Operator's ServiceMonitor (no honorLabels: the
    workload's pod arrives as `exported_pod`). The story's `gpu_throttle` becomes the SM clock
    (held at the stack-only input `throttled_mhz`) and nothing else."""

    def extra(self) -> None:
        for name in self.f.names:
            self._dcgm_default(name)

    def _dcgm_default(self, name: str) -> None:
        node, index = self.node(name), self.f.names.index(name) % self.site.per_node
        exporter = f"nvidia-dcgm-exporter-{_k8s_hash(node, 'dcgm', length=5)}"
        uuid = _digest("gpu", node, str(index))
        scrape = DCGM.labels("gpu-operator", exporter, f"10.42.{self.site.subnet}.{240 + int(node[-1])}")
        gpu = {
            "gpu": str(index),
            "device": f"nvidia{index}",
            "Hostname": node,
            "modelName": self.spec.gpu_model,
            "UUID": f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}",
            "pci_bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
            "DCGM_FI_DRIVER_VERSION": self.spec.driver,
        }
        workload = {
            "exported_namespace": self.site.namespace,
            "exported_pod": self.pod(name),
            "exported_container": self.container(name),
        }
        labels, where = {**scrape, **gpu, **workload}, f"{node}/dcgm"

        def put(field: str, values: Array, fmt: Fmt = _fmt_int) -> None:
            self.put(f"DCGM_FI_{field}", labels, values, where, fmt)

        throttled = self.sig("gpu_throttle", name, "0") > 0
        held = self.extra_signal("throttled_mhz", name, 1095.0)
        put("DEV_SM_CLOCK", np.where(throttled, held, H100_SM_MHZ) - 15.0 * self.rng.integers(0, 2, self.n))
        put("DEV_MEM_CLOCK", np.full(self.n, H100_MEM_MHZ))
        temp = np.round(self.noisy(self.sig("gpu_temp_celsius", name, "0"), 0.01))
        put("DEV_GPU_TEMP", temp)
        put("DEV_MEMORY_TEMP", temp + 6)
        power = np.clip(self.noisy(self.sig("gpu_power_watts", name, "0"), 0.04), 60, None)
        put("DEV_POWER_USAGE", power, lambda v: f"{v:.3f}")
        joules = 450.0 * self._uptime(name, "node") * 20
        put(
            "DEV_TOTAL_ENERGY_CONSUMPTION",
            self.counter(power * self.dt * 1000.0, [(0, self.n)], joules * 1000.0),
        )
        util = np.clip(np.round(100 * self.noisy(self.sig("gpu_util_ratio", name, "0"), 0.05)), 0, 100)
        put("DEV_GPU_UTIL", util)
        put("DEV_MEM_COPY_UTIL", np.clip(np.round(util * 0.55), 0, 100))
        used = np.round(
            np.clip(self.noisy(self.sig("gpu_memory_used_ratio", name, "0"), 0.002), 0, 1) * H100_FB_MIB
        )
        put("DEV_FB_USED", used)
        put("DEV_FB_FREE", H100_FB_MIB - used)
        xid = {**labels, "err_code": "0", "err_msg": "No Error"}  # the last XID: none since boot
        self.put("DCGM_FI_DEV_XID_ERRORS", xid, np.zeros(self.n), where)
        healthy = {
            "FB_RESERVED": 570.0,
            "PCIE_REPLAY_COUNTER": 0.0,
            "ROW_REMAP_FAILURE": 0.0,
            "UNCORRECTABLE_REMAPPED_ROWS": 0.0,
            "CORRECTABLE_REMAPPED_ROWS": float(int(uuid[:2], 16) % 3),
        }
        for field, value in healthy.items():
            put(f"DEV_{field}", np.full(self.n, value))
        active = np.clip(util / 100.0 * 0.93, 0, 1)
        for field, share in (("GR_ENGINE_ACTIVE", 1.0), ("PIPE_TENSOR_ACTIVE", 0.42), ("DRAM_ACTIVE", 0.61)):
            put(f"PROF_{field}", active * share, lambda v: f"{v:.6f}")


__all__ = [
    "DYNAMO_TTFT_BUCKETS",
    "TGI_DURATION_BUCKETS",
    "TGI_GENERATED_BUCKETS",
    "TGI_INPUT_BUCKETS",
    "TRITON_FIRST_RESPONSE_MS",
    "DcgmDefaultFleet",
    "DynamoFleet",
    "TgiFleet",
    "TritonFleet",
    "TrtllmFleet",
]
