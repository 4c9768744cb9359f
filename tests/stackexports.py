"""The signals each serving stack without vLLM's or SGLang's names exports (docs/stacks.md):
what the raw replays and the live per-stack tests both hold the catalog to. Blind signals, and
why, are in the docs."""

from __future__ import annotations

TGI = (
    "tpot_p99_seconds",
    "e2e_p99_seconds",
    "request_rate",
    "error_ratio",
    "rejected_ratio",
    "queue_waiting",
    "requests_running",
    "queue_time_p99_seconds",
    "prompt_tokens_p95",
    "output_tokens_p95",
    "prompt_tokens_rate",
    "generation_tokens_rate",
    "kv_usage_ratio",
)
TRTLLM = (
    "ttft_p99_seconds",
    "tpot_p99_seconds",
    "e2e_p99_seconds",
    "request_rate",
    "error_ratio",
    "truncated_ratio",
    "queue_waiting",
    "requests_running",
    "queue_time_p99_seconds",
    "prefix_hit_ratio",
    "kv_usage_ratio",
)
TRITON = (
    "ttft_p99_seconds",
    "e2e_p99_seconds",
    "request_rate",
    "error_ratio",
    "rejected_ratio",
    "queue_waiting",
    "requests_running",
    "kv_usage_ratio",
)
