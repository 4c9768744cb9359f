"""`triage audit`: the deployment checklist (seeds, 推理部署检查清单) held against a live fleet.

Every item of the checklist, in its own sections, gets one status:

- `pass` / `fail` when what Prometheus holds settles it: the engines' metrics (and the
  labels of `vllm:cache_config_info`, where vLLM publishes its cache configuration),
  the alerting and recording rules it evaluates, the targets it scrapes, DCGM and
  kube-state-metrics series;
- `unknown` when metrics cannot show it (probes, quantisation quality, network MTU...)
  or the data that would show it could not be read: the evidence then says what would
  settle it, because "unknown is not healthy" and an auditor needs the next question;
- `not_applicable` when the fleet shows the premise does not hold (prefix caching off,
  long prompts rare).

A status speaks for what can be seen; where an item has parts no metric shows (the
warm-up half of "warm-up or minimum replicas"), the evidence says which part was checked.

This module is pure: it takes what was fetched (`Fetched`: metric names, the rules and
targets API replies, a `SignalFrame` and instant query results) and returns an
`AuditReport`; `triage.audit.fetch` does the IO. Same inputs, same report.

Alert rules are read the way Prometheus evaluates them: an alert on `triage:ttft_p99_seconds`
is expanded through the recording rule that defines it, so a P99 recorded once and
alerted on elsewhere is still seen as a P99, and a mean hidden behind a recording rule
is still seen as a mean. PromQL is scanned, not parsed: names, function calls and their
parenthesised arguments are all the checks need.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
import numpy.typing as npt

from signals.catalog import Catalog, QueryOptions, render, resolve
from signals.frame import SignalFrame
from signals.timeparse import format_duration, format_instant
from triage.core.render import markdown_template

if TYPE_CHECKING:
    from triage.rules import Slo

Status = Literal["pass", "fail", "unknown", "not_applicable"]
STATUS_ORDER: Final[tuple[Status, ...]] = ("fail", "unknown", "pass", "not_applicable")
FORMATS: Final = ("text", "markdown", "json")
DEFAULT_LOOKBACK: Final = 6 * 3600.0
FloatArray = npt.NDArray[np.float64]


# ------------------------------------------------------------------------------ the checklist


@dataclass(frozen=True)
class Section:
    """One section of the checklist, in its order; `original` is the checklist's own heading."""

    id: str
    title: str
    original: str


@dataclass(frozen=True)
class ChecklistItem:
    """One checklist line: a stable id, an English title, the original words.

    `settle` is the evidence that would settle the item when metrics cannot; `fix` is
    what to do when it fails (or turns out not done).
    """

    id: str
    section: str
    title: str
    original: str
    settle: str
    fix: str


SECTIONS: Final[tuple[Section, ...]] = (
    Section("capacity", "Capacity and memory", "容量与显存"),
    Section("scheduling", "Scheduling", "调度"),
    Section("cache", "Cache and parallelism", "缓存与并行"),
    Section("quantization", "Quantization", "量化"),
    Section("deployment", "Deployment", "部署"),
    Section("nodes", "Nodes and cluster", "节点与集群"),
    Section("routing", "Routing and degradation", "路由与降级"),
    Section("observability", "Observability and cost", "观测与成本"),
    Section("red_lines", "Red lines", "红线"),
)
_SECTION_TITLES: Final = {s.id: s.title for s in SECTIONS}


def _i(section: str, slug: str, title: str, original: str, settle: str, fix: str) -> ChecklistItem:
    return ChecklistItem(f"{section}.{slug}", section, title, original, settle, fix)


