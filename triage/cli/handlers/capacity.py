"""`triage capacity`: how many replicas, by the capacity method.

The answer to "just scale out" worked through: KV per token, the memory budget, the
concurrency ceiling and the replica count, with the per-replica rate measured from a
Prometheus when one is given rather than guessed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import TextIO

from signals.errors import SignalError
from signals.live import fetch_frame
from triage.capacity import load_inputs as load_capacity_inputs
from triage.capacity import measure_rate_at_slo, render_presets
from triage.capacity import plan as capacity_plan
from triage.capacity import render_text as render_capacity
from triage.cli import common
from triage.cli.progress import TerminalProgress
from triage.inputs import sources as sourceargs
from triage.inputs.arguments import duration_arg, live_moment


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
        lookback = duration_arg(args.lookback, "--lookback")
        step = max(60.0, lookback / 10_000)
        at = live_moment(args.at, time.time(), "--at")
        with TerminalProgress(sys.stderr, "prometheus") as progress:
            source = sourceargs.live_source(args, at, lookback, progress=progress)
            frame, _ = fetch_frame(*source, at, lookback, step)
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
