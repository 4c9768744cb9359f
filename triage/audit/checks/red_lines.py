"""Red lines (红线): the checklist's "never" items, each the hard edge of an item in another section.

They reuse the findings of those sections (gpu_memory_utilization, max_num_seqs against
KV, the prefix hit ratio, the latency alerts) rather than re-deriving them, so a red
line and its item can never disagree about the same evidence.
"""

from __future__ import annotations

import numpy as np

from signals.timeparse import format_duration
from triage.audit.checks.base import Registry, with_unreadable_rules
from triage.audit.checks.cache import hit_ratios, prefix_caching_states
from triage.audit.checks.capacity import gpu_memory_utilization
from triage.audit.checks.facts import Facts
from triage.audit.checks.formatting import listed, ratio_text
from triage.audit.checks.scheduling import latency_alert_names, max_num_seqs_finding
from triage.audit.model import ChecklistItem, Finding, verdict

CHECKS = Registry("red_lines")
CHECKS.not_visible(
    "red_lines.gateway_prompt_logic",
)


@CHECKS.check("red_lines.gpu_memory_utilization")
def _check_red_gpu_memory(x: Facts, item: ChecklistItem) -> Finding:
    return gpu_memory_utilization(x)


@CHECKS.check("red_lines.mean_latency_sla")
def _check_red_mean_latency(x: Facts, item: ChecklistItem) -> Finding:
    """Fail on any alert that reads a latency as a mean; pass only when every rule could be read."""
    if x.rules is None:
        return verdict("unknown", x.why_no_rules())
    if not x.rules.alerts and not x.rules.hiding:
        return with_unreadable_rules(
            x,
            verdict(
                "unknown",
                "no alerting rules are loaded here; the SLA's definition (dashboards, a ruler elsewhere) "
                "settles it",
            ),
            "pass",
        )
    means = [a for a in x.rules.alerts if a.means]
    if means:
        found = verdict(
            "fail",
            *(
                f"{a.label} alerts on a mean latency: {', '.join(how for _, how in a.means)}"
                for a in means[:5]
            ),
        )
        return with_unreadable_rules(x, found, "pass")
    latency = [a for a in x.rules.alerts if a.quantiles]
    readable = "readable " if x.rules.hiding else ""
    found = verdict(
        "pass",
        f"{len(x.rules.alerts)} {readable}alerting rules, none on a mean latency"
        + (f"; latency alerts use quantiles ({latency_alert_names(latency)})" if latency else ""),
    )
    return with_unreadable_rules(x, found, "pass")


@CHECKS.check("red_lines.max_num_seqs_knob")
def _check_red_max_num_seqs(x: Facts, item: ChecklistItem) -> Finding:
    return max_num_seqs_finding(x, knob=True)


@CHECKS.check("red_lines.prefix_cache_unstable")
def _check_red_prefix_cache(x: Facts, item: ChecklistItem) -> Finding:
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    states, engine = prefix_caching_states(x)
    if not states and engine is None:
        return verdict(
            "unknown", f"prefix caching state (enable_prefix_caching) unknown: {x.why_no_config()}"
        )
    on = sorted(r for r, v in states.items() if v) if states else ["fleet"]
    if states and not on:
        return verdict("not_applicable", f"prefix caching is off on all {len(states)} replicas")
    ratios = hit_ratios(x, on)
    if not ratios:
        return verdict(
            "unknown",
            f"prefix caching is on ({len(on)} replicas) but the hit ratio cannot be read"
            + (f" ({x.why_no_frame()})" if x.frame is None else ""),
        )
    overall = float(np.median(list(ratios.values())))
    low = sorted(r for r, v in ratios.items() if v < x.s.prefix_hit_floor)
    window = format_duration(x.f.lookback)
    if overall < x.s.prefix_hit_floor:
        return verdict(
            "fail",
            f"prefix caching on ({len(on)} replicas) with a hit ratio of {ratio_text(overall)} "
            f"(median over {window}; "
            f"under {x.s.prefix_hit_floor:g}): the prefixes do not repeat",
        )
    extra = f"; near zero on {listed(low)}" if low else ""
    return verdict(
        "pass", f"prefix caching on with a hit ratio of {ratio_text(overall)} (median over {window}){extra}"
    )