ITEMS: Final[tuple[ChecklistItem, ...]] = (
    # 容量与显存
    _i(
        "capacity",
        "memory_budget",
        "GPU memory budgeted in four parts: weights, KV cache, activations, fixed overhead",
        "算过权重、KV、激活、固定开销四部分显存。",
        "the written budget per model and GPU type, checked against the engine's start-up log "
        "(weights GiB, KV cache GiB, CUDA graphs); metrics show only the total",
        "Write the budget per model and GPU: weights (parameters x bytes), KV (per-token KV x tokens), "
        "activations at max_num_batched_tokens, fixed overhead (CUDA context, graphs), and keep it with "
        "the deployment.",
    ),
    _i(
        "capacity",
        "concurrency_estimate",
        "Concurrency ceiling estimated as usable KV / KV per request, corrected by a load test",
        "用“可用 KV / 每请求 KV”估过并发上限，并用压测修正。",
        "the estimate and the load-test report that corrected it",
        "Divide the KV capacity (num_gpu_blocks x block_size tokens) by the tokens one request holds at "
        "P95 prompt + output, then load-test at that concurrency and correct the figure.",
    ),
    _i(
        "capacity",
        "kv_per_token",
        "KV per token computed from layers, KV heads, head_dim and precision",
        "每 token KV 按层数、KV head、head_dim、精度算过。",
        "the calculation 2 x layers x kv_heads x head_dim x bytes per element, from the model's config.json",
        "Compute it from config.json (num_hidden_layers, num_key_value_heads, head_dim) and the KV dtype, "
        "and keep it with the memory budget.",
    ),
    _i(
        "capacity",
        "gqa_quant_kv",
        "Effect of GQA/MQA and quantisation on the KV cache confirmed",
        "GQA / MQA / 量化对 KV 的影响已确认。",
        "the model's num_key_value_heads against num_attention_heads, and the KV cache dtype in use",
        "Confirm the KV head count and whether the KV cache is quantised (e.g. fp8), and redo the "
        "per-token KV figure with them.",
    ),
    _i(
        "capacity",
        "long_context_pool",
        "Long-context requests get their own pool or a rate limit",
        "长上下文请求单独分池或限流。",
        "the gateway's routing rule or the separate deployment that serves long-context requests, "
        "and its rate limit",
        "Route requests above a length threshold to their own pool (or rate-limit them) so they cannot "
        "fill the KV cache of the interactive pool.",
    ),
    _i(
        "capacity",
        "gpu_memory_headroom",
        "gpu_memory_utilization leaves headroom, not set at the limit",
        "gpu_memory_utilization 留有余量，不贴极限。",
        "the engine's --gpu-memory-utilization (vLLM publishes it as a label of vllm:cache_config_info)",
        "Set gpu_memory_utilization to 0.90 or below unless a load test at the higher value passed: the "
        "rest absorbs activation peaks, CUDA graphs and fragmentation.",
    ),
    _i(
        "capacity",
        "memory_monitoring",
        "Memory peak, free KV blocks, OOM kills and preemptions are monitored",
        "显存峰值、空闲块、OOM、抢占有监控。",
        "engine KV use and preemption metrics, kube-state-metrics (OOMKilled), and alert rules on them",
        "Scrape the engines (KV use, preemptions), DCGM (framebuffer) and kube-state-metrics (OOMKilled), "
        "and alert on KV use near full with preemptions (`triage rules` generates KVCacheNearFull).",
    ),
    # 调度
    _i(
        "scheduling",
        "continuous_batching",
        "Continuous batching enabled; its throughput versus tail-latency trade-off understood",
        "连续批处理已启用，理解其吞吐与尾延迟取舍。",
        "engine metrics from vLLM or SGLang (both batch continuously), and the team's note on the trade-off",
        "Serve with an engine that batches continuously (vLLM, SGLang) and write down which tail "
        "latency the batch size buys its throughput with.",
    ),
    _i(
        "scheduling",
        "max_num_batched_tokens",
        "max_num_batched_tokens tuned for the online or offline workload",
        "max_num_batched_tokens 按在线 / 离线场景调过。",
        "--max-num-batched-tokens in the deployment and the load test that chose it (vLLM does not "
        "export it; vllm:iteration_tokens_total shows tokens per step)",
        "Online: keep it small enough that a prefill step does not stall decode (TPOT); offline: raise "
        "it for throughput. Load-test the value.",
    ),
    _i(
        "scheduling",
        "max_num_seqs_kv",
        "max_num_seqs matches the KV capacity (bigger is not better)",
        "max_num_seqs 与 KV 容量匹配，不是越大越好。",
        "--max-num-seqs from the deployment arguments (or a `max_num_seqs` label on the config_info "
        "signal through --catalog), against num_gpu_blocks x block_size",
        "Set max_num_seqs at or below KV capacity / tokens per request at P95 prompt + output; a larger "
        "batch only preempts.",
    ),
    _i(
        "scheduling",
        "chunked_prefill",
        "Chunked prefill evaluated, so long prompts do not starve decode",
        "分块 prefill 已评估，长 prompt 不会挤占 decode。",
        "--enable-chunked-prefill and --max-num-batched-tokens in the deployment (vLLM does not export "
        "them; V1 enables chunked prefill by default), or an `enable_chunked_prefill` label via --catalog",
        "Enable chunked prefill (or lower max_num_batched_tokens) so long prefills are split and decode "
        "keeps streaming; test under load first.",
    ),
    _i(
        "scheduling",
        "preemption_mode",
        "Preemption mode (swap or recompute) suits the hardware",
        "抢占策略（换出 / 重算）与硬件匹配。",
        "the engine's preemption mode (vLLM V1 always recomputes; V0 --preemption-mode) against host "
        "memory and PCIe bandwidth",
        "Recompute on fast GPUs with short prompts; swap only with fast host links and long prompts. "
        "Above all keep preemptions rare (KV headroom).",
    ),
    _i(
        "scheduling",
        "request_length_limit",
        "Single requests have a length limit; over-long requests have their own route",
        "单请求长度有上限，超长请求有单独路由。",
        "max_model_len (--max-model-len; SGLang exports sglang:context_len) against the longest prompt "
        "seen, and the gateway rule that routes over-long requests",
        "Set max_model_len (and a gateway max_tokens) to what the service promises, reject longer input "
        "with a readable error, and route long documents to their own pool.",
    ),
    _i(
        "scheduling",
        "p99_ttft_tpot_alerts",
        "Separate alerts on P99 TTFT and P99 TPOT",
        "P99 TTFT 与 P99 TPOT 分别设告警。",
        "the alerting rules this Prometheus (or its ruler) evaluates",
        "Alert on histogram_quantile(0.99, ...) of TTFT and of TPOT (inter-token latency) in two rules: "
        "they point at different mechanisms. `triage rules` generates TTFTP99High and TPOTP99High.",
    ),
    # 缓存与并行
    _i(
        "cache",
        "prefix_monitoring",
        "Prefix-cache hit ratio and evictions are monitored",
        "前缀缓存的命中率、驱逐量有监控。",
        "prefix-cache hit and query counters, and an alert rule on the hit ratio",
        "Scrape vllm:prefix_cache_hits_total / queries_total (SGLang: cache_hit_rate) and alert on a "
        "drop of the hit ratio (`triage rules` generates PrefixHitRatioDrop).",
    ),
    _i(
        "cache",
        "stable_prefix_first",
        "Stable prefix first, dynamic content last in prompts",
        "稳定前缀放前面，动态内容后置。",
        "the prompt templates (system prompt and tools before user content, no timestamps or ids at "
        "the start)",
        "Put the system prompt, tools and documents that repeat first and anything per-request last; "
        "a timestamp at the top defeats the cache.",
    ),
    _i(
        "cache",
        "prefix_affinity",
        "Requests sharing a prefix get sticky or prefix-aware routing",
        "同一前缀的请求有粘性或前缀感知路由。",
        "the router's configuration (session affinity, prefix-aware routing such as llm-d or the "
        "production-stack router)",
        "Route by prefix (or session) so a prefix stays on the replica that caches it.",
    ),
    _i(
        "cache",
        "tenant_isolation",
        "A cache shared across tenants has an isolation policy",
        "跨租户共享缓存有隔离策略。",
        "the engine's cache salting (vLLM cache_salt) or a pool per tenant",
        "Salt the prefix cache per tenant (cache_salt) or give tenants separate pools, so timing cannot "
        "reveal another tenant's prompt.",
    ),
    _i(
        "cache",
        "parallelism_order",
        "Parallelism chosen in the order quantise, single GPU, TP within a node, PP across nodes",
        "并行方案按“量化 → 单卡 → 同机 TP → 跨机 PP”顺序选过。",
        "the sizing note for each model (why this TP/PP)",
        "Try quantising to fit one GPU first, then TP inside one node, and PP across nodes only last.",
    ),
    _i(
        "cache",
        "tp_fast_interconnect",
        "Tensor parallelism stays within a fast interconnect, never across a slow network",
        "TP 放在高速互连内，未跨低速网络。",
        "the pod placement of TP groups (one node or NVLink domain) and NVLink counters",
        "Keep a TP group inside one NVLink/NVSwitch domain; span nodes only with pipeline parallelism.",
    ),
    _i(
        "cache",
        "topology_compared",
        "P99 and throughput of replicas, TP and PP compared under real load",
        "多副本、TP、PP 的 P99 与吞吐用真实负载比较过。",
        "the load-test report comparing the layouts",
        "Replay production traffic against each layout and keep the one that meets P99 at the lowest cost.",
    ),
    # 量化
    _i(
        "quantization",
        "bottleneck",
        "Clear whether the weights do not fit or the KV cache is short",
        "明确是权重装不下还是 KV 不够。",
        "the memory budget: weights against GPU memory, KV capacity against the concurrency needed",
        "Quantise weights when they do not fit; quantise or enlarge the KV cache when concurrency is short.",
    ),
    _i(
        "quantization",
        "compatibility",
        "Quantisation scheme compatible with the hardware and the engine version",
        "量化方案与硬件、引擎版本兼容。",
        "the model's quantization_config and the engine's supported-hardware table for that version",
        "Check the kernel support of the scheme (FP8 needs Hopper/Ada, AWQ/GPTQ kernels per version) "
        "before rolling out.",
    ),
    _i(
        "quantization",
        "calibration_data",
        "Calibration data covers the production input distribution",
        "校准数据覆盖生产输入分布。",
        "the calibration set and how it was sampled",
        "Calibrate on a sample of production prompts (languages, lengths, tools), not a generic corpus.",
    ),
    _i(
        "quantization",
        "golden_set",
        "Quality validated on the business golden set, not only perplexity",
        "业务 Golden Set 上验证过质量，不只看困惑度。",
        "the golden-set evaluation of the quantised model against the baseline",
        "Evaluate the quantised model on the business golden set and gate the rollout on it.",
    ),
    _i(
        "quantization",
        "long_tools_structured",
        "Accuracy on long context, tool calls and structured output tested specifically",
        "长上下文、工具调用、结构化输出的精度重点测过。",
        "evaluation results for long-context, tool-call and JSON-schema cases",
        "Add long-context, tool-call and structured-output cases to the evaluation; they degrade first.",
    ),
    _i(
        "quantization",
        "rollback",
        "The quantised version can be rolled back to the baseline",
        "量化版本可回退到基线。",
        "the deployment history: the baseline model still deployable (image, weights, config)",
        "Keep the baseline weights and config deployable and rehearse the rollback.",
    ),
    # 部署
    _i(
        "deployment",
        "startup_probe",
        "startupProbe allows enough time for model loading",
        "startupProbe 给足模型加载时间。",
        "the pod spec's startupProbe (failureThreshold x periodSeconds) against the measured load time",
        "Give the startupProbe failureThreshold x periodSeconds above the slowest measured model load.",
    ),
    _i(
        "deployment",
        "readiness_probe",
        "readinessProbe checks real availability, not just the port",
        "readinessProbe 检查真实可用性，不只看端口。",
        "the pod spec's readinessProbe (an HTTP check of /health or a tiny generation, not tcpSocket)",
        "Probe /health (or a one-token generation) so a replica that is up but cannot serve leaves "
        "the Service.",
    ),
    _i(
        "deployment",
        "liveness_probe",
        "livenessProbe cannot kill a process that is still loading",
        "livenessProbe 不会误杀加载中的进程。",
        "the pod spec: a startupProbe guarding the livenessProbe, or a liveness delay above the load time",
        "Guard the livenessProbe with a startupProbe so it only starts once the model is loaded.",
    ),
    _i(
        "deployment",
        "service_balancing",
        "Service load-balancing suits long connections and long requests",
        "Service 分发策略适合长连接和长请求。",
        "the Service/gateway balancing policy (least-request or queue-aware, not round-robin over "
        "long-lived connections)",
        "Balance by outstanding requests or queue depth, not connections; HTTP/2 and keep-alive pin "
        "traffic to one pod otherwise.",
    ),
    _i(
        "deployment",
        "gateway_functions",
        "The gateway handles auth, quota, routing, fallback and metering in one place",
        "网关统一鉴权、配额、路由、降级、计量。",
        "the gateway's configuration",
        "Put auth, quotas, routing, fallback and metering in one gateway in front of every engine.",
    ),
    _i(
        "deployment",
        "quota_at_gateway",
        "Quotas enforced at the gateway, so overload never reaches the GPUs",
        "配额在网关前置，过载不打到 GPU。",
        "the gateway's rate-limit and quota configuration, and its 429 counts",
        "Enforce per-tenant quotas and a global concurrency limit at the gateway and answer 429 early.",
    ),
    _i(
        "deployment",
        "rolling_update",
        "Rolling updates cause no 5xx and do not cut long requests",
        "滚动发布期间无 5xx，长请求不被中断。",
        "error ratios during past rollouts, maxUnavailable/maxSurge and terminationGracePeriodSeconds "
        "against the longest request",
        "Use maxUnavailable 0 with surge, a preStop drain and a grace period longer than the longest "
        "request.",
    ),
    _i(
        "deployment",
        "scaling_min_replicas",
        "Scale-up warms up or keeps minimum replicas; scale-down does not kill long requests",
        "扩容有预热或最小副本，缩容不杀长任务。",
        "ready replicas against the peak's need, the HPA minReplicas, warm-up and scale-down policy",
        "Keep at least the replicas the peak needs at SLO plus one, warm new replicas before they take "
        "traffic, and drain before scale-down.",
    ),
    # 节点与集群
    _i(
        "nodes",
        "driver_matrix",
        "Driver, container toolkit and device plugin versions aligned and recorded as a matrix",
        "驱动、container toolkit、device plugin 三件套版本对齐并记录矩阵。",
        "the node inventory: driver (DCGM's DCGM_FI_DRIVER_VERSION label), container toolkit and device "
        "plugin versions per node pool",
        "Pin one driver / toolkit / device-plugin combination per node pool and record the matrix.",
    ),
    _i(
        "nodes",
        "labels_taints",
        "nouveau disabled; nodes labelled and tainted by GPU model and purpose",
        "nouveau 已禁用，节点按 GPU 型号与用途打了标签和污点。",
        "node labels and taints (kubectl get nodes --show-labels; kube_node_labels, kube_node_spec_taint) "
        "and the node image's modprobe blacklist",
        "Blacklist nouveau in the node image; label nodes by GPU model and taint GPU nodes for GPU "
        "workloads only.",
    ),
    _i(
        "nodes",
        "sharing_policy",
        "GPU sharing policy explicit (whole GPU, MIG or time-slicing); no soft sharing under production SLAs",
        "共享策略明确：整卡、MIG 或时间片，生产 SLA 不放软共享。",
        "the device plugin's sharing configuration (MIG profiles show as GPU_I_PROFILE on DCGM series)",
        "Give production SLA workloads whole GPUs or MIG slices; keep time-slicing for dev.",
    ),
    _i(
        "nodes",
        "nccl_network",
        "Multi-node communication pins the NCCL NIC; MTU consistent",
        "多机通信指定 NCCL 网卡，MTU 一致。",
        "NCCL_SOCKET_IFNAME / NCCL_IB_HCA in the pod env and the MTU of the interfaces on every node",
        "Set NCCL_SOCKET_IFNAME (or NCCL_IB_HCA) explicitly and one MTU on every node of the fabric.",
    ),
    _i(
        "nodes",
        "weights_separate",
        "Weights kept apart from images; idempotent InitContainer download; cache disk capped",
        "权重与镜像分离，InitContainer 下载幂等，缓存盘有上限。",
        "the pod spec (init containers, volumes and their size limits)",
        "Ship weights on a volume or object store, download idempotently in an init container, and cap "
        "the cache volume.",
    ),
    _i(
        "nodes",
        "statefulset",
        "Replicas that need stable disks or identities use a StatefulSet",
        "需要稳定盘或稳定标识的副本用 StatefulSet。",
        "the workload kinds (kube_statefulset_* / kube_deployment_* series) against which replicas need "
        "a stable disk or identity",
        "Run replicas with per-replica disks or identities (multi-node groups, local caches) as "
        "StatefulSets.",
    ),
    _i(
        "nodes",
        "gang_scheduling",
        "Multi-GPU jobs get topology-aware gang scheduling, never half-started holding GPUs",
        "多卡任务有拓扑感知与 gang scheduling，不会半启动占卡。",
        "the scheduler configuration (Volcano, Kueue, LeaderWorkerSet) and pods Pending while their "
        "group holds GPUs",
        "Schedule multi-pod GPU groups all-or-nothing with topology awareness (Kueue, Volcano, LWS).",
    ),
    _i(
        "nodes",
        "dcgm_alerts",
        "DCGM metrics (XID, ECC, temperature, lost GPUs) feed alerts; faulty nodes can be drained",
        "DCGM 指标（XID、ECC、温度、掉卡）进告警，异常节点能排空。",
        "a DCGM exporter on every GPU node, alert rules on XID and ECC, and the drain runbook",
        "Run dcgm-exporter on every GPU node (enable the ECC counters in its CSV), alert on XID and ECC "
        "(`triage rules` generates GPUXidError and GPUEccErrors), and drain on a fault.",
    ),
    # 路由与降级
    _i(
        "routing",
        "explainable_rules",
        "Multi-model routing rules are explainable and logged",
        "多模型路由规则可解释、可记录。",
        "the router's rules and its decision log",
        "Write routing rules a person can read and log every decision with the request id.",
    ),
    _i(
        "routing",
        "format_adaptation",
        "Output-format differences between primary and fallback models are adapted",
        "主备模型的输出格式差异有适配。",
        "the gateway's response adapters and tests that run the fallback model through them",
        "Normalise the fallback model's output (tool-call format, JSON mode) and test it.",
    ),
    _i(
        "routing",
        "degradation_visible",
        "Degradation is visible to users; low-quality results are not passed off as normal",
        "降级对用户可见，低质量结果不被当正常结果。",
        "the API response (a header or field marking a fallback) and the fallback counters",
        "Mark degraded responses (header or field) and count them.",
    ),
    _i(
        "routing",
        "fallback_timeouts",
        "Every level of the fallback chain has a timeout and a readable error",
        "降级链每一级都有超时和可读错误。",
        "the gateway's fallback configuration",
        "Give every fallback level its own timeout and a readable error when the chain is exhausted.",
    ),
    _i(
        "routing",
        "versioned_rollback",
        "Model, engine, quantisation and routing versions roll back together as a set",
        "模型、引擎、量化、路由版本整组回滚。",
        "the release process: one versioned bundle of model, engine image, quantisation and routing",
        "Version the four together and roll back the bundle, never one part.",
    ),
    # 观测与成本
    _i(
        "observability",
        "phase_timing",
        "Queue, prefill and decode timed separately",
        "排队、prefill、decode 分段计时。",
        "queue, prefill and decode time histograms from the engine, and an alert on the queue",
        "Scrape the engine's phase histograms (vLLM request_queue/prefill/decode_time_seconds; SGLang "
        "queue_time_seconds, per_stage_req_latency_seconds) and alert on queue growth (`triage rules` "
        "generates QueueGrowing).",
    ),
    _i(
        "observability",
        "tenant_cost",
        "Input/output tokens and cost per 1k tokens attributed per tenant",
        "输入 / 输出 token、每千 token 成本按租户归集。",
        "per-tenant token and spend series from the gateway (e.g. LiteLLM's team label), or the billing "
        "pipeline",
        "Meter input and output tokens and spend per tenant at the gateway.",
    ),
    _i(
        "observability",
        "rate_dashboards",
        "Dashboards for success, timeout, rate-limit and fallback rates",
        "成功率、超时率、限流率、降级率有面板。",
        "the dashboards themselves (Grafana), and metrics from which the four rates can be computed",
        "Build one panel per rate from the gateway's counters (success, timeout, 429, fallback).",
    ),
    _i(
        "observability",
        "request_traceability",
        "Every request traceable to its model version and routing decision",
        "每次请求可追到模型版本与路由决策。",
        "request logs or traces carrying the model version and route",
        "Log (or trace) the model version, engine version and route with every request id.",
    ),
    _i(
        "observability",
        "load_test_coverage",
        "Load tests cover long prompts, high concurrency and replica failure together",
        "压测覆盖长 prompt、高并发、副本故障组合。",
        "the load-test plan and its last report",
        "Load-test the combination: long prompts at peak concurrency while a replica is killed.",
    ),
    # 红线
    _i(
        "red_lines",
        "gpu_memory_utilization",
        "Never set gpu_memory_utilization above 0.95 without a load test",
        "不在未压测的情况下把显存利用率设到 0.95 以上。",
        "the engine's --gpu-memory-utilization (vLLM publishes it in vllm:cache_config_info), and a load "
        "test at that value",
        "Lower gpu_memory_utilization to 0.95 or below (0.90 is the usual choice), or keep the load "
        "test that proves the higher value at peak.",
    ),
    _i(
        "red_lines",
        "mean_latency_sla",
        "Never use mean latency instead of P99 for the SLA",
        "不用平均延迟代替 P99 做 SLA。",
        "the alerting rules (and SLO definitions) this Prometheus or its ruler evaluates",
        "Replace the mean (rate(_sum)/rate(_count), avg) with histogram_quantile(0.99, ...) over the "
        "_bucket series, one alert for TTFT and one for TPOT.",
    ),
    _i(
        "red_lines",
        "max_num_seqs_knob",
        "Never treat max_num_seqs as a throughput knob",
        "不把 max_num_seqs 当作吞吐开关。",
        "--max-num-seqs from the deployment and its change history, against the KV capacity",
        "Size max_num_seqs from the KV capacity and the request lengths; raise throughput with more KV "
        "(or replicas when the queue is a true shortage), not a bigger batch.",
    ),
    _i(
        "red_lines",
        "prefix_cache_unstable",
        "Never force prefix caching on unstable prefixes and expect a gain",
        "不在前缀不稳定的场景强开缓存并期待收益。",
        "enable_prefix_caching (vllm:cache_config_info) against the prefix-cache hit ratio",
        "Make the prefix stable (static content first) or stop counting on the cache: with a hit ratio "
        "near zero it only adds hashing and eviction work.",
    ),
    _i(
        "red_lines",
        "gateway_prompt_logic",
        "The gateway does no prompt assembly or business logic",
        "不让网关承担 prompt 拼接和业务判断。",
        "the gateway's configuration and plugins (templates, prompt rewriting, business rules)",
        "Keep prompt assembly and business decisions in the application; the gateway routes, limits "
        "and meters.",
    ),
)
_ITEMS_BY_ID: Final = {item.id: item for item in ITEMS}


