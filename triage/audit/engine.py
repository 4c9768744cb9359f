"""`triage audit`: the deployment checklist (seeds, 推理部署检查清单) held against a live fleet.

Every item of the checklist, in its own sections, gets one status:

- `pass` / `fail` when what Prometheus holds settles it: the engines' metrics (and the
  labels of `vllm:cache_config_info`, where vLLM publishes its cache configuration),
  the alerting and recording rules it evaluates, the targets it scrapes, DCGM and
  kube-state-metrics series;
- `unknown` when metrics cannot show it (probes, quantisation quality, network MTU...)
  or the data that would show it could not be read: the evidence then says what would
  settle it, because "unknown is not healthy" and an auditor needs the next question;
- `not_applicable` when the fleet shows the premise does not hold (prefix caching off,
  long prompts rare).

A status speaks for what can be seen; where an item has parts no metric shows (the
warm-up half of "warm-up or minimum replicas"), the evidence says which part was checked.

This module takes what was fetched (`Fetched`: metric names, the rules and targets API
replies, a `SignalFrame` and instant query results) and returns an `AuditReport`;
`triage.audit.fetch` does the IO. Same inputs, same report. The items come from the
package's `checklist.yaml` (`triage.audit.checklist`, read once: the only file this
path touches), their checks from `triage.audit.checks`, one module per section.
"""

from __future__ import annotations

from signals.catalog import Catalog, QueryOptions
from triage.audit.checklist import bundled_checklist
from triage.audit.checks import CHECKS
from triage.audit.checks.facts import Facts
from triage.audit.model import AuditItem, AuditReport, AuditSettings, Fetched, verdict


def audit(
    fetched: Fetched, catalog: Catalog, options: QueryOptions, settings: AuditSettings | None = None
) -> AuditReport:
    """Every checklist item's status from what was fetched (pure, deterministic)."""
    facts = Facts(fetched, catalog, options, settings or AuditSettings())
    items: list[AuditItem] = []
    for item in bundled_checklist().items:
        finding = CHECKS[item.id](facts, item)
        if not finding.evidence:
            finding = verdict(finding.status, f"settles it: {item.settle}")
        items.append(
            AuditItem(
                item.id, item.section, item.title, finding.status, "; ".join(finding.evidence), item.fix
            )
        )
    return AuditReport(fetched.server, fetched.at, fetched.lookback, tuple(items), dict(fetched.problems))


__all__ = ["audit"]
