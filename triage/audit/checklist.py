"""The deployment checklist (seeds, 推理部署检查清单): its sections and items, in order.

Each item keeps the checklist's own words beside an English title, what settles it
when metrics cannot, and how to fix it when it fails.
"""

from __future__ import annotations

from typing import Final

from triage.audit.model import ChecklistItem, Section

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


ITEMS_BY_ID: Final = {item.id: item for item in ITEMS}


__all__ = ["ITEMS", "ITEMS_BY_ID", "SECTIONS"]
