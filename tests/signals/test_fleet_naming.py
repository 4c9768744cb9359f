"""Which fleet alerts name: by their fleet labels, by a pod or instance, none, or a refusal with its reason.

The decision `triage serve` makes for each group before it reads a single signal. A
fleet named outright or through one of its replicas is diagnosed; alerts that name
nothing fall back to the service's selector; labels naming no fleet, or several, and
alerts naming several fleets are refused with a reason, never guessed.
"""

from __future__ import annotations

import pytest

from signals.fleets import Fleet, FleetMap, Workload
from signals.fleets.naming import name_fleet, names_anything, reference, reference_key

LABELS = ("namespace", "model_name")
M8, M70, QWEN = "llama-8b", "llama-70b", "qwen-7b"

SMALL = Fleet(
    labels=(("namespace", "llm"), ("model_name", M8)),
    engine="vllm",
    workload=Workload("Deployment", "vllm"),
    replica_label="pod",
    replicas=("vllm-a", "vllm-b"),
    pod_ips={"vllm-a": "10.0.1.1", "vllm-b": "10.0.1.2"},
    kube_pods=("vllm-a", "vllm-b"),
)
LARGE = Fleet(
    labels=(("namespace", "llm"), ("model_name", M70)),
    engine="vllm",
    workload=Workload("LeaderWorkerSet", "vllm-70b"),
    replica_label="pod",
    replicas=("vllm-70b-0",),
    pod_ips={"vllm-70b-0": "10.0.2.1"},
    workers={"vllm-70b-0-1": "vllm-70b-0"},
    kube_pods=("vllm-70b-0", "vllm-70b-0-1"),
)
BLUE, GREEN = (
    Fleet(
        labels=(("namespace", "llm"), ("model_name", QWEN)),
        engine="sglang",
        workload=Workload("Deployment", f"qwen-{colour}"),
        replica_label="pod",
        replicas=(f"qwen-{colour}-0",),
        kube_pods=(f"qwen-{colour}-0",),
    )
    for colour in ("blue", "green")
)
BARE = Fleet(
    labels=(("namespace", ""), ("model_name", "bare")),
    engine="vllm",
    workload=None,
    replica_label="instance",
    replicas=("10.9.9.9:8000",),
)
FLEETS = FleetMap((SMALL, LARGE, BLUE, GREEN, BARE))


def named(*alerts: dict[str, str]) -> tuple[Fleet | None, str, str]:
    result = name_fleet(FLEETS, alerts, LABELS)
    return result.fleet, result.how, result.reason


@pytest.mark.parametrize(
    ("alert", "fleet", "how"),
    [
        ({"namespace": "llm", "model_name": M8, "alertname": "TPOTP99High"}, SMALL, "labels"),
        ({"namespace": "llm", "pod": "vllm-b"}, SMALL, "pod"),
        ({"pod": "vllm-70b-0-1"}, LARGE, "pod"),  # a LeaderWorkerSet worker: its leader's fleet
        (
            {"exported_namespace": "llm", "exported_pod": "vllm-70b-0", "namespace": "gpu-operator"},
            LARGE,
            "pod",
        ),
        ({"instance": "10.0.1.2:8000"}, SMALL, "instance"),  # <podIP>:<port>
        ({"instance": "vllm-a:metrics"}, SMALL, "instance"),  # GKE managed collection: <pod>:<port-name>
        ({"instance": "10.9.9.9:8000"}, BARE, "instance"),  # engines with no pod label
        # Labels two workloads share, narrowed by a pod or a workload label.
        ({"namespace": "llm", "model_name": QWEN, "pod": "qwen-green-0"}, GREEN, "labels"),
        ({"namespace": "llm", "model_name": QWEN, "workload": "qwen-blue"}, BLUE, "labels"),
    ],
)
def test_an_alert_names_its_fleet_by_labels_pod_or_instance(
    alert: dict[str, str], fleet: Fleet, how: str
) -> None:
    found, found_how, reason = named(alert)
    assert found == fleet and found_how == how
    assert reason.startswith(f"fleet {fleet.name}, named by ")


def test_many_alerts_of_one_fleet_name_it_once_labels_first() -> None:
    fleet, how, reason = named(
        {"pod": "vllm-a", "namespace": "llm"},
        {"namespace": "llm", "model_name": M8},
        {"instance": "10.0.1.1:8000"},
        {"alertname": "NodeDown", "node": "gpu-node-1"},
    )
    assert fleet == SMALL and how == "labels"
    assert reason == f'fleet {SMALL.name}, named by its fleet labels namespace="llm",model_name="{M8}"'


@pytest.mark.parametrize(
    ("alerts", "reason"),
    [
        ([{"alertname": "Watchdog"}], "the alerts name no fleet (no fleet labels, pod or instance)"),
        ([{"namespace": "llm"}], "the alerts name no fleet (no fleet labels, pod or instance)"),
        (
            [{"pod": "kube-state-metrics-0", "namespace": "monitoring"}],
            "pod monitoring/kube-state-metrics-0:",
        ),
        ([{"instance": "10.0.9.1:9400"}], "instance 10.0.9.1:9400: no fleet found has that replica"),
    ],
)
def test_alerts_that_name_nothing_a_fleet_was_found_for_fall_back(
    alerts: list[dict[str, str]], reason: str
) -> None:
    fleet, how, why = named(*alerts)
    assert fleet is None and how == "none" and why.startswith(reason)


def test_labels_of_a_fleet_that_does_not_exist_are_refused_with_the_fleets_there_are() -> None:
    result = name_fleet(FLEETS, [{"namespace": "llm", "model_name": "gone"}], LABELS)
    assert result.fleet is None and result.refused and result.how == "unknown"
    assert result.reason.startswith(
        'no fleet {namespace="llm",model_name="gone"} in Prometheus; the fleets are: '
    )
    assert SMALL.name in result.reason and LARGE.name in result.reason
    empty = name_fleet(FleetMap(()), [{"namespace": "llm", "model_name": M8}], LABELS)
    assert empty.refused and empty.reason.endswith("the fleets are: none")


def test_labels_two_workloads_share_and_alerts_of_two_fleets_are_refused() -> None:
    shared = name_fleet(FLEETS, [{"namespace": "llm", "model_name": QWEN}], LABELS)
    assert shared.refused and shared.how == "ambiguous"
    assert f"names 2 fleets ({BLUE.name}, {GREEN.name})" in shared.reason
    two = name_fleet(FLEETS, [{"namespace": "llm", "model_name": M8}, {"pod": "vllm-70b-0"}], LABELS)
    assert two.refused and two.how == "several"
    assert (
        two.reason.startswith("the alerts name 2 fleets") and "group them by the fleet labels" in two.reason
    )


def test_references_keys_and_identity() -> None:
    labels = {"namespace": "llm", "model_name": 'we"ird\\name', "pod": "x"}
    assert reference(labels, LABELS) == (("namespace", "llm"), ("model_name", 'we"ird\\name'))
    assert reference_key(labels, LABELS) == 'namespace="llm",model_name="we\\"ird\\\\name"'
    assert reference({"namespace": "llm", "model_name": ""}, LABELS) is None
    assert reference_key({"model_name": M8}, LABELS) == ""
    assert reference_key({"namespace": "llm"}, ()) == ""
    assert names_anything({"instance": "x"}, LABELS) and not names_anything({"namespace": "llm"}, LABELS)
    assert LARGE.identity == (
        ("namespace", "llm"),
        ("model_name", M70),
        ("workload", "LeaderWorkerSet/vllm-70b"),
    )
    assert BARE.identity == (("namespace", ""), ("model_name", "bare"))
