"""`triage capacity`: how many replicas, by the capacity method.

Its arguments and help; what it runs is `triage.cli.handlers.capacity`.
"""

from __future__ import annotations

import argparse
from typing import Final

from triage.cli import common
from triage.inputs import options as sourceoptions

CAPACITY_EXAMPLE: Final = """\
# triage capacity --config FILE: every key but model and gpu is optional.
schema_version: 1
model: llama-3.1-8b            # a preset, or a mapping of name, layers, hidden_size,
                               # attention_heads, kv_heads, head_dim, params, experts, experts_per_token
gpu: h100-80gb                 # a preset, or {name: x, memory_gib: 80} (or memory_bytes / memory_gb)
tp: 1
weight_dtype: bf16             # fp32 fp16 bf16 fp8 int8 int4
kv_dtype: auto                 # auto (the model's dtype) fp16 bf16 fp8 int8 int4
context_tokens: 4096           # or prompt_tokens + output_tokens
gpu_memory_utilization: 0.90   # above 0.95 is the checklist's red line
activation_fraction: 0.05      # of the per-GPU budget; from vLLM's start-up log if you have it
overhead_gib: 2                # CUDA context, CUDA graphs, NCCL per GPU
peak_rate: 30                  # req/s at peak
per_replica_rate: 4            # req/s one replica sustains within SLO (load test)
redundancy: 1                  # replicas for one failure or a rolling update
"""
"""A documented example of the file `triage.capacity.inputs` reads, for docs and `--help` (kept
with the help, so printing it loads nothing of the capacity room; a test parses it)."""


def add_parser(sub: common.Subparsers) -> None:
    ca = sub.add_parser(
        "capacity",
        help="how many replicas: KV per token, memory budget, concurrency ceiling, replica count",
        description="The capacity method as a calculator: KV bytes per token from layers x KV heads x head "
        "dim x 2 x bytes per element; the per-GPU budget split into weights, KV, activations and fixed "
        "overhead; the concurrency ceiling as available KV / KV per request; replicas = peak rate / "
        "per-replica rate at SLO, rounded up, plus redundancy. The per-replica rate can be measured "
        "from a Prometheus (--prometheus): the highest rate a replica served within the SLOs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: triage capacity --model llama-3.1-8b --gpu h100-80gb --peak-rate 30 "
        "--per-replica-rate 4\n\na config file (--config) looks like:\n\n" + CAPACITY_EXAMPLE,
    )
    ca.add_argument("--config", metavar="FILE", help="inputs as YAML (flags override it)")
    ca.add_argument("--model", metavar="PRESET", help="model preset (see --list-presets)")
    ca.add_argument("--gpu", metavar="PRESET", help="GPU preset (see --list-presets)")
    ca.add_argument("--tp", type=int, metavar="N", help="tensor parallel size (default 1)")
    ca.add_argument("--weight-dtype", metavar="DTYPE", help="fp32 fp16 bf16 fp8 int8 int4 (default bf16)")
    ca.add_argument("--kv-dtype", metavar="DTYPE", help="auto fp16 bf16 fp8 int8 int4 (default auto)")
    ca.add_argument("--context", type=int, metavar="TOKENS", help="prompt + output tokens per request (4096)")
    ca.add_argument("--gpu-memory-utilization", type=float, metavar="F", help="default 0.90; red line 0.95")
    ca.add_argument("--activation-fraction", type=float, metavar="F", help="of the budget (default 0.05)")
    ca.add_argument("--overhead-gib", type=float, metavar="GIB", help="fixed per GPU (default 2)")
    ca.add_argument("--peak-rate", type=float, metavar="R", help="peak requests per second")
    ca.add_argument("--per-replica-rate", type=float, metavar="R", help="req/s one replica serves within SLO")
    ca.add_argument("--redundancy", type=int, metavar="N", help="extra replicas (default 1)")
    ca.add_argument(
        "--ttft-slo", type=float, default=1.0, metavar="S", help="for measuring: TTFT P99 SLO (1)"
    )
    ca.add_argument(
        "--tpot-slo", type=float, default=0.05, metavar="S", help="for measuring: TPOT P99 SLO (0.05)"
    )
    ca.add_argument(
        "--lookback", metavar="DURATION", default="7d", help="for measuring: history (default 7d)"
    )
    ca.add_argument("--at", metavar="T", help="for measuring: end of the history (default now)")
    ca.add_argument("--format", choices=("text", "json"), default="text")
    ca.add_argument("--list-presets", action="store_true", help="print the model and GPU presets and exit")
    sourceoptions.add_prometheus_options(ca)


COMMAND = common.Command("capacity", add_parser, "triage.cli.handlers.capacity:cmd_capacity")
