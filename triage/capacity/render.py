"""The plan and the presets as plain text, for a terminal or a ticket.

Presentation only: every number shown is computed by the calculator and the memory
arithmetic; this module only lays them out.
"""

from __future__ import annotations

from triage.capacity.calculator import CapacityPlan
from triage.capacity.presets import GPU_PRESETS, MODEL_PRESETS
from triage.capacity.specs import GB, KV_AUTO, MIB, WEIGHT_BITS, gib, kv_bits


def _bytes_small(n: int) -> str:
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB:,} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024:,} KiB"
    return f"{n:,} B"


def _rate(value: float) -> str:
    return f"{value:g}"


def render_text(plan: CapacityPlan) -> str:
    """Plain text for a terminal or a ticket; lines are not hard-wrapped, so they grep cleanly."""
    i, b, m = plan.inputs, plan.budget, plan.inputs.model
    bits = kv_bits(i.kv_dtype, i.weight_dtype)
    kv_name = f"{i.kv_dtype} ({bits}-bit)" if i.kv_dtype == KV_AUTO else i.kv_dtype
    out = [
        f"CAPACITY  {m.name} on {i.gpu.name} · tp {i.tp} · weights {i.weight_dtype} · KV {kv_name} · "
        f"{i.context_tokens:,} tokens per request (prompt + output)",
        f"GPU       {i.gpu.label or i.gpu.name}: {b.total_bytes:,} B = {gib(b.total_bytes)} "
        f"({b.total_bytes / GB:.1f} GB) × gpu_memory_utilization {b.utilization:.2f} = "
        f"{gib(b.budget_bytes)} budget per GPU",
        "MEMORY PER GPU",
        f"  weights      {gib(b.weights_bytes):>11}  {m.params / 1e9:.2f}B params × "
        f"{WEIGHT_BITS[i.weight_dtype] / 8:g} B ÷ tp {i.tp}",
        f"  activations  {gib(b.activation_bytes):>11}  estimate: {b.activation_fraction:.0%} of the budget "
        "(vLLM logs its measured peak at start-up)",
        f"  overhead     {gib(b.overhead_bytes):>11}  CUDA context, CUDA graphs, NCCL buffers",
    ]
    if b.weights_fit:
        out.append(f"  KV cache     {gib(b.kv_bytes):>11}  what is left")
    else:
        out.append(f"  KV cache     {gib(0):>11}  nothing left: {gib(b.shortfall_bytes)} short")
    share = f"; {_bytes_small(plan.kv_bytes_per_token_per_gpu)} per GPU" if i.tp > 1 else ""
    out.append(
        f"KV        {_bytes_small(plan.kv_bytes_per_token)} per token = {m.layers} layers × "
        f"{m.kv_heads} KV heads ({m.attention}) × {m.head_dim} head dim × 2 (K and V) × "
        f"{bits / 8:g} B{share}; "
        f"{_bytes_small(plan.kv_bytes_per_request_per_gpu)} per request per GPU"
    )
    if plan.fits:
        out.append(
            f"CONCURRENCY  ≤ {plan.concurrency:,} requests at {i.context_tokens:,} tokens "
            f"({gib(b.kv_bytes)} ÷ {_bytes_small(plan.kv_bytes_per_request_per_gpu)})"
        )
    else:
        out.append(f"DOES NOT FIT  {plan.why_not()}")
    r = plan.replicas
    if r is not None:
        out.append(
            f"REPLICAS  {_rate(r.peak_rate)} req/s peak ÷ {_rate(r.per_replica_rate)} req/s per replica "
            f"at SLO = {r.ratio:.3g} → {r.base}, + {r.redundancy} redundancy = {r.replicas} replicas "
            f"× tp {i.tp} = {plan.gpus} GPUs"
        )
        if r.source != "given":
            out.append(f"          per-replica rate {r.source}")
    elif not plan.fits:
        out.append("REPLICAS  not planned: one replica does not fit (see above)")
    else:
        out.append(
            "REPLICAS  need --peak-rate and --per-replica-rate (the highest rate one replica sustains "
            "within SLO: a load test, or measured from Prometheus)"
        )
    if plan.warnings:
        out.append("WARNINGS")
        out.extend(f"  ! {w}" for w in plan.warnings)
    out.append("NOTES")
    out.extend(f"  · {n}" for n in plan.notes)
    return "\n".join(out) + "\n"


def render_presets() -> str:
    """The bundled model and GPU presets, for --list-presets."""
    out = ["MODELS  (layers, hidden, heads/KV heads, head dim, params)"]
    for key, m in MODEL_PRESETS.items():
        moe = f", MoE {m.experts} experts ({m.experts_per_token} per token)" if m.experts > 1 else ""
        out.append(
            f"  {key:<14} {m.layers} layers, hidden {m.hidden_size}, {m.attention_heads}/{m.kv_heads} heads "
            f"({m.attention}), head dim {m.head_dim}, {m.params / 1e9:.2f}B params{moe}  [{m.source}]"
        )
    out.append("GPUS  (memory as the driver reports it)")
    for key, g in GPU_PRESETS.items():
        out.append(f"  {key:<14} {g.memory_bytes:,} B  {g.note}")
    return "\n".join(out) + "\n"
