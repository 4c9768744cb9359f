"""Nodes and cluster (节点与集群): DCGM on every GPU node and its alerts, drivers, sharing, workloads.

A GPU node without a DCGM exporter is a node whose XID and ECC errors nobody sees, so
GPU nodes are found from kube-state-metrics (node capacity, pod GPU requests) and held
against the nodes DCGM reports; labels, NCCL settings, volumes and gang scheduling are
in node and pod specs, not in metrics.
"""

from __future__ import annotations

from typing import Final

from signals.catalog import resolve
from triage.audit.checks.base import Registry, alerted, combine, targets_of
from triage.audit.checks.facts import Facts
from triage.audit.checks.formatting import listed
from triage.audit.model import ChecklistItem, Finding, verdict
from triage.audit.queries import DRIVER_LABELS, ECC_METRICS, NODE_LABELS

CHECKS = Registry("nodes")
CHECKS.not_visible(
    "nodes.labels_taints",
    "nodes.weights_separate",
    "nodes.gang_scheduling",
)


def _dcgm_presence(x: Facts) -> Finding:
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    dcgm = [s.labels for s in x.instant("dcgm_gpus")]
    dcgm_nodes = {str(labels[k]) for labels in dcgm for k in NODE_LABELS if labels.get(k)}
    targets = targets_of(x, ("dcgm",))
    down = [(n, e) for n, h, e in targets if h != "up"]
    dcgm_nodes |= {n for n, h, _ in targets if h == "up"}
    parts: list[Finding] = []
    if down:
        parts.append(
            verdict(
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
                verdict(
                    "fail",
                    f"{len(missing)} of {len(gpu_nodes)} GPU nodes ({sources}) have no DCGM series: "
                    + listed(missing),
                )
            )
        else:
            parts.append(verdict("pass", f"DCGM on all {len(gpu_nodes)} GPU nodes ({listed(gpu_nodes)})"))
        return combine(parts)
    engine_replicas: set[str] = set()
    for signal in ("requests_running", "kv_usage_ratio", "request_rate"):
        if x.frame is not None:
            engine_replicas.update(x.frame.replicas(signal).replicas)
    if not has_dcgm:
        if engine_replicas:
            parts.append(
                verdict(
                    "fail", f"no DCGM series at all while {len(engine_replicas)} engine replicas run on GPUs"
                )
            )
        else:
            parts.append(
                verdict(
                    "unknown", "no DCGM series and no GPU node inventory (kube-state-metrics node capacity)"
                )
            )
        return combine(parts)
    label = x.options.replica_label
    # Scoped to a fleet, a GPU's replica may go by another name there (a GPU joined by node by
    # its UUID, a worker pod by its leader): the scope's renames say which.
    renames = x.options.scope("gpu").renames
    dcgm_replicas = {
        renames.get(str(labels[label]), str(labels[label])) for labels in dcgm if labels.get(label)
    }
    if engine_replicas and dcgm_replicas:
        missing = sorted(engine_replicas - dcgm_replicas)
        if missing:
            parts.append(verdict("fail", f"engine replicas without DCGM series: {listed(missing)}"))
        else:
            parts.append(verdict("pass", f"DCGM series for all {len(engine_replicas)} engine replicas"))
        return combine(parts)
    parts.append(
        verdict(
            "unknown",
            f"DCGM reports {len(dcgm)} GPUs, but they cannot be matched to GPU nodes: kube-state-metrics' "
            'kube_node_status_capacity{resource="nvidia_com_gpu"} would settle it',
        )
    )
    return combine(parts)


COUNTERS_CSV: Final = (
    "its counters CSV (etc/default-counters.csv, or the ConfigMap the GPU Operator's "
    "dcgmExporter.config.name names)"
)
COMMENTED_OUT: Final = (
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "gpu_throttle", "Errors and violations"),
    ("DCGM_FI_DEV_POWER_VIOLATION", "gpu_throttle", "Errors and violations"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu_ecc_errors", "ECC"),
)
"""The default CSV's commented-out lines the catalog's own sources read: (field, signal, heading)."""
CLOCK_EVENTS_LINE: Final = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, Clock event reasons (bitmask)."
"""The line to add for the clock event reasons: the default CSV has none, not even commented out."""


def _default_counters(x: Facts) -> Finding:
    """A default dcgm-exporter install: which CSV lines would give `gpu_throttle` and
    `gpu_ecc_errors` their real readings, and what the diagnosis reads in their place meanwhile.

    Advisory (a pass): the item asks for XID and ECC alerts, judged on their own, and
    `triage rules` writes the ECC alert on whichever source gpu_ecc_errors resolves to.
    """
    if x.names is None or not x.has_prefix("DCGM_"):
        return verdict("not_applicable")
    found = resolve(x.catalog, set(x.names))
    uncomment: dict[str, list[str]] = {}
    add = ""
    stand_ins: list[str] = []
    blind: list[str] = []
    for signal in ("gpu_throttle", "gpu_ecc_errors"):
        res = found[signal]
        chosen = res.replica or res.fleet
        if chosen is not None and chosen.stands_in is None:
            continue  # read from its real counters
        for field, of, heading in COMMENTED_OUT:
            if of == signal and field not in x.names:
                uncomment.setdefault(heading, []).append(field)
        if signal == "gpu_throttle" and "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" not in x.names:
            add = f", and add `{CLOCK_EVENTS_LINE}` for the throttle's reasons (no line of it to uncomment)"
        if chosen is not None and chosen.stands_in:
            stand_ins.append(f"for {signal}, {chosen.stands_in}")
        else:
            blind.append(signal)
    if not stand_ins and not blind:
        return verdict("pass", "DCGM exports the throttle and ECC counters the catalog reads")
    lines = " and ".join(f"{' and '.join(fields)} (# {heading})" for heading, fields in uncomment.items())
    todo = f"uncomment {lines} in {COUNTERS_CSV}{add}" if lines else add.removeprefix(", and ")
    return verdict(
        "pass",
        f"advisory: DCGM's default counters leave out what the throttle and ECC signals read: {todo}",
        f"meanwhile a diagnosis reads stand-ins and says so: {', and '.join(stand_ins)}" if stand_ins else "",
        f"{' and '.join(blind)} {'are' if len(blind) > 1 else 'is'} blind until then" if blind else "",
    )


@CHECKS.check("nodes.dcgm_alerts")
def _check_dcgm_alerts(x: Facts, item: ChecklistItem) -> Finding:
    parts = [
        _dcgm_presence(x),
        alerted(x, "XID errors", ("gpu_xid",)),
        alerted(x, "ECC errors", ("gpu_ecc_errors",)),
        _default_counters(x),
    ]
    if x.names is not None and x.has_prefix("DCGM_") and not x.has_metric(*ECC_METRICS):
        parts.append(
            verdict("fail", "DCGM exports no ECC counter (the default CSV leaves them commented out)")
        )
    if x.rules is not None:
        live, _ = x.coverage(("gpu_temp_celsius",))
        temperature = (
            f"temperature alerted by {listed(live, 2)}" if live else "temperature: no alert (advisory)"
        )
        parts.append(verdict("pass", temperature))
    return combine(parts)


@CHECKS.check("nodes.driver_matrix")
def _check_driver_matrix(x: Facts, item: ChecklistItem) -> Finding:
    versions: dict[str, set[str]] = {}
    for sample in x.instant("dcgm_gpus"):
        version = next((sample.labels[k] for k in DRIVER_LABELS if sample.labels.get(k)), None)
        node = next((sample.labels[k] for k in NODE_LABELS if sample.labels.get(k)), "?")
        if version:
            versions.setdefault(version, set()).add(node)
    if len(versions) > 1:
        shown = "; ".join(f"{v} on {listed(n, 3)}" for v, n in sorted(versions.items()))
        return verdict("fail", f"{len(versions)} driver versions across the GPU nodes: {shown}")
    if versions:
        (version,) = versions
        return verdict(
            "unknown",
            f"one driver version ({version}) on every DCGM node",
            f"settles the rest: {item.settle}",
        )
    return verdict("unknown", f"settles it: {item.settle}")


@CHECKS.check("nodes.sharing_policy")
def _check_sharing(x: Facts, item: ChecklistItem) -> Finding:
    mig = x.has_metric("DCGM_FI_PROF_GR_ENGINE_ACTIVE") and any(
        "GPU_I_PROFILE" in s.labels for s in x.instant("dcgm_gpus")
    )
    return verdict("unknown", "MIG slices seen on DCGM series" if mig else "", f"settles it: {item.settle}")


@CHECKS.check("nodes.statefulset")
def _check_statefulset(x: Facts, item: ChecklistItem) -> Finding:
    kinds = [
        k
        for k, p in (("Deployments", "kube_deployment_"), ("StatefulSets", "kube_statefulset_"))
        if x.has_prefix(p)
    ]
    return verdict(
        "unknown", f"workloads seen: {', '.join(kinds)}" if kinds else "", f"settles it: {item.settle}"
    )


NVLINK_ERROR_COUNTERS: Final = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
"""The per-GPU NVLink error totals `gpu_nvlink_errors` reads: commented out under `# NVLink` in
the default counters CSV."""
PCIE_REPLAY_LINE: Final = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries."
"""The PCIe replay line of the default CSV (enabled there): named when a custom CSV dropped it."""


def _multi_gpu(x: Facts) -> tuple[dict[str, int], dict[str, int]]:
    """Replicas DCGM shows on more than one GPU; where DCGM's GPUs cannot be matched to replicas,
    the GPU nodes with more than one GPU instead (a node of single-GPU replicas is not one
    tensor-parallel instance)."""
    label = x.options.replica_label
    renames = x.options.scope("gpu").renames
    gpus: dict[str, set[str]] = {}
    for sample in x.instant("dcgm_gpus"):
        replica = sample.labels.get(label)
        gpu = sample.labels.get("UUID") or sample.labels.get("gpu")
        if replica and gpu:
            gpus.setdefault(renames.get(str(replica), str(replica)), set()).add(str(gpu))
    replicas = {r: len(g) for r, g in gpus.items() if len(g) > 1}
    if gpus:
        return replicas, {}
    nodes = {
        str(s.labels["node"]): int(s.value)
        for s in x.instant("gpu_nodes")
        if s.labels.get("node") and s.value > 1
    }
    return replicas, nodes


def _link_counters(x: Facts) -> Finding:
    """On multi-GPU replicas (tensor parallel) or nodes, whether DCGM exports the NVLink and PCIe
    error counters `interconnect_fault` reads, and which CSV lines to enable where it does not.

    Advisory (a pass), as the default-counters advice of `nodes.dcgm_alerts` is: the item asks
    for the NCCL NIC and MTU, which metrics cannot show.
    """
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    replicas, nodes = _multi_gpu(x)
    if not replicas and not nodes:
        if not x.has_prefix("DCGM_"):
            return verdict(
                "unknown", "no DCGM series and no GPU node inventory: multi-GPU replicas cannot be told"
            )
        return verdict(
            "not_applicable", "no replica or node with more than one GPU: no NVLink between a replica's GPUs"
        )
    if replicas:
        shown = listed(f"{r} ({n} GPUs)" for r, n in sorted(replicas.items()))
        where = f"{len(replicas)} replicas on several GPUs ({shown})"
    else:
        shown = listed(f"{n} ({c} GPUs)" for n, c in sorted(nodes.items()))
        where = f"{len(nodes)} GPU nodes with several GPUs ({shown})"
    if not x.has_prefix("DCGM_"):
        return verdict("unknown", f"{where}, but no DCGM series: NVLink and PCIe link errors are not seen")
    missing = [m for m in NVLINK_ERROR_COUNTERS if m not in x.names]
    pcie = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" in x.names
    if not missing and pcie:
        return verdict("pass", f"{where}: DCGM exports the NVLink error counters and PCIe replays")
    todo = []
    if missing:
        todo.append(f"uncomment {' and '.join(missing)} (# NVLink) in {COUNTERS_CSV}")
    if not pcie:
        todo.append(f"add `{PCIE_REPLAY_LINE}` back to it")
    blind = (
        "gpu_nvlink_errors and gpu_pcie_replays are blind"
        if len(missing) == len(NVLINK_ERROR_COUNTERS) and not pcie
        else "gpu_nvlink_errors is blind (only PCIe replays are read)"
        if len(missing) == len(NVLINK_ERROR_COUNTERS)
        else "gpu_pcie_replays is blind"
        if not pcie
        else "some NVLink errors are not counted"
    )
    return verdict(
        "pass",
        f"advisory: {where}, and DCGM's counters leave out their link errors: {', and '.join(todo)}",
        f"until then {blind}: a tensor-parallel step waits on its slowest link, and a link fault is "
        "told from throttling only by these counters",
    )


@CHECKS.check("nodes.nccl_network")
def _check_nccl_network(x: Facts, item: ChecklistItem) -> Finding:
    return combine(
        [
            _link_counters(x),
            verdict("unknown", f"the NCCL NIC and MTU are not visible in metrics; settles it: {item.settle}"),
        ]
    )
