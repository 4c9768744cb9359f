"""SLO thresholds, and the Prometheus rules of `triage rules`.

The room's face is the SLO (`slo`): the red lines the TUI, the audit and the rules read.
The rules themselves are `triage.rules.render` (with `records`, `promql` and `alerts`),
imported by what writes them, so reading the SLO loads no PromQL parser.
"""

from triage.rules.slo import SLO_DEFAULTS, Slo, load_slo

__all__ = ["SLO_DEFAULTS", "Slo", "load_slo"]