# ------------------------------------------------------------------------------ inputs and outputs


@dataclass(frozen=True)
class AuditSettings:
    """Thresholds of the checks, and the window they look at.

    The SLOs default to `triage/slo_defaults.yaml` (`from_slo` takes a loaded one); the
    red line 0.95 is the checklist's; a prefix hit ratio under 5% over the window is "near
    zero"; a prompt is long from 8,192 tokens (vLLM's default max_num_batched_tokens in
    V1 online serving), and long prompts are common from 5% of requests. A replica's
    capacity at SLO may be extrapolated from its KV use up to `kv_ceiling`, by at most
    `max_extrapolation` times what it was seen to serve.
    """

    lookback: float = DEFAULT_LOOKBACK
    step: float = 60.0
    ttft_p99_slo: float = 1.0
    tpot_p99_slo: float = 0.05
    gpu_memory_utilization_max: float = 0.95
    prefix_hit_floor: float = 0.05
    long_prompt_tokens: float = 8192.0
    long_prompt_share: float = 0.05
    kv_ceiling: float = 0.9
    max_extrapolation: float = 1.5
    redundancy: int = 1

    @classmethod
    def from_slo(cls, slo: Slo, **overrides: Any) -> AuditSettings:
        """Settings whose latency SLOs are those of a `triage.rules.Slo` (what the alerts use)."""
        return cls(ttft_p99_slo=slo.ttft.p99_seconds, tpot_p99_slo=slo.tpot.p99_seconds, **overrides)


@dataclass(frozen=True)
class Sample:
    """One series of an instant query: its labels (with `__name__` when kept) and value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Fetched:
    """Everything the audit reads, as fetched; None (with a reason in `problems`) when unreadable.

    `rules` and `targets` are the `data` objects of `/api/v1/rules` and `/api/v1/targets`.
    `instant` holds the answers to `instant_queries`, by name; a name missing from it was
    not asked (its metric does not exist) or failed (`problems["instant:<name>"]`).
    """

    server: str
    at: float
    metric_names: frozenset[str] | None
    rules: Mapping[str, Any] | None
    targets: Mapping[str, Any] | None
    frame: SignalFrame | None
    instant: Mapping[str, Sequence[Sample]] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)
    lookback: float = DEFAULT_LOOKBACK


@dataclass(frozen=True)
class AuditItem:
    """One checklist item's verdict; `to_json` is the stable output contract."""

    id: str
    section: str
    title: str
    status: Status
    evidence: str
    how_to_fix: str

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "status": self.status,
            "evidence": self.evidence,
            "how_to_fix": self.how_to_fix,
        }


