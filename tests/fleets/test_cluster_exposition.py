"""The pages the exporters served have the shape of the real dumps in shared/real.

For every family an engine or DCGM exporter serves that also appears in a real dump, its
label names must be among those the real dump shows for that family. Two additions are
allowed, both documented and named here: vLLM V1's `engine` label (reference/metrics.md
1.1; the only vLLM dump in shared/real is V0, which predates it) with the V1 CacheConfig
fields of `vllm:cache_config_info` (metrics.md 1.4), and dcgm-exporter's Kubernetes
mapping (`pod`, `namespace`, `container`), which the real DCGM dump shows on its one
series that came from a Kubernetes pod.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.cluster.exposition import Family, parse
from tools.cluster.scenarios import Scenario

V1_ADDITIONS = {"engine"}
V1_CACHE_CONFIG = {"engine", "prefix_caching_hash_algo", "swap_space"}
DCGM_MAPPING = {"pod", "namespace", "container"}
# reference/metrics.md 1.3 (vLLM V1) and 2.2 (SGLang 0.5.x), as the exporters write `le`
VLLM_TTFT = (
    "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1.0 2.5 5.0 7.5 10.0 20.0 40.0 80.0 160.0 "
)
VLLM_TTFT += "640.0 2560.0"
SGLANG_TTFT = "0.1 0.2 0.4 0.6 0.8 1 2 4 6 8 10 20 40 60 80 100 200 400"


def pages(scenario: Scenario, *roles: str) -> dict[str, dict[str, Family]]:
    assert scenario.cluster is not None and scenario.scraped is not None
    return {
        p.name: parse(scenario.scraped.pages[p.address]) for p in scenario.cluster.targets if p.role in roles
    }


def real_families(real: Path) -> dict[str, Family]:
    merged: dict[str, Family] = {}
    for path in sorted(real.glob("exposition-*.txt")):
        for name, family in parse(path.read_text(encoding="utf-8")).items():
            merged.setdefault(name, Family(name, family.type)).samples.extend(family.samples)
    return merged


def allowed(name: str, real: dict[str, Family]) -> frozenset[str]:
    names = set(real[name].label_names)
    if name == "vllm:cache_config_info":
        names |= V1_CACHE_CONFIG
    elif name.startswith("vllm:"):
        names |= V1_ADDITIONS
    elif name.startswith("DCGM_"):
        mapping = {
            k for f in real.values() if f.name.startswith("DCGM_") for k in f.label_names
        } & DCGM_MAPPING
        assert mapping == DCGM_MAPPING, "the real DCGM dump no longer shows the pod mapping"
        names |= mapping
    return frozenset(names)


def test_served_label_names_are_those_of_the_real_dumps(scenario: Scenario, real: Path) -> None:
    known = real_families(real)
    compared: set[str] = set()
    for pod, families in pages(scenario, "engine", "dcgm").items():
        for name, family in families.items():
            if name not in known:
                continue
            extra = family.label_names - allowed(name, known)
            assert not extra, f"{pod} serves {name} with {sorted(extra)}, which the real dumps do not show"
            compared.add(name)
    for name in (
        "vllm:num_requests_running",
        "vllm:request_success_total",
        "vllm:time_to_first_token_seconds",
        "vllm:cache_config_info",
        "sglang:num_running_reqs",
        "sglang:prompt_tokens_total",
        "sglang:time_to_first_token_seconds",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
    ):
        assert name in compared, f"{name} was not compared with a real dump"


def test_pages_are_well_formed_with_the_real_bucket_edges(scenario: Scenario) -> None:
    for pod, families in pages(scenario, "engine", "dcgm", "ksm", "router").items():
        for name, family in families.items():
            assert family.help and family.type in ("gauge", "counter", "histogram"), (pod, name)
            if family.type != "histogram":
                continue
            groups: dict[tuple[tuple[str, str], ...], list[tuple[str, dict[str, str], float]]] = {}
            for sample in family.samples:
                key = tuple(sorted((k, v) for k, v in sample[1].items() if k != "le"))
                groups.setdefault(key, []).append(sample)
            for samples in groups.values():
                buckets = [(float(labels["le"]), v) for n, labels, v in samples if n.endswith("_bucket")]
                counts = [v for _, v in sorted(buckets)]
                assert counts == sorted(counts), (pod, name)
                total = next(v for n, _, v in samples if n.endswith("_count"))
                assert counts[-1] == total and sorted(buckets)[-1][0] == float("inf"), (pod, name)
    vllm = next(f for f in pages(scenario, "engine").values() if "vllm:time_to_first_token_seconds" in f)
    sglang = next(f for f in pages(scenario, "engine").values() if "sglang:time_to_first_token_seconds" in f)
    for families, name, edges in (
        (vllm, "vllm:time_to_first_token_seconds", VLLM_TTFT),
        (sglang, "sglang:time_to_first_token_seconds", SGLANG_TTFT),
    ):
        les = {labels["le"] for n, labels, _ in families[name].samples if n.endswith("_bucket")}
        assert {float(x) for x in les} == {float(x) for x in edges.split()} | {float("inf")}


def test_idle_gpus_are_served_with_empty_workload_labels(scenario: Scenario) -> None:
    assert scenario.truth is not None
    idle = {g.uuid for g in scenario.truth.idle_gpus}
    served = [
        labels
        for families in pages(scenario, "dcgm").values()
        for _, labels, _ in families["DCGM_FI_DEV_GPU_TEMP"].samples
        if labels["UUID"] in idle
    ]
    assert len(served) == len(idle)
    assert all(labels["pod"] == labels["namespace"] == labels["container"] == "" for labels in served)


_KSM_ROW = re.compile(r"^\|\s*(kube_[a-z_]+)\s*\|(.*)$")


def test_kube_state_metrics_labels_are_the_documented_ones(scenario: Scenario, real: Path) -> None:
    documented: dict[str, set[str]] = {}
    for path in real.glob("ref-kube-state-metrics-v2.20.0-*.md"):
        for line in path.read_text(encoding="utf-8").splitlines():
            match = _KSM_ROW.match(line)
            if match:
                documented[match.group(1)] = set(re.findall(r"`([a-z_]+)`=", match.group(2)))
    (families,) = pages(scenario, "ksm").values()
    checked = 0
    for name, family in families.items():
        if name in documented:
            assert family.label_names <= documented[name], (name, family.label_names - documented[name])
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("role", ["engine", "dcgm", "ksm", "router"])
def test_every_served_sample_was_scraped(scenario: Scenario, role: str) -> None:
    """Each page's sample count is what Prometheus recorded for that target (nothing lost)."""
    assert scenario.cluster is not None and scenario.scraped is not None
    per_instance: dict[str, int] = {}
    for s in scenario.scraped.series:
        if not s["__name__"].startswith(("up", "scrape_")):
            per_instance[s["instance"]] = per_instance.get(s["instance"], 0) + 1
    for pod in scenario.cluster.targets:
        if pod.role == role:
            served = sum(len(f.samples) for f in parse(scenario.scraped.pages[pod.address]).values())
            assert per_instance[pod.address] == served, pod.name
