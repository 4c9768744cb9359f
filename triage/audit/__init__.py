"""`triage audit`: the deployment checklist held against a live fleet.

The room's public face is what the command line calls: `run_audit` (fetch, then
audit), `AuditSettings` and `render_audit`. Everything else is the room's own.
"""

from triage.audit.fetch import run_audit
from triage.audit.model import AuditReport, AuditSettings
from triage.audit.render import FORMATS, render_audit

__all__ = ["FORMATS", "AuditReport", "AuditSettings", "render_audit", "run_audit"]