@dataclass(frozen=True)
class AuditReport:
    """Every item in checklist order, and what could not be read (source -> one-line reason)."""

    server: str
    at: float
    lookback: float
    items: tuple[AuditItem, ...]
    problems: Mapping[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {status: 0 for status in STATUS_ORDER}
        for item in self.items:
            out[item.status] += 1
        return out

    def by_id(self, item_id: str) -> AuditItem:
        return next(item for item in self.items if item.id == item_id)

    @property
    def nothing_readable(self) -> bool:
        """True when neither metric names, rules nor targets could be read: the CLI's exit 3."""
        return all(key in self.problems for key in ("metric_names", "rules", "targets"))

    def to_json(self) -> list[dict[str, str]]:
        return [item.to_json() for item in self.items]


@dataclass(frozen=True)
class Finding:
    """What one check concluded, before it is dressed as an `AuditItem`."""

    status: Status
    evidence: tuple[str, ...]


def _found(status: Status, *lines: str) -> Finding:
    return Finding(status, tuple(line for line in lines if line))


# ------------------------------------------------------------------------------ what to ask

_NODE_LABELS: Final = ("Hostname", "hostname", "node", "kubernetes_node")
_DRIVER_LABELS: Final = ("DCGM_FI_DRIVER_VERSION", "driver_version")
_TARGET_NODE_LABELS: Final = (
    "__meta_kubernetes_pod_node_name",
    "__meta_kubernetes_endpoint_node_name",
    "__meta_kubernetes_node_name",
)


def instant_queries(names: frozenset[str], options: QueryOptions, lookback: float) -> dict[str, str]:
    """The instant queries the checks read, for the metrics that exist (asked at the audit time).

    The selector applies to fleet series; node inventory (`kube_node_status_capacity`) and
    DCGM series are cluster-wide, because a GPU node the selector does not match is still
    a GPU node that needs its exporter. `$window` is the whole lookback here: lengths are
    taken over the window, not per 5 minutes.
    """
    templates: dict[str, str] = {}
    if "vllm:cache_config_info" in names:
        templates["cache_config"] = "vllm:cache_config_info{$sel}"
    if "sglang:context_len" in names:
        templates["sglang_context_len"] = "max by ($replica) (sglang:context_len{$sel})"
    if "sglang:max_total_num_tokens" in names:
        templates["sglang_max_tokens"] = "max by ($replica) (sglang:max_total_num_tokens{$sel})"
    for key, vllm, sglang in (
        ("prompt_buckets", "vllm:request_prompt_tokens_bucket", "sglang:prompt_tokens_histogram_bucket"),
        (
            "output_buckets",
            "vllm:request_generation_tokens_bucket",
            "sglang:generation_tokens_histogram_bucket",
        ),
    ):
        metric = vllm if vllm in names else sglang if sglang in names else None
        if metric is not None:
            templates[key] = f"sum by (le) (increase({metric}{{$sel}}[$window]))"
    if "kube_node_status_capacity" in names:
        templates["gpu_nodes"] = 'max by (node) (kube_node_status_capacity{resource="nvidia_com_gpu"})'
    if "kube_pod_container_resource_requests" in names:
        templates["gpu_pod_nodes"] = (
            'max by (node) (kube_pod_container_resource_requests{resource="nvidia_com_gpu",$sel})'
        )
    dcgm = [n for n in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED") if n in names]
    if dcgm:
        labels = [*_NODE_LABELS, "instance", options.replica_label, "gpu", "UUID", *_DRIVER_LABELS]
        templates["dcgm_gpus"] = f"group by ({', '.join(dict.fromkeys(labels))}) ({' or '.join(dcgm)})"
    window = QueryOptions(options.replica_label, options.selector, f"{max(1, round(lookback))}s")
    return {key: render(template, window) for key, template in templates.items()}


# ------------------------------------------------------------------------------ PromQL scanning

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_NAME_MATCHER = re.compile(r"__name__\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS: Final = frozenset(
    {
        "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
        "offset", "bool", "inf", "nan", "start", "end", "atan2",
    }
)  # fmt: skip


def _clean(expr: str) -> tuple[str, list[str]]:
    """The expression without strings, matchers, ranges and grouping clauses; and `__name__` matches.

    What is left holds metric names, function names, operators, numbers and parentheses:
    enough to find what is read and which function wraps it.
    """
    named = [m.group(1)[1:-1] for m in _NAME_MATCHER.finditer(expr)]
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    return text, named


def metric_names_in(expr: str) -> frozenset[str]:
    """Every metric (or recorded series) name a PromQL expression reads."""
    text, named = _clean(expr)
    out = set(named)
    for match in _IDENT.finditer(text):
        name = match.group(0)
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or name in _KEYWORDS:
            continue
        out.add(name)
    return frozenset(out)


def _calls(text: str, functions: Iterable[str]) -> list[tuple[str, str, str]]:
    """(function, first argument, whole argument text) for each call of `functions` in cleaned text."""
    out: list[tuple[str, str, str]] = []
    pattern = re.compile(r"(?<![A-Za-z0-9_:])(" + "|".join(map(re.escape, functions)) + r")\s*\(")
    for match in pattern.finditer(text):
        start = match.end()
        depth, i, comma = 1, start, -1
        while i < len(text) and depth:
            ch = text[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1 and comma < 0:
                comma = i
            i += 1
        inner = text[start : i - 1]
        first = text[start:comma].strip() if comma >= 0 else inner.strip()
        out.append((match.group(1), first, inner))
    return out


LatencyKind = Literal["ttft", "tpot", "latency"]
_HIST_SUFFIX = re.compile(r"_(?:bucket|sum|count)$")
_PLEVEL = re.compile(r"(?:^|[_:])p(\d{2,4})(?:[_:]|$)")


def latency_kind(name: str) -> LatencyKind | None:
    """Whether a metric or recorded name measures a latency, and which one.

    TTFT and TPOT (inter-token latency, time per output token) are told apart because the
    checklist wants each alerted on; any other latency (e2e, queue, a gateway's request
    time) is `latency`. A count of tokens or requests is not a latency.
    """
    low = _HIST_SUFFIX.sub("", name).lower()
    if "time_to_first_token" in low or re.search(r"(?:^|[_:])ttft(?:[_:]|$)", low):
        return "ttft"
    if (
        "inter_token_latency" in low
        or "time_per_output_token" in low
        or re.search(r"(?:^|[_:])(?:tpot|itl)(?:[_:]|$)", low)
    ):
        return "tpot"
    if any(word in low for word in ("latency", "e2e", "duration_seconds", "queue_time", "response_time")):
        return "latency"
    return None


def _plevel(name: str) -> float | None:
    """The quantile a recorded name says it holds: `triage:ttft_p99_seconds` -> 0.99, `p999` -> 0.999."""
    match = _PLEVEL.search(name.lower())
    if match is None:
        return None
    digits = str(match.group(1))
    return float(int(digits)) / float(10 ** len(digits))


@dataclass(frozen=True)
class Rule:
    """One rule from `/api/v1/rules`."""

    kind: Literal["alerting", "recording"]
    name: str
    query: str
    group: str
    file: str
    health: str = "ok"

    @property
    def where(self) -> str:
        file = self.file.rsplit("/", 1)[-1] if self.file else ""
        return f"{file}:{self.group}" if file else self.group


def parse_rules(data: Mapping[str, Any]) -> list[Rule]:
    """Rules from the `data` of `/api/v1/rules` (entries that are not rules are skipped)."""
    out: list[Rule] = []
    groups = data.get("groups")
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        for rule in group.get("rules") or []:
            if not isinstance(rule, dict) or rule.get("type") not in ("alerting", "recording"):
                continue
            name, query = rule.get("name"), rule.get("query")
            if not isinstance(name, str) or not isinstance(query, str):
                continue
            out.append(
                Rule(
                    rule["type"],
                    name,
                    query,
                    str(group.get("name") or ""),
                    str(group.get("file") or ""),
                    str(rule.get("health") or "ok"),
                )
            )
    return out


@dataclass(frozen=True)
class AlertFacts:
    """What one alerting rule reads once recording rules are expanded.

    `names` are the metric and recorded names it reads (before and after expansion);
    `quantiles` maps a latency kind to the highest quantile it takes of it; `means` are
    (kind, how) for each latency it reads as a mean: `_sum` over `_count`, `avg` of a
    latency that is not a quantile, or a gauge that is a mean by its name.
    """

    rule: Rule
    expanded: str
    names: frozenset[str]
    quantiles: Mapping[str, float]
    means: tuple[tuple[LatencyKind, str], ...]

    @property
    def label(self) -> str:
        return f"{self.rule.name} ({self.rule.where})"


_MAX_DEPTH = 8
_QUANTILE_FUNCTIONS: Final = ("histogram_quantile", "quantile_over_time", "quantile")
_MEAN_WORD = re.compile(r"(?:^|[_:])(?:avg|mean|average)(?:[_:]|$)")


def _constant(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement for `re.sub` that inserts `text` literally (PromQL may hold backslashes)."""
    return lambda _match: text


def expand(
    query: str, recordings: Mapping[str, str], depth: int = 0, seen: frozenset[str] = frozenset()
) -> str:
    """The query with every recorded name replaced by its defining expression, recursively.

    A name recorded by several rules becomes their `or`; cycles and depth are bounded. A
    matcher on the recorded name (`x{model="a"}`) is dropped: only what is read matters.
    """
    if depth >= _MAX_DEPTH:
        return query
    used = [n for n in metric_names_in(query) if n in recordings and n not in seen]
    for name in sorted(used, key=len, reverse=True):
        inner = expand(recordings[name], recordings, depth + 1, seen | {name})
        pattern = re.compile(r"(?<![A-Za-z0-9_:])" + re.escape(name) + r"(?![A-Za-z0-9_:])(?:\s*\{[^{}]*\})?")
        query = pattern.sub(_constant(f"({inner})"), query)
    return query


def analyse_alert(rule: Rule, recordings: Mapping[str, str]) -> AlertFacts:
    """Which latencies an alert takes a quantile of, and which it reads as a mean."""
    expanded = expand(rule.query, recordings)
    names = metric_names_in(expanded) | metric_names_in(rule.query)
    text, _ = _clean(expanded)
    quantiles: dict[str, float] = {}

    def note(kind: str, q: float) -> None:
        quantiles[kind] = max(q, quantiles.get(kind, 0.0))

    for _, first, inner in _calls(text, _QUANTILE_FUNCTIONS):
        try:
            q = float(first)
        except ValueError:
            continue
        for name in metric_names_in(inner):
            kind = latency_kind(name)
            if kind is not None:
                note(kind, q)
    for name in names:
        kind, level = latency_kind(name), _plevel(name)
        if kind is not None and level is not None:
            note(kind, level)
    means: list[tuple[LatencyKind, str]] = []
    families = sorted({_HIST_SUFFIX.sub("", n) for n in names if n.endswith(("_sum", "_count"))})
    for family in families:
        kind = latency_kind(family)
        if kind is not None and f"{family}_sum" in names and f"{family}_count" in names:
            means.append((kind, f"{family}_sum / {family}_count"))
    for name in sorted(names):
        kind = latency_kind(name)
        if kind is not None and _MEAN_WORD.search(name.lower()):
            means.append((kind, name))
    for function, _, inner in _calls(text, ("avg", "avg_over_time")):
        inner_names = metric_names_in(inner)
        quantile = bool(_calls(inner, _QUANTILE_FUNCTIONS)) or any(
            _plevel(n) is not None for n in inner_names
        )
        if quantile:
            continue
        for name in sorted(inner_names):
            kind = latency_kind(name)
            if kind is not None and not name.endswith(("_bucket", "_count")):
                means.append((kind, f"{function}({name})"))
                break
    return AlertFacts(rule, expanded, names, quantiles, tuple(dict.fromkeys(means)))


@dataclass(frozen=True)
class RulesView:
    """The alerting rules of a server, analysed; recording rules by recorded name."""

    alerts: tuple[AlertFacts, ...]
    recordings: Mapping[str, str]
    broken: tuple[str, ...]

    @staticmethod
    def of(data: Mapping[str, Any]) -> RulesView:
        rules = parse_rules(data)
        recordings: dict[str, str] = {}
        for rule in rules:
            if rule.kind == "recording":
                recordings[rule.name] = (
                    f"{recordings[rule.name]} or {rule.query}" if rule.name in recordings else rule.query
                )
        alerts = tuple(analyse_alert(r, recordings) for r in rules if r.kind == "alerting")
        broken = tuple(f"{r.name} ({r.where})" for r in rules if r.health not in ("ok", "unknown"))
        return RulesView(alerts, recordings, broken)


# ------------------------------------------------------------------------------ signals to metrics

EXTRA_METRICS: Final[Mapping[str, tuple[str, ...]]] = {
    "gpu_xid": ("DCGM_EXP_XID_ERRORS_COUNT",),
    "gpu_ecc_errors": (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    ),
    "gpu_temp_celsius": ("DCGM_FI_DEV_MEMORY_TEMP",),
    "preemption_rate": ("vllm:request_num_preemptions_bucket", "sglang:num_retracted_reqs"),
    "prefix_hit_ratio": ("vllm:prompt_tokens_cached_total", "sglang:cached_tokens_total"),
    "queue_waiting": ("vllm:num_requests_waiting_by_reason",),
    "kv_usage_ratio": ("sglang:kv_used_tokens", "sglang:kv_available_tokens"),
}
ECC_METRICS: Final = ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", *EXTRA_METRICS["gpu_ecc_errors"])


def signal_metrics(catalog: Catalog, signal: str) -> frozenset[str]:
    """Every metric name any catalog source of `signal` reads, plus close relatives no source uses."""
    out: set[str] = set(EXTRA_METRICS.get(signal, ()))
    empty = QueryOptions()
    for source in catalog.sources.get(signal, ()):
        out.update(source.requires, source.requires_any, source.deprecated)
        for template in (source.replica, source.fleet):
            if template is not None:
                out.update(metric_names_in(render(template, empty)))
    return frozenset(out)


# ------------------------------------------------------------------------------ histograms


def buckets_of(samples: Sequence[Sample]) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) sorted by bound, +Inf last; samples without `le` are ignored."""
    out: list[tuple[float, float]] = []
    for s in samples:
        le = s.labels.get("le")
        if le is None or not math.isfinite(s.value):
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        out.append((bound, s.value))
    out.sort()
    return out


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative buckets: linear within a bucket."""
    if not buckets or not math.isinf(buckets[-1][0]):
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                return buckets[i - 1][0] if i > 0 else None
            if i == 0 and bound <= 0:
                return bound
            width = count - prev_count
            return prev_bound + (bound - prev_bound) * ((rank - prev_count) / width if width > 0 else 1.0)
        prev_bound, prev_count = bound, count
    return None


def share_above(threshold: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The share of observations above `threshold`, interpolating within its bucket."""
    if not buckets or not math.isinf(buckets[-1][0]) or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if threshold <= bound:
            if math.isinf(bound):
                below = prev_count
            else:
                span = bound - prev_bound
                below = prev_count + (count - prev_count) * (
                    (threshold - prev_bound) / span if span > 0 else 1
                )
            return max(0.0, 1.0 - below / total)
        prev_bound, prev_count = bound, count
    return 0.0


def max_bound(buckets: Sequence[tuple[float, float]]) -> tuple[float, bool] | None:
    """The longest observation as (bound, exact): `le` of the first bucket holding every one.

    When the +Inf bucket holds some, the bound is the largest finite edge and `exact` is
    False: the longest was above it.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    finite = [(b, c) for b, c in buckets if math.isfinite(b)]
    for bound, count in finite:
        if count >= total:
            return bound, True
    return (finite[-1][0], False) if finite else None


# ------------------------------------------------------------------------------ formatting


def _n(value: float) -> str:
    """A count or size as people read it: 1,850 or 947k."""
    if not math.isfinite(value):
        return "?"
    if abs(value) >= 100_000:
        return f"{value / 1000:,.0f}k"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _ratio(value: float) -> str:
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def _list(names: Iterable[str], limit: int = 6) -> str:
    items = sorted(set(names))
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _truthy(text: str | None) -> bool | None:
    if text is None:
        return None
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off", "none"):
        return False
    return None


# ------------------------------------------------------------------------------ the facts


def _finite(values: FloatArray) -> FloatArray:
    return np.asarray(values[np.isfinite(values)], dtype=np.float64)


class _Facts:
    """What the checks share, derived once from `Fetched` (pure; a cache, not a source)."""

    def __init__(
        self, fetched: Fetched, catalog: Catalog, options: QueryOptions, settings: AuditSettings
    ) -> None:
        self.f = fetched
        self.catalog = catalog
        self.options = options
        self.s = settings
        self.names = fetched.metric_names
        self.frame = fetched.frame
        self.rules = RulesView.of(fetched.rules) if fetched.rules is not None else None
        self.configs = self._configs()
        self._signal_metrics: dict[str, frozenset[str]] = {}

    # -- availability
    def has_metric(self, *names: str) -> bool:
        return self.names is not None and any(n in self.names for n in names)

    def has_prefix(self, *prefixes: str) -> bool:
        return self.names is not None and any(n.startswith(prefixes) for n in self.names)

    def why_no_names(self) -> str:
        return f"metric names could not be read ({self.f.problems.get('metric_names', 'no reply')})"

    def why_no_rules(self) -> str:
        return f"the rules API could not be read ({self.f.problems.get('rules', 'no reply')})"

    def why_no_frame(self) -> str:
        return f"the fleet's signals could not be read ({self.f.problems.get('signals', 'no reply')})"

    def engine(self) -> str | None:
        if self.names is None:
            return None
        found = [
            label for prefix, label in (("vllm:", "vLLM"), ("sglang:", "SGLang")) if self.has_prefix(prefix)
        ]
        return " and ".join(found) or None

    def instant(self, key: str) -> list[Sample]:
        return list(self.f.instant.get(key, ()))

    def instant_problem(self, key: str) -> str | None:
        return self.f.problems.get(f"instant:{key}")

    def why_no_config(self) -> str:
        """Why the engines' configuration labels are missing: unread names, a failed query, or not exposed."""
        if self.names is None:
            return self.why_no_names()
        problem = self.instant_problem("cache_config")
        if problem is not None:
            return f"vllm:cache_config_info could not be read ({problem})"
        return "vllm:cache_config_info is not exposed"

    def frame_has(self, signal: str) -> bool:
        return self.frame is not None and self.frame.has(signal)

    def metrics_of(self, signal: str) -> frozenset[str]:
        if signal not in self._signal_metrics:
            self._signal_metrics[signal] = signal_metrics(self.catalog, signal)
        return self._signal_metrics[signal]

    # -- configuration per replica
    def _configs(self) -> dict[str, dict[str, str]]:
        """Config labels per replica: vllm:cache_config_info in full, then the frame's latest config_info.

        The instant query keeps every label (vLLM's set changes by version); the frame's
        config_info may add labels a user catalog publishes (max_num_seqs, chunked prefill).
        """
        label = self.options.replica_label
        out: dict[str, dict[str, str]] = {}
        for sample in self.instant("cache_config"):
            labels = {k: v for k, v in sample.labels.items() if k != "__name__"}
            replica = labels.get(label) or labels.get("instance") or "fleet"
            engine = labels.get("engine")
            key = replica if engine in (None, "0") else f"{replica} engine {engine}"
            out.setdefault(key, {}).update(labels)
        latest: dict[str, tuple[int, dict[str, str]]] = {}
        for row in self.frame.rows("config_info") if self.frame is not None else []:
            finite = np.flatnonzero(np.isfinite(row.values))
            if len(finite):
                replica = row.label_map.get("instance", "fleet")
                last = int(finite[-1])
                if replica not in latest or last >= latest[replica][0]:
                    latest[replica] = (last, row.label_map)
        for replica, (_, labels) in latest.items():
            current = out.setdefault(replica, {})
            for key, value in labels.items():
                current.setdefault(key, value)
        return out

    def config_values(self, *keys: str) -> dict[str, str]:
        """replica -> the first of `keys` its config carries."""
        out: dict[str, str] = {}
        for replica, labels in self.configs.items():
            for key in keys:
                if labels.get(key) not in (None, ""):
                    out[replica] = labels[key]
                    break
        return out

    def config_history(self, key: str) -> dict[str, list[str]]:
        """replica -> the values a config_info label took over the window, in order of appearance."""
        seen: dict[str, list[tuple[int, str]]] = {}
        for row in self.frame.rows("config_info") if self.frame is not None else []:
            labels = row.label_map
            finite = np.flatnonzero(np.isfinite(row.values))
            if key in labels and len(finite):
                seen.setdefault(labels.get("instance", "fleet"), []).append((int(finite[0]), labels[key]))
        return {replica: [value for _, value in sorted(values)] for replica, values in seen.items()}

    def kv_tokens(self) -> dict[str, float]:
        """KV capacity in tokens per replica (kv_cache_size_tokens, blocks x block_size, SGLang's pool)."""
        out: dict[str, float] = {}
        for replica, labels in self.configs.items():
            size = _float(labels.get("kv_cache_size_tokens"))
            blocks, block = _float(labels.get("num_gpu_blocks")), _float(labels.get("block_size"))
            if size is not None and size > 0:
                out[replica] = size
            elif blocks is not None and block is not None and blocks > 0 and block > 0:
                out[replica] = blocks * block
        label = self.options.replica_label
        for sample in self.instant("sglang_max_tokens"):
            replica = sample.labels.get(label) or sample.labels.get("instance") or "fleet"
            if math.isfinite(sample.value) and sample.value > 0:
                out.setdefault(replica, sample.value)
        return out

    def max_model_len(self) -> dict[str, float]:
        out = {
            r: v for r, text in self.config_values("max_model_len").items() if (v := _float(text)) is not None
        }
        label = self.options.replica_label
        for sample in self.instant("sglang_context_len"):
            replica = sample.labels.get(label) or sample.labels.get("instance") or "fleet"
            if math.isfinite(sample.value) and sample.value > 0:
                out.setdefault(replica, sample.value)
        return out

    # -- request lengths
    def lengths(self, key: str, signal: str) -> tuple[float | None, str]:
        """P95 length over the window from the histogram buckets, else the median of the frame's P95."""
        p95 = bucket_quantile(0.95, buckets_of(self.instant(key)))
        if p95 is not None:
            return p95, f"over the last {format_duration(self.f.lookback)}"
        if self.frame is not None and self.frame.has(signal):
            values = _finite(self.frame.fleet(signal))
            if len(values):
                return float(np.median(values)), "median of the 5m P95 over the window"
        return None, ""

    # -- alerts
    def coverage(self, signals: Sequence[str]) -> tuple[list[str], list[str]]:
        """(live alerts, dead alerts) that read any of `signals` (raw metric or triage:* recorded name).

        An alert is dead when none of the metrics it reads for those signals exists here:
        it can never fire.
        """
        live: list[str] = []
        dead: list[str] = []
        if self.rules is None:
            return live, dead
        wanted: set[str] = set()
        for signal in signals:
            wanted |= self.metrics_of(signal)
        recorded = tuple(f"triage:{s}" for s in signals)
        for alert in self.rules.alerts:
            hits = {n for n in alert.names if n in wanted}
            records = {n for n in alert.names if _is_record_of(n, recorded)}
            if not hits and not records:
                continue
            name = alert.label
            if self.names is None:
                live.append(name)
                continue
            exists = any(n in self.names for n in hits) or any(
                n in self.names for n in records if n not in self.rules.recordings
            )
            (live if exists else dead).append(name)
        return live, dead


def _is_record_of(name: str, recorded: tuple[str, ...]) -> bool:
    return any(name == r or name == f"{r}:replica" for r in recorded)


# ------------------------------------------------------------------------------ the checks

Check = Callable[[_Facts], Finding]


def _combine(parts: Sequence[Finding]) -> Finding:
    """Worst first: any fail fails, else any unknown is unknown, else pass (or n/a when all are)."""
    statuses = {p.status for p in parts}
    lines = tuple(line for p in parts for line in p.evidence)
    worst: Status
    for worst in ("fail", "unknown", "pass"):
        if worst in statuses:
            return Finding(worst, lines)
    return Finding("not_applicable", lines)


def _gpu_memory_utilization(x: _Facts) -> Finding:
    values = {
        r: v for r, t in x.config_values("gpu_memory_utilization").items() if (v := _float(t)) is not None
    }
    if not values:
        return _found("unknown", f"gpu_memory_utilization unknown: {x.why_no_config()}")
    limit = x.s.gpu_memory_utilization_max
    over = {r: v for r, v in values.items() if v > limit}
    if over:
        shown = ", ".join(f"{r} {v:g}" for r, v in sorted(over.items())[:6])
        return _found(
            "fail",
            f"gpu_memory_utilization above {limit:g} on {len(over)} of {len(values)} replicas: {shown}",
            "no headroom is left for activation peaks, CUDA graphs or fragmentation; if a load test at this "
            "value passed, record it with the deployment",
        )
    distinct = sorted(set(values.values()))
    return _found(
        "pass",
        f"gpu_memory_utilization {', '.join(f'{v:g}' for v in distinct)} on {len(values)} replicas "
        f"(at most {limit:g}), from vllm:cache_config_info",
    )


def _check_gpu_memory_headroom(x: _Facts) -> Finding:
    found = _gpu_memory_utilization(x)
    if x.frame_has("gpu_memory_used_ratio") and x.frame is not None:
        peak = _finite(x.frame.across_replicas("gpu_memory_used_ratio", "max"))
        if len(peak):
            return Finding(
                found.status,
                (*found.evidence, f"framebuffer used peaks at {_ratio(float(peak.max()))} (DCGM)"),
            )
    return found


def _check_red_gpu_memory(x: _Facts) -> Finding:
    return _gpu_memory_utilization(x)


def _check_memory_monitoring(x: _Facts) -> Finding:
    """Metrics for each of the four (KV use stands in for the memory peak: vLLM pre-allocates), and alerts.

    OOM kills are only visible through kube-state-metrics, so its presence is checked here.
    """
    if x.names is None:
        return _found("unknown", x.why_no_names())
    parts: list[Finding] = []
    kv = x.has_metric(*x.metrics_of("kv_usage_ratio"))
    preempt = x.has_metric(*x.metrics_of("preemption_rate"))
    fb = x.has_metric("DCGM_FI_DEV_FB_USED")
    engine = [what for what, ok in (("KV use / free blocks", kv), ("preemptions", preempt)) if not ok]
    if engine:
        parts.append(_found("fail", f"not collected from the engines: {', '.join(engine)}"))
    else:
        peak = "framebuffer from DCGM" if fb else "memory peak read from KV use (no DCGM framebuffer)"
        parts.append(_found("pass", f"KV use and preemptions are collected; {peak}"))
    status = ("kube_pod_container_status_last_terminated_reason", "kube_pod_container_status_restarts_total")
    if not x.has_prefix("kube_"):
        parts.append(
            _found("fail", "kube-state-metrics is not scraped: OOM kills and replica readiness are invisible")
        )
    elif not x.has_metric(*status):
        parts.append(
            _found("fail", "kube-state-metrics has no container status series: OOM kills are invisible")
        )
    else:
        parts.append(_found("pass", "OOM kills visible through kube-state-metrics"))
    parts.extend(_ksm_targets(x))
    parts.append(_alerted(x, "KV use", ("kv_usage_ratio",)))
    parts.append(_alerted(x, "preemptions", ("preemption_rate",)))
    return _combine(parts)


def _alerted(x: _Facts, what: str, signals: Sequence[str]) -> Finding:
    """Pass when a live alert reads the signals; fail when none does (dead ones named)."""
    if x.rules is None:
        return _found("unknown", f"{what}: {x.why_no_rules()}")
    live, dead = x.coverage(signals)
    if live:
        return _found("pass", f"{what} alerted by {_list(live, 3)}")
    if dead:
        return _found(
            "fail", f"{what}: the only alerts on it ({_list(dead, 3)}) read metrics this server does not have"
        )
    records = ", ".join(f"triage:{s}" for s in signals)
    return _found("fail", f"no alerting rule reads {what} (its metrics or {records})")


def _ksm_targets(x: _Facts) -> list[Finding]:
    down = [t for t in _targets(x, ("kube-state-metrics", "kube_state_metrics")) if t[1] != "up"]
    if down:
        return [
            _found(
                "fail", "kube-state-metrics target down: " + "; ".join(f"{n} ({e})" for n, _, e in down[:3])
            )
        ]
    return []


def _check_continuous_batching(x: _Facts) -> Finding:
    engine = x.engine()
    if engine is None:
        return _found("unknown", x.why_no_names() if x.names is None else "no vLLM or SGLang metrics here")
    peak = ""
    if x.frame is not None and x.frame.has("requests_running"):
        view = x.frame.replicas("requests_running")
        if view.values.size and np.isfinite(view.values).any():
            peak = f"; the running batch reached {_n(float(np.nanmax(view.values)))} requests on one replica"
    return _found(
        "pass",
        f"{engine} batches continuously (always on){peak}",
        "whether the throughput / tail-latency trade-off is understood is not visible in metrics",
    )


def _kv_fit(x: _Facts) -> tuple[dict[str, float], float | None, float | None, str] | Finding:
    """KV capacity per replica and tokens per request at P95 lengths, or why they are unknown."""
    kv = x.kv_tokens()
    if not kv:
        return _found(
            "unknown",
            "KV capacity unknown (num_gpu_blocks x block_size, or sglang:max_total_num_tokens): "
            + x.why_no_config(),
        )
    prompt, where = x.lengths("prompt_buckets", "prompt_tokens_p95")
    output, _ = x.lengths("output_buckets", "output_tokens_p95")
    return kv, prompt, output, where


def _kv_text(kv: Mapping[str, float]) -> str:
    low, high = min(kv.values()), max(kv.values())
    size = _n(low) if low == high else f"{_n(low)} to {_n(high)}"
    return f"KV capacity {size} tokens per replica"


def _max_num_seqs_finding(x: _Facts, knob: bool) -> Finding:
    fit = _kv_fit(x)
    if isinstance(fit, Finding):
        return fit
    kv, prompt, output, where = fit
    if prompt is None or output is None:
        return _found(
            "unknown",
            _kv_text(kv),
            "request lengths unknown (no prompt/generation token histograms"
            + "".join(f"; {p}" for k in ("prompt_buckets", "output_buckets") if (p := x.instant_problem(k)))
            + ") to size the batch against it",
        )
    per_request = prompt + output
    fits = min(kv.values()) / per_request
    lengths = f"P95 prompt {_n(prompt)} + output {_n(output)} = {_n(per_request)} tokens {where}"
    seqs = {
        r: v for r, t in x.config_values("max_num_seqs", "max_running_requests").items() if (v := _float(t))
    }
    if seqs:
        smallest = min(kv.values())
        load = {r: n * per_request / kv.get(r, smallest) for r, n in seqs.items()}
        worst_replica = max(sorted(load), key=load.__getitem__)
        worst, capacity = seqs[worst_replica], kv.get(worst_replica, smallest)
        need = worst * per_request
        history = x.config_history("max_num_seqs")
        changes = [f"{r}: {' -> '.join(v)}" for r, v in sorted(history.items()) if len(v) > 1]
        changed = f"; changed in the window ({_list(changes, 3)})" if changes else ""
        if need > capacity:
            return _found(
                "fail",
                f"max_num_seqs {worst:g} x {_n(per_request)} tokens = {_n(need)} tokens > {_n(capacity)} "
                f"the KV holds on {worst_replica}{changed}",
                f"{lengths}; the KV holds about {_n(math.floor(capacity / per_request))} such requests: "
                "a batch "
                "larger than that preempts instead of adding throughput",
            )
        return _found(
            "pass",
            f"max_num_seqs {worst:g} x {_n(per_request)} tokens = {_n(need)} tokens fits the {_n(capacity)} "
            f"the KV holds{changed}",
            lengths,
        )
    observed = ""
    if x.frame is not None and x.frame.has("requests_running"):
        running = x.frame.replicas("requests_running").values
        peak = float(np.nanmax(running)) if running.size and np.isfinite(running).any() else math.nan
        preempt = x.frame.fleet("preemption_rate") if x.frame.has("preemption_rate") else np.array([np.nan])
        preempting = bool(np.nansum(np.where(np.isfinite(preempt), preempt, 0.0)) > 0)
        if math.isfinite(peak):
            observed = f"the running batch peaked at {_n(peak)} requests on one replica"
            if peak > fits and preempting and not knob:
                return _found(
                    "fail",
                    f"{_kv_text(kv)}; at {lengths} it holds about {_n(math.floor(fits))} requests, "
                    f"yet {observed} "
                    "while preempting: max_num_seqs is at least that",
                    "max_num_seqs itself is not exposed; lower it to what the KV holds",
                )
    return _found(
        "unknown",
        f"{_kv_text(kv)}; at {lengths} it holds about {_n(math.floor(fits))} requests"
        + (f"; {observed}" if observed else ""),
        "max_num_seqs is not exposed by the engine's metrics: --max-num-seqs in the deployment (or a "
        "`max_num_seqs` label on config_info via --catalog) settles it; it should be at most "
        f"{_n(math.floor(fits))}",
    )


def _check_max_num_seqs(x: _Facts) -> Finding:
    return _max_num_seqs_finding(x, knob=False)


def _check_red_max_num_seqs(x: _Facts) -> Finding:
    return _max_num_seqs_finding(x, knob=True)


def _concurrency(x: _Facts) -> Finding:
    fit = _kv_fit(x)
    item = _ITEMS_BY_ID["capacity.concurrency_estimate"]
    if isinstance(fit, Finding):
        return _found("unknown", *fit.evidence, f"settles it: {item.settle}")
    kv, prompt, output, where = fit
    if prompt is None or output is None:
        return _found("unknown", _kv_text(kv), f"settles it: {item.settle}")
    fits = min(kv.values()) / (prompt + output)
    return _found(
        "unknown",
        f"from metrics: {_kv_text(kv)} / ({_n(prompt)} + {_n(output)}) tokens at P95 {where} = about "
        f"{_n(math.floor(fits))} concurrent requests per replica",
        f"settles it: {item.settle}",
    )


def _long_prompts(x: _Facts) -> tuple[bool | None, str]:
    """Whether long prompts are common, and the evidence; None when lengths are unknown."""
    threshold = x.s.long_prompt_tokens
    buckets = buckets_of(x.instant("prompt_buckets"))
    share = share_above(threshold, buckets)
    p95 = bucket_quantile(0.95, buckets)
    if share is not None and p95 is not None:
        common = share >= x.s.long_prompt_share
        return common, (
            f"{share:.1%} of prompts over {_n(threshold)} tokens (P95 {_n(p95)}) in the last "
            f"{format_duration(x.f.lookback)}"
        )
    if x.frame is not None and x.frame.has("long_prompt_ratio"):
        values = _finite(x.frame.fleet("long_prompt_ratio"))
        if len(values):
            ratio = float(np.median(values))
            return ratio >= x.s.long_prompt_share, f"long-prompt ratio {ratio:.1%} (median over the window)"
    if x.frame is not None and x.frame.has("prompt_tokens_p95"):
        values = _finite(x.frame.fleet("prompt_tokens_p95"))
        if len(values):
            p95 = float(np.median(values))
            return p95 >= threshold, f"prompt P95 {_n(p95)} tokens (median over the window)"
    return None, "prompt lengths unknown (no prompt-token histogram)"


def _check_chunked_prefill(x: _Facts) -> Finding:
    common, evidence = _long_prompts(x)
    if common is None:
        return _found(
            "unknown",
            evidence,
            "settles it: the prompt-length histogram and the engine's chunked prefill setting",
        )
    if not common:
        return _found("not_applicable", f"long prompts are rare: {evidence}")
    states = {
        r: b
        for r, t in x.config_values("enable_chunked_prefill", "chunked_prefill").items()
        if (b := _truthy(t)) is not None
    }
    if not states:
        return _found(
            "unknown",
            f"long prompts are common: {evidence}",
            "chunked prefill state not exposed; settles it: "
            + _ITEMS_BY_ID["scheduling.chunked_prefill"].settle,
        )
    off = sorted(r for r, on in states.items() if not on)
    if off:
        return _found(
            "fail", f"long prompts are common ({evidence}) and chunked prefill is off on {_list(off)}"
        )
    return _found(
        "pass", f"long prompts are common ({evidence}); chunked prefill is on on {len(states)} replicas"
    )


def _check_request_length_limit(x: _Facts) -> Finding:
    buckets = buckets_of(x.instant("prompt_buckets"))
    longest = max_bound(buckets)
    limits = x.max_model_len()
    seen = ""
    if longest is not None:
        bound, exact = longest
        how = "at most" if exact else "over"
        seen = f"the longest prompt in the last {format_duration(x.f.lookback)} was {how} {_n(bound)} tokens"
    routing = "whether over-long requests have their own route is not visible in metrics"
    if limits:
        limit = min(limits.values())
        if longest is not None and not longest[1] and longest[0] >= limit:
            return _found(
                "fail",
                f"{seen}, beyond max_model_len {_n(limit)}: the limit is not where it is thought to be",
                routing,
            )
        return _found(
            "pass",
            f"max_model_len {_n(limit)} caps a request" + (f"; {seen}" if seen else ""),
            routing,
        )
    hint = ""
    finite = [b for b, _ in buckets if math.isfinite(b)]
    if finite and x.has_prefix("vllm:"):
        hint = f"; vLLM builds these buckets up to max_model_len, so it is at least {_n(finite[-1])}"
    return _found(
        "unknown",
        (seen or "prompt lengths unknown") + hint,
        f"settles it: {_ITEMS_BY_ID['scheduling.request_length_limit'].settle}",
    )


def _latency_alert_names(alerts: Iterable[AlertFacts]) -> str:
    return _list((a.label for a in alerts), 4)


def _live_alerts(x: _Facts) -> list[AlertFacts]:
    """Alerts that read at least one metric this server has (every alert when names are unknown)."""
    assert x.rules is not None
    if x.names is None:
        return list(x.rules.alerts)
    names = x.names
    return [a for a in x.rules.alerts if any(n in names for n in a.names)]


def _check_p99_alerts(x: _Facts) -> Finding:
    """A live P99 (or higher) alert on TTFT and another on TPOT; what exists instead is named.

    An alert that reads only series this server lacks never fires, so it does not count.
    """
    if x.rules is None:
        return _found("unknown", x.why_no_rules())
    if not x.rules.alerts:
        return _found(
            "fail",
            "no alerting rules are loaded here; if they run elsewhere (a ruler, another Prometheus), "
            "audit that one",
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
            lines.append(f"P99 {label}: {_latency_alert_names(p99)}")
            continue
        dead = [a for a in x.rules.alerts if a.quantiles.get(kind, 0.0) >= 0.99 and a not in alerts]
        other = [a for a in alerts if kind in a.quantiles or any(k == kind for k, _ in a.means)]
        if dead:
            problems.append(
                f"the P99 {label} alert {_latency_alert_names(dead)} reads series this server lacks"
            )
        elif other:
            how = "; ".join(
                f"{a.rule.name} reads "
                + (f"P{a.quantiles[kind] * 100:g}" if kind in a.quantiles else "its mean")
                for a in other[:3]
            )
            problems.append(f"no P99 {label} alert ({how})")
        else:
            problems.append(f"no {label} alert at all")
    shared = {a.rule.name for a in found["ttft"]} & {a.rule.name for a in found["tpot"]}
    if shared and len(found["ttft"]) == 1 and len(found["tpot"]) == 1:
        problems.append(f"TTFT and TPOT share one alert ({_list(shared)}): a page cannot say which mechanism")
    if problems:
        return _found("fail", *problems, *lines)
    return _found("pass", *lines)


def _check_red_mean_latency(x: _Facts) -> Finding:
    if x.rules is None:
        return _found("unknown", x.why_no_rules())
    if not x.rules.alerts:
        return _found(
            "unknown",
            "no alerting rules are loaded here; the SLA's definition (dashboards, a ruler elsewhere) "
            "settles it",
        )
    means = [a for a in x.rules.alerts if a.means]
    if means:
        return _found(
            "fail",
            *(
                f"{a.label} alerts on a mean latency: {', '.join(how for _, how in a.means)}"
                for a in means[:5]
            ),
        )
    latency = [a for a in x.rules.alerts if a.quantiles]
    return _found(
        "pass",
        f"{len(x.rules.alerts)} alerting rules, none on a mean latency"
        + (f"; latency alerts use quantiles ({_latency_alert_names(latency)})" if latency else ""),
    )


def _caching(x: _Facts) -> tuple[dict[str, bool], str | None]:
    states = {
        r: b for r, t in x.config_values("enable_prefix_caching").items() if (b := _truthy(t)) is not None
    }
    if states:
        return states, None
    if x.has_metric("sglang:cache_hit_rate"):
        return {}, "sglang"
    return {}, None


def _hit_ratios(x: _Facts, replicas: Iterable[str]) -> dict[str, float]:
    if x.frame is None or not x.frame.has("prefix_hit_ratio"):
        return {}
    view = x.frame.replicas("prefix_hit_ratio")
    wanted = set(replicas)
    out: dict[str, float] = {}
    for name, row in zip(view.replicas, view.values, strict=True):
        values = _finite(row)
        if (name in wanted or "fleet" in wanted) and len(values):
            out[name] = float(np.median(values))
    if not out and "fleet" in wanted:
        values = _finite(x.frame.fleet("prefix_hit_ratio"))
        if len(values):
            out["fleet"] = float(np.median(values))
    return out


def _check_prefix_monitoring(x: _Facts) -> Finding:
    if x.names is None:
        return _found("unknown", x.why_no_names())
    states, _ = _caching(x)
    if states and not any(states.values()):
        return _found("not_applicable", f"prefix caching is off on all {len(states)} replicas")
    parts: list[Finding] = []
    collected = x.has_metric(*x.metrics_of("prefix_hit_ratio"))
    if not states and not collected:
        return _found("unknown", "neither the prefix caching state nor a prefix-cache hit metric is exposed")
    if collected:
        parts.append(_found("pass", "prefix-cache hits and queries are collected"))
    else:
        parts.append(
            _found(
                "fail", "no prefix-cache hit metric (vllm:prefix_cache_hits_total / sglang:cache_hit_rate)"
            )
        )
    evictions = [
        n
        for n in ("vllm:kv_block_idle_before_evict_seconds_bucket", "sglang:kv_evictable_tokens")
        if n in x.names
    ]
    parts.append(
        _found(
            "pass",
            f"evictions: {', '.join(evictions)}"
            if evictions
            else "evictions are not exported (vLLM needs --kv-cache-metrics); the hit ratio shows "
            "their effect",
        )
    )
    parts.append(_alerted(x, "the prefix hit ratio", ("prefix_hit_ratio",)))
    return _combine(parts)


def _check_red_prefix_cache(x: _Facts) -> Finding:
    if x.names is None:
        return _found("unknown", x.why_no_names())
    states, engine = _caching(x)
    if not states and engine is None:
        return _found("unknown", f"prefix caching state (enable_prefix_caching) unknown: {x.why_no_config()}")
    on = sorted(r for r, v in states.items() if v) if states else ["fleet"]
    if states and not on:
        return _found("not_applicable", f"prefix caching is off on all {len(states)} replicas")
    ratios = _hit_ratios(x, on)
    if not ratios:
        return _found(
            "unknown",
            f"prefix caching is on ({len(on)} replicas) but the hit ratio cannot be read"
            + (f" ({x.why_no_frame()})" if x.frame is None else ""),
        )
    overall = float(np.median(list(ratios.values())))
    low = sorted(r for r, v in ratios.items() if v < x.s.prefix_hit_floor)
    window = format_duration(x.f.lookback)
    if overall < x.s.prefix_hit_floor:
        return _found(
            "fail",
            f"prefix caching on ({len(on)} replicas) with a hit ratio of {_ratio(overall)} "
            f"(median over {window}; "
            f"under {x.s.prefix_hit_floor:g}): the prefixes do not repeat",
        )
    extra = f"; near zero on {_list(low)}" if low else ""
    return _found(
        "pass", f"prefix caching on with a hit ratio of {_ratio(overall)} (median over {window}){extra}"
    )


def _targets(x: _Facts, keywords: Sequence[str]) -> list[tuple[str, str, str]]:
    """(name, health, last error) of active targets whose job or pool names one of `keywords`."""
    if x.f.targets is None:
        return []
    out: list[tuple[str, str, str]] = []
    for target in x.f.targets.get("activeTargets") or []:
        if not isinstance(target, dict):
            continue
        labels = target.get("labels") or {}
        pool = str(target.get("scrapePool") or "")
        job = str(labels.get("job") or "")
        if any(k in pool.lower() or k in job.lower() for k in keywords):
            name = _target_node(target) or str(labels.get("instance") or target.get("scrapeUrl") or pool)
            out.append((name, str(target.get("health") or "unknown"), str(target.get("lastError") or "")))
    return out


def _target_node(target: Mapping[str, Any]) -> str | None:
    labels = target.get("labels") or {}
    for key in _NODE_LABELS:
        if labels.get(key):
            return str(labels[key])
    discovered = target.get("discoveredLabels") or {}
    for key in _TARGET_NODE_LABELS:
        if discovered.get(key):
            return str(discovered[key])
    return None


def _dcgm_presence(x: _Facts) -> Finding:
    if x.names is None:
        return _found("unknown", x.why_no_names())
    dcgm = [s.labels for s in x.instant("dcgm_gpus")]
    dcgm_nodes = {str(labels[k]) for labels in dcgm for k in _NODE_LABELS if labels.get(k)}
    targets = _targets(x, ("dcgm",))
    down = [(n, e) for n, h, e in targets if h != "up"]
    dcgm_nodes |= {n for n, h, _ in targets if h == "up"}
    parts: list[Finding] = []
    if down:
        parts.append(
            _found(
                "fail",
                "DCGM exporter targets down: " + "; ".join(f"{n} ({e or 'down'})" for n, e in down[:4]),
            )
        )
    gpu_nodes: dict[str, str] = {}
    for key, source in (
        ("gpu_nodes", "kube node GPU capacity"),
        ("gpu_pod_nodes", "GPU requests of the fleet's pods"),
    ):
        for sample in x.instant(key):
            node = sample.labels.get("node")
            if node and sample.value > 0:
                gpu_nodes.setdefault(node, source)
    has_dcgm = bool(dcgm) or x.has_prefix("DCGM_")
    if gpu_nodes:
        missing = sorted(set(gpu_nodes) - dcgm_nodes)
        sources = " and ".join(sorted(set(gpu_nodes.values())))
        if missing:
            parts.append(
                _found(
                    "fail",
                    f"{len(missing)} of {len(gpu_nodes)} GPU nodes ({sources}) have no DCGM series: "
                    + _list(missing),
                )
            )
        else:
            parts.append(_found("pass", f"DCGM on all {len(gpu_nodes)} GPU nodes ({_list(gpu_nodes)})"))
        return _combine(parts)
    engine_replicas: set[str] = set()
    for signal in ("requests_running", "kv_usage_ratio", "request_rate"):
        if x.frame is not None:
            engine_replicas.update(x.frame.replicas(signal).replicas)
    if not has_dcgm:
        if engine_replicas:
            parts.append(
                _found(
                    "fail", f"no DCGM series at all while {len(engine_replicas)} engine replicas run on GPUs"
                )
            )
        else:
            parts.append(
                _found(
                    "unknown", "no DCGM series and no GPU node inventory (kube-state-metrics node capacity)"
                )
            )
        return _combine(parts)
    label = x.options.replica_label
    dcgm_replicas = {str(labels[label]) for labels in dcgm if labels.get(label)}
    if engine_replicas and dcgm_replicas:
        missing = sorted(engine_replicas - dcgm_replicas)
        if missing:
            parts.append(_found("fail", f"engine replicas without DCGM series: {_list(missing)}"))
        else:
            parts.append(_found("pass", f"DCGM series for all {len(engine_replicas)} engine replicas"))
        return _combine(parts)
    parts.append(
        _found(
            "unknown",
            f"DCGM reports {len(dcgm)} GPUs, but they cannot be matched to GPU nodes: kube-state-metrics' "
            'kube_node_status_capacity{resource="nvidia_com_gpu"} would settle it',
        )
    )
    return _combine(parts)


def _check_dcgm_alerts(x: _Facts) -> Finding:
    parts = [
        _dcgm_presence(x),
        _alerted(x, "XID errors", ("gpu_xid",)),
        _alerted(x, "ECC errors", ("gpu_ecc_errors",)),
    ]
    if x.names is not None and x.has_prefix("DCGM_") and not x.has_metric(*ECC_METRICS):
        parts.append(
            _found("fail", "DCGM exports no ECC counter (the default CSV leaves them commented out)")
        )
    if x.rules is not None:
        live, _ = x.coverage(("gpu_temp_celsius",))
        temperature = (
            f"temperature alerted by {_list(live, 2)}" if live else "temperature: no alert (advisory)"
        )
        parts.append(_found("pass", temperature))
    return _combine(parts)


def _check_driver_matrix(x: _Facts) -> Finding:
    item = _ITEMS_BY_ID["nodes.driver_matrix"]
    versions: dict[str, set[str]] = {}
    for sample in x.instant("dcgm_gpus"):
        version = next((sample.labels[k] for k in _DRIVER_LABELS if sample.labels.get(k)), None)
        node = next((sample.labels[k] for k in _NODE_LABELS if sample.labels.get(k)), "?")
        if version:
            versions.setdefault(version, set()).add(node)
    if len(versions) > 1:
        shown = "; ".join(f"{v} on {_list(n, 3)}" for v, n in sorted(versions.items()))
        return _found("fail", f"{len(versions)} driver versions across the GPU nodes: {shown}")
    if versions:
        (version,) = versions
        return _found(
            "unknown",
            f"one driver version ({version}) on every DCGM node",
            f"settles the rest: {item.settle}",
        )
    return _found("unknown", f"settles it: {item.settle}")


def _check_phase_timing(x: _Facts) -> Finding:
    if x.names is None:
        return _found("unknown", x.why_no_names())
    phases = {
        "queue": ("vllm:request_queue_time_seconds_bucket", "sglang:queue_time_seconds_bucket"),
        "prefill": (
            "vllm:request_prefill_time_seconds_bucket",
            "sglang:per_stage_req_latency_seconds_bucket",
        ),
        "decode": ("vllm:request_decode_time_seconds_bucket", "sglang:per_stage_req_latency_seconds_bucket"),
    }
    if x.engine() is None:
        return _found("unknown", "no vLLM or SGLang metrics: the engine's phase histograms settle it")
    missing = [phase for phase, names in phases.items() if not x.has_metric(*names)]
    parts = [
        _found("fail", f"not timed apart: {', '.join(missing)}")
        if missing
        else _found("pass", "queue, prefill and decode times are recorded as histograms")
    ]
    parts.append(_alerted(x, "the queue", ("queue_waiting", "queue_time_p99_seconds")))
    return _combine(parts)


def _check_tenant_cost(x: _Facts) -> Finding:
    if x.names is None:
        return _found("unknown", x.why_no_names())
    tokens = x.has_metric("litellm_input_tokens_metric_total") and x.has_metric(
        "litellm_output_tokens_metric_total"
    )
    spend = x.has_metric("litellm_spend_metric_total")
    if tokens and spend:
        return _found("pass", "the gateway meters input/output tokens and spend per team (LiteLLM)")
    item = _ITEMS_BY_ID["observability.tenant_cost"]
    return _found("unknown", "no per-tenant token or spend series here", f"settles it: {item.settle}")


def _check_rate_dashboards(x: _Facts) -> Finding:
    item = _ITEMS_BY_ID["observability.rate_dashboards"]
    if x.names is None:
        return _found("unknown", x.why_no_names(), f"settles it: {item.settle}")
    resolved = resolve(x.catalog, set(x.names))
    rates = {
        "success/error": "error_ratio",
        "timeout": "timeout_ratio",
        "rate-limit": "rejected_ratio",
        "fallback": "fallback_ratio",
    }
    have = [what for what, signal in rates.items() if not resolved[signal].blind]
    lack = [what for what, signal in rates.items() if resolved[signal].blind]
    return _found(
        "unknown",
        f"computable from metrics: {', '.join(have) or 'none'}"
        + (f"; not computable: {', '.join(lack)}" if lack else ""),
        "dashboards are not visible from Prometheus",
    )


def _within_slo(x: _Facts, frame: SignalFrame) -> tuple[dict[str, npt.NDArray[np.bool_]], bool]:
    """Per replica, the steps it served traffic with TTFT P99 and TPOT P99 within SLO; whether any breached.

    A replica's own P99 is used when it has one, else the fleet's. A step with an unknown
    latency is not within SLO ("unknown is not healthy").
    """

    def rows(signal: str) -> tuple[dict[str, FloatArray], FloatArray | None]:
        if not frame.has(signal):
            return {}, None
        view = frame.replicas(signal)
        return dict(zip(view.replicas, view.values, strict=True)), frame.fleet(signal)

    latencies = [(rows("ttft_p99_seconds"), x.s.ttft_p99_slo), (rows("tpot_p99_seconds"), x.s.tpot_p99_slo)]
    out: dict[str, npt.NDArray[np.bool_]] = {}
    breached = False
    view = frame.replicas("request_rate")
    for name, rate in zip(view.replicas, view.values, strict=True):
        serving = np.isfinite(rate) & (rate > 0)
        within, known = serving.copy(), serving.copy()
        for (per_replica, fleet), slo in latencies:
            if fleet is None:
                continue
            series = per_replica.get(name, fleet)
            ok = np.isfinite(series)
            known &= ok
            within &= ok & (np.where(ok, series, np.inf) <= slo)
        breached = breached or bool((known & ~within).any())
        out[name] = within
    return out, breached


def _redundancy(x: _Facts) -> Finding:
    """Ready replicas against ceil(peak / one replica's rate at SLO) + redundancy (the chapter's N+1).

    One replica's rate at SLO is the most a replica served with both P99s within SLO. When
    no replica was ever pushed past its SLO that is only a lower bound, so it is scaled by
    the KV headroom at that moment (a replica holding half its KV could hold about twice
    the concurrency) up to `kv_ceiling`, by at most `max_extrapolation`. A shortfall on an
    unscaled lower bound is `unknown`, not `fail`: the fleet may well do more.
    """
    frame = x.frame
    if frame is None:
        return _found("unknown", x.why_no_frame())
    if not frame.has("request_rate"):
        return _found("unknown", "no request-rate signal to find the peak")
    fleet_rate = _finite(frame.fleet("request_rate"))
    if not len(fleet_rate) or float(fleet_rate.max()) <= 0:
        return _found("unknown", "no traffic in the window: the peak's need cannot be measured")
    if not (frame.has("ttft_p99_seconds") or frame.has("tpot_p99_seconds")):
        return _found("unknown", "no TTFT or TPOT P99 signal to tell when the SLO held")
    peak, s = float(fleet_rate.max()), x.s
    within, breached = _within_slo(x, frame)
    view = frame.replicas("request_rate")
    kv_view = frame.replicas("kv_usage_ratio")
    kv_rows = dict(zip(kv_view.replicas, kv_view.values, strict=True))
    best: tuple[float, float, str, float] | None = None  # capacity, observed, replica, KV use then
    for name, rate in zip(view.replicas, view.values, strict=True):
        kv = kv_rows.get(name)
        for i in np.flatnonzero(within.get(name, np.zeros(0, dtype=bool))):
            observed = float(rate[i])
            used = float(kv[i]) if kv is not None else math.nan
            scale = 1.0
            if not breached and math.isfinite(used) and used > 0:
                scale = min(max(s.kv_ceiling / used, 1.0), s.max_extrapolation)
            if best is None or observed * scale > best[0]:
                best = (observed * scale, observed, name, used)
    if best is None:
        return _found(
            "unknown",
            "the SLO never held on any replica in the window: one replica's capacity at SLO is unknown",
        )
    capacity, observed, replica, used = best
    extrapolated = capacity > observed * (1 + 1e-9)
    serving = max(1, math.ceil(round(peak / capacity, 9)))
    needed = serving + s.redundancy
    ready_values = _finite(frame.fleet("replicas_ready")) if frame.has("replicas_ready") else np.array([])
    if len(ready_values):
        ready, source = float(ready_values[-1]), "ready (kube-state-metrics)"
    else:
        names, present = frame.presence()
        ready = float(present[:, -1].sum()) if len(names) else 0.0
        source = "replicas reporting at the end of the window (no kube-state-metrics readiness)"
    how = (
        f"{_n(observed)} req/s on {replica} at KV use {_ratio(used)}, scaled to KV {s.kv_ceiling:g}"
        if extrapolated
        else f"the most {replica} served within SLO" + ("" if breached else ", a lower bound")
    )
    evidence = (
        f"peak {_n(peak)} req/s; one replica serves about {_n(capacity)} req/s within SLO (TTFT P99 <= "
        f"{s.ttft_p99_slo:g}s, TPOT P99 <= {s.tpot_p99_slo:g}s; {how}); the peak needs {serving} + "
        f"{s.redundancy} = {needed}; {_n(ready)} {source}"
    )
    rest = "warm-up of new replicas and scale-down of long requests are not visible in metrics"
    if ready >= needed:
        return _found("pass", evidence, rest)
    if not breached and not extrapolated:
        return _found(
            "unknown",
            evidence,
            "no replica was pushed to its SLO, so its capacity is only a lower bound: a per-replica "
            "load test at "
            "SLO (or KV use) settles it",
        )
    return _found("fail", evidence, rest)


def _check_long_context_pool(x: _Facts) -> Finding:
    common, evidence = _long_prompts(x)
    item = _ITEMS_BY_ID["capacity.long_context_pool"]
    return _found("unknown", evidence if common is not None else "", f"settles it: {item.settle}")


def _check_gqa(x: _Facts) -> Finding:
    item = _ITEMS_BY_ID["capacity.gqa_quant_kv"]
    dtypes = sorted(set(x.config_values("cache_dtype", "kv_cache_dtype").values()))
    seen = f"KV cache dtype: {', '.join(dtypes)}" if dtypes else ""
    return _found("unknown", seen, f"settles it: {item.settle}")


def _check_sharing(x: _Facts) -> Finding:
    item = _ITEMS_BY_ID["nodes.sharing_policy"]
    mig = x.has_metric("DCGM_FI_PROF_GR_ENGINE_ACTIVE") and any(
        "GPU_I_PROFILE" in s.labels for s in x.instant("dcgm_gpus")
    )
    return _found("unknown", "MIG slices seen on DCGM series" if mig else "", f"settles it: {item.settle}")


def _check_statefulset(x: _Facts) -> Finding:
    item = _ITEMS_BY_ID["nodes.statefulset"]
    kinds = [
        k
        for k, p in (("Deployments", "kube_deployment_"), ("StatefulSets", "kube_statefulset_"))
        if x.has_prefix(p)
    ]
    return _found(
        "unknown", f"workloads seen: {', '.join(kinds)}" if kinds else "", f"settles it: {item.settle}"
    )


def _check_gateway(x: _Facts) -> Finding:
    item = _ITEMS_BY_ID["deployment.gateway_functions"]
    gateway = x.has_prefix("litellm_") or x.has_metric("vllm:num_incoming_requests_total")
    return _found(
        "unknown",
        "a gateway's metrics are present" if gateway else "no gateway metrics here",
        f"settles it: {item.settle}",
    )


CHECKS: Final[Mapping[str, Check]] = {
    "capacity.gpu_memory_headroom": _check_gpu_memory_headroom,
    "capacity.memory_monitoring": _check_memory_monitoring,
    "capacity.concurrency_estimate": _concurrency,
    "capacity.long_context_pool": _check_long_context_pool,
    "capacity.gqa_quant_kv": _check_gqa,
    "scheduling.continuous_batching": _check_continuous_batching,
    "scheduling.max_num_seqs_kv": _check_max_num_seqs,
    "scheduling.chunked_prefill": _check_chunked_prefill,
    "scheduling.request_length_limit": _check_request_length_limit,
    "scheduling.p99_ttft_tpot_alerts": _check_p99_alerts,
    "cache.prefix_monitoring": _check_prefix_monitoring,
    "deployment.scaling_min_replicas": _redundancy,
    "deployment.gateway_functions": _check_gateway,
    "nodes.driver_matrix": _check_driver_matrix,
    "nodes.sharing_policy": _check_sharing,
    "nodes.statefulset": _check_statefulset,
    "nodes.dcgm_alerts": _check_dcgm_alerts,
    "observability.phase_timing": _check_phase_timing,
    "observability.tenant_cost": _check_tenant_cost,
    "observability.rate_dashboards": _check_rate_dashboards,
    "red_lines.gpu_memory_utilization": _check_red_gpu_memory,
    "red_lines.mean_latency_sla": _check_red_mean_latency,
    "red_lines.max_num_seqs_knob": _check_red_max_num_seqs,
    "red_lines.prefix_cache_unstable": _check_red_prefix_cache,
}


# ------------------------------------------------------------------------------ the audit


def audit(
    fetched: Fetched, catalog: Catalog, options: QueryOptions, settings: AuditSettings | None = None
) -> AuditReport:
    """Every checklist item's status from what was fetched (pure, deterministic)."""
    facts = _Facts(fetched, catalog, options, settings or AuditSettings())
    items: list[AuditItem] = []
    for item in ITEMS:
        check = CHECKS.get(item.id)
        if check is None:
            finding = _found("unknown", f"not visible in metrics; settles it: {item.settle}")
        else:
            finding = check(facts)
            if not finding.evidence:
                finding = _found(finding.status, f"settles it: {item.settle}")
        items.append(
            AuditItem(
                item.id, item.section, item.title, finding.status, "; ".join(finding.evidence), item.fix
            )
        )
    return AuditReport(fetched.server, fetched.at, fetched.lookback, tuple(items), dict(fetched.problems))


# ------------------------------------------------------------------------------ rendering

_MARK: Final = {"pass": "PASS", "fail": "FAIL", "unknown": "UNKNOWN", "not_applicable": "N/A"}


def _counts_text(report: AuditReport) -> str:
    counts = report.counts()
    return " · ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in STATUS_ORDER)


def _sections(report: AuditReport) -> list[tuple[Section, list[AuditItem]]]:
    return [(s, [i for i in report.items if i.section == s.id]) for s in SECTIONS]


def _text(report: AuditReport) -> str:
    lines = [
        f"AUDIT  {report.server} at {format_instant(report.at)} · window {format_duration(report.lookback)}",
        _counts_text(report),
    ]
    for key, reason in sorted(report.problems.items()):
        lines.append(f"  could not read {key}: {reason}")
    width = max(len(i.id) for i in report.items)
    for section, items in _sections(report):
        lines.append("")
        lines.append(f"{section.title.upper()} ({section.original})")
        for item in items:
            lines.append(f"  {_MARK[item.status]:<7}  {item.id:<{width}}  {item.title}")
            if item.evidence:
                lines.append(f"           {item.evidence}")
            if item.status == "fail":
                lines.append(f"           fix: {item.how_to_fix}")
    return "\n".join(lines) + "\n"


def render_audit(report: AuditReport, fmt: str) -> str:
    """The report as `text` (terminal, no colour), `markdown` (tickets, wikis) or `json` (the list)."""
    if fmt == "json":
        return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return markdown_template("audit.md.j2").render(
            r=report,
            at=format_instant(report.at),
            window=format_duration(report.lookback),
            counts=report.counts(),
            order=STATUS_ORDER,
            sections=_sections(report),
        )
    if fmt == "text":
        return _text(report)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


__all__ = [
    "CHECKS",
    "ITEMS",
    "SECTIONS",
    "AlertFacts",
    "AuditItem",
    "AuditReport",
    "AuditSettings",
    "ChecklistItem",
    "Fetched",
    "Rule",
    "RulesView",
    "Sample",
    "audit",
    "bucket_quantile",
    "instant_queries",
    "latency_kind",
    "metric_names_in",
    "render_audit",
]
