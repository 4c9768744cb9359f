"""Which signals the playbooks read replica by replica.

A live diagnosis asks Prometheus for what its checks read. A histogram's per-replica
quantiles cost Prometheus most of a round (its buckets by replica are hundreds of series,
by `le` alone a few dozen), so a histogram signal is fetched per replica only when some
check reads it that way: a check whose kind compares or scans replicas, or whose view is a
replica's. Every other signal is fetched in both views whatever the checks read, so the
replicas present (`replicas_lost`) and the reports see the same fleet as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from triage.core.playbook import CheckSpec, Knowledge, iter_checks

REPLICA_KINDS = frozenset(
    {"event", "change", "label_is", "outlier", "broad", "sudden", "gradual", "shortfall", "wave"}
)
"""Check kinds that read each replica's series (`Context.frame.replicas` or `rows`)."""
REPLICA_VIEWS = frozenset({"max_replica", "median_replica"})


def _checks(knowledge: Knowledge) -> Iterable[CheckSpec]:
    for symptom in knowledge.symptoms.values():
        yield from symptom.detect
    for cause in knowledge.causes.values():
        yield from iter_checks((*cause.requires, *cause.supports, *cause.against))
    for forbidden in knowledge.forbidden.values():
        yield from forbidden.when.checks


def replica_reads(knowledge: Knowledge) -> frozenset[str]:
    """The signals some check reads per replica."""
    return frozenset(
        signal
        for check in _checks(knowledge)
        if check.kind in REPLICA_KINDS or check.view in REPLICA_VIEWS
        for signal in check.signals()
    )
