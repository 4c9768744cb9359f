"""Bundled incidents: the core cases (KV pressure, replica loss, capacity, burst, no incident)."""

from __future__ import annotations

from tools.registry import incident, path
from tools.synth import Fleet


@incident
def kv_pressure_long_context() -> None:
    f = Fleet(
        "kv-pressure-long-context",
        "Contexts grew in a long-document batch job; KV filled on every "
        "replica and the scheduler started preempting.",
        replicas=6,
        duration="90m",
        seed=11,
    )
    at = "50m"
    f.step("kv_usage_ratio", at, to=0.985, ramp="6m")
    f.step("preemption_rate", "52m", to=2.5, ramp="3m")
    f.step("tpot_p99_seconds", "53m", factor=2.6, ramp="3m")
    f.step("tpot_p50_seconds", "53m", factor=1.6, ramp="3m")
    f.step("ttft_p99_seconds", "54m", factor=2.2, ramp="3m")
    f.step("queue_waiting", "54m", to=6, ramp="3m")
    f.step("prompt_tokens_p95", at, factor=1.25, ramp="5m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="80m",
        expect={
            "cause": "kv_pressure",
            "forbidden": ["scale_out", "raise_gpu_memory_utilization", "raise_max_num_seqs", "tune_sampling"],
        },
    )


@incident
def healthy_fleet() -> None:
    f = Fleet(
        "healthy-fleet-no-incident",
        "An ordinary hour: noise, a scrape gap, nothing departs from "
        "its baseline. The tool must not blame anything.",
        replicas=5,
        duration="90m",
        seed=3,
        gaps=3,
    )
    f.write(path(f.name), None, expect={"cause": "none", "forbidden": ["scale_out"]})


@incident
def replica_down_queue_growth() -> None:
    f = Fleet(
        "replica-down-queue-growth",
        "Two of eight replicas stopped (node drained by mistake); the "
        "survivors' queues and TTFT rose. Queue growth looks like a capacity problem but is not.",
        replicas=8,
        duration="100m",
        seed=21,
    )
    gone = f.who(2, 5)
    survivors = [n for n in f.names if n not in gone]
    f.set("replicas_ready", "55m", 6)
    f.step("request_rate", "55m", factor=8 / 6, replicas=survivors)
    f.step("queue_waiting", "56m", to=9, replicas=survivors, ramp="4m")
    f.step("requests_running", "56m", factor=1.3, replicas=survivors)
    f.step("kv_usage_ratio", "56m", to=0.97, replicas=survivors, ramp="5m")
    f.step("preemption_rate", "58m", to=0.8, replicas=survivors)
    f.step("ttft_p99_seconds", "56m", factor=3.0, replicas=survivors, ramp="4m")
    f.step("queue_time_p99_seconds", "56m", factor=6.0, replicas=survivors, ramp="4m")
    for name in gone:
        f.vanish(name, "55m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="90m",
        expect={
            "cause": "replica_down",
            "also": ["kv_pressure"],
            "forbidden": ["scale_out", "tune_sampling"],
        },
    )


def demand_outgrows_fleet(f: Fleet) -> None:
    """Two hours of steady, broad demand growth until every replica queues (from 30m to 150m)."""
    f.ramp("request_rate", "30m", "150m", 1.7)
    f.ramp("prompt_tokens_rate", "30m", "150m", 1.7)
    f.ramp("generation_tokens_rate", "30m", "150m", 1.7)
    f.ramp("requests_running", "30m", "150m", 1.4)
    f.ramp("kv_usage_ratio", "30m", "150m", 1.45)
    f.step("queue_waiting", "120m", to=12, ramp="30m")
    f.step("queue_time_p99_seconds", "120m", factor=8, ramp="30m")
    f.step("ttft_p99_seconds", "120m", factor=3.0, ramp="30m")


@incident
def capacity_shortage_steady_growth() -> None:
    f = Fleet(
        "capacity-shortage-steady-growth",
        "A product launch drove demand up steadily over two hours "
        "across every tenant; each replica saturated evenly. KV, cache, GPUs and replicas are healthy.",
        replicas=6,
        duration="180m",
        seed=31,
    )
    demand_outgrows_fleet(f)
    f.write(
        path(f.name),
        "ttft_slow",
        at="175m",
        expect={"cause": "capacity_shortage", "not_forbidden": ["scale_out"], "forbidden": ["tune_sampling"]},
    )


@incident
def traffic_burst_one_tenant() -> None:
    f = Fleet(
        "traffic-burst-one-tenant",
        "A batch client started hammering the endpoint: request rate "
        "doubled within two minutes; queues grew at once everywhere.",
        replicas=5,
        duration="80m",
        seed=41,
    )
    f.step("request_rate", "50m", factor=2.1, ramp="2m")
    f.step("prompt_tokens_rate", "50m", factor=2.1, ramp="2m")
    f.step("generation_tokens_rate", "50m", factor=2.0, ramp="2m")
    f.step("queue_waiting", "51m", to=15, ramp="2m")
    f.step("requests_running", "51m", factor=1.6, ramp="2m")
    f.step("queue_time_p99_seconds", "51m", factor=10, ramp="2m")
    f.step("ttft_p99_seconds", "51m", factor=4, ramp="2m")
    f.step("kv_usage_ratio", "51m", to=0.8, ramp="3m")
    f.step("rejected_ratio", "52m", to=0.04, ramp="2m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="70m",
        expect={"cause": "traffic_burst", "forbidden": ["scale_out", "tune_sampling"]},
    )
