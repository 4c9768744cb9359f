"""The audit report as text (a terminal, no colour), Markdown (tickets, wikis) or JSON (tracking).

The Markdown template is the room's own (`triage/audit/templates/audit.md.j2`), loaded
through the core's `markdown_environment`, so its table cells are escaped by the same
`e_md` filter as the diagnosis's.
"""

from __future__ import annotations

import json
from typing import Final

from signals.timeparse import format_duration, format_instant
from triage.audit.checklist import bundled_checklist
from triage.audit.model import STATUS_ORDER, AuditItem, AuditReport, Section
from triage.core.markdown import markdown_environment

FORMATS: Final = ("text", "markdown", "json")
_MARKDOWN: Final = markdown_environment("triage.audit")
_MARK: Final = {"pass": "PASS", "fail": "FAIL", "unknown": "UNKNOWN", "not_applicable": "N/A"}


def _counts_text(report: AuditReport) -> str:
    counts = report.counts()
    return " · ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in STATUS_ORDER)


def _sections(report: AuditReport) -> list[tuple[Section, list[AuditItem]]]:
    return [(s, [i for i in report.items if i.section == s.id]) for s in bundled_checklist().sections]


def _text(report: AuditReport) -> str:
    lines = [
        f"AUDIT  {report.server} at {format_instant(report.at)} · window {format_duration(report.lookback)}",
        _counts_text(report),
    ]
    for key, reason in sorted(report.problems.items()):
        lines.append(f"  could not read {key}: {reason}")
    width = max(len(i.id) for i in report.items)
    for section, items in _sections(report):
        lines.append("")
        lines.append(f"{section.title.upper()} ({section.original})")
        for item in items:
            lines.append(f"  {_MARK[item.status]:<7}  {item.id:<{width}}  {item.title}")
            if item.evidence:
                lines.append(f"           {item.evidence}")
            if item.status == "fail":
                lines.append(f"           fix: {item.how_to_fix}")
    return "\n".join(lines) + "\n"


def render_audit(report: AuditReport, fmt: str) -> str:
    """The report as `text` (terminal, no colour), `markdown` (tickets, wikis) or `json` (the list)."""
    if fmt == "json":
        return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return _MARKDOWN.get_template("audit.md.j2").render(
            r=report,
            at=format_instant(report.at),
            window=format_duration(report.lookback),
            counts=report.counts(),
            order=STATUS_ORDER,
            sections=_sections(report),
        )
    if fmt == "text":
        return _text(report)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "render_audit"]
