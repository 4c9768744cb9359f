"""`triage capacity`: how many replicas, by the capacity method.

The answer to "just scale out" worked through: KV per token, the memory budget, the
concurrency ceiling and the replica count, with the per-replica rate measured from a
Prometheus when one is given rather than guessed.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from typing import TextIO

from signals.errors import SignalError
from signals.live import fetch_frame
from triage.capacity import EXAMPLE_FILE as CAPACITY_EXAMPLE
from triage.capacity import load_inputs as load_capacity_inputs
from triage.capacity import measure_rate_at_slo, render_presets
from triage.capacity import plan as capacity_plan
from triage.capacity import render_text as render_capacity
from triage.cli import common, sourceargs


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
    sourceargs.add_prometheus_options(ca)


def cmd_capacity(args: argparse.Namespace, out: TextIO) -> int:
    if args.list_presets:
        out.write(render_presets())
        return common.EXIT_OK
    flags = {
        "model": args.model,
        "gpu": args.gpu,
        "tp": args.tp,
        "weight_dtype": args.weight_dtype,
        "kv_dtype": args.kv_dtype,
        "context_tokens": args.context,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "activation_fraction": args.activation_fraction,
        "overhead_gib": args.overhead_gib,
        "peak_rate": args.peak_rate,
        "per_replica_rate": args.per_replica_rate,
        "redundancy": args.redundancy,
    }
    inputs = load_capacity_inputs(args.config, flags)
    if args.prometheus:
        lookback = sourceargs.duration_arg(args.lookback, "--lookback")
        step = max(60.0, lookback / 10_000)
        at = common.live_moment(args.at, time.time(), "--at")
        frame, _ = fetch_frame(*sourceargs.live_source(args, at, lookback), at, lookback, step)
        measured = measure_rate_at_slo(frame, args.ttft_slo, args.tpot_slo)
        if measured is None:
            raise SignalError("no replica served traffic within the SLOs in the window: nothing to measure")
        inputs = replace(inputs, per_replica_rate=measured.rate, per_replica_rate_source=measured.describe())
    result = capacity_plan(inputs)
    if args.format == "json":
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        out.write(render_capacity(result))
    return common.EXIT_OK


COMMAND = common.Command("capacity", add_parser, cmd_capacity)
