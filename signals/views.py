"""The live read's views, rendered once: what a round asks, in the words it will send.

The catalog (`signals.catalog`) resolves each signal to a source per view; here each of
those views is filled in for the round's options, once, into every text a live read sends
or shows for it. The plan (`signals.plan`), the recorded series (`signals.recorded`) and the
frame's scopes (`signals.live`) read these and fill in no template themselves, so the read
goes one way: what to ask (catalog, views, plan), how to ask it (recorded first, the rounds
and their fallbacks in `signals.live`), what came back (the frame).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from signals.catalog import QueryOptions, Resolution, Scope, SourceSpec, View, render, sum_template

_REPLICA_GROUPING = re.compile(r"\bby\s*\(([^()]*\$replica[^()]*)\)")
_OUTER_GROUPING = re.compile(r"^\W*[a-z_]+\s+by\s*\(([^()]*)\)")


def grouping(template: str, view: str, replica_label: str) -> tuple[str, ...]:
    """The labels a view's answer carries: those its aggregation naming `$replica` groups by per
    replica, the outermost one's for the fleet (none without a `by`); never `le`, which a
    quantile consumes."""
    found = (_REPLICA_GROUPING.search if view == "replica" else _OUTER_GROUPING.match)(template)
    if found is None:
        return ()
    labels = (label.strip() for label in found.group(1).split(","))
    return tuple(
        replica_label if label == "$replica" else label for label in labels if label not in ("", "le")
    )


@dataclass(frozen=True)
class RenderedView:
    """One view of a resolved source, filled in once for a round's options: every text a live
    read sends or shows for it."""

    signal: str
    view: View
    spec: SourceSpec
    scope: Scope
    """The scope its series are read with, `exporter` set to the source's."""
    query: str
    """The view's own PromQL (the source's `replica` or `fleet` query)."""
    selector: str
    """The exporter's matchers in braces (`{}` when there are none)."""
    grouping: tuple[str, ...]
    """The labels its answer carries (`grouping`)."""
    replica_query: str | None = None
    """A fleet view's: the same source's replica query, where it has one."""
    shaped_reads: Mapping[bool, tuple[str, ...]] = field(default_factory=dict)
    """A shaped source's underlying sums, read per replica (True) or for the fleet alone (False):
    a histogram's bucket rates as they are or `sum by (le)`; a sum's or a ratio's two sums by
    replica or whole."""

    @property
    def key(self) -> str:
        return f"{self.signal}/{self.view}"

    @property
    def histogram(self) -> str | None:
        """A histogram source's bucket rates, before any sum (what it reads per replica)."""
        return self.shaped_reads[True][0] if self.spec.histogram is not None else None


def _shaped_reads(spec: SourceSpec, options: QueryOptions) -> dict[bool, tuple[str, ...]]:
    def sent(expr: str, per_replica: bool, le: bool = False) -> str:
        return render(sum_template(expr, per_replica, le), options, spec.exporter)

    if spec.histogram is not None:
        return {
            True: (render(spec.histogram, options, spec.exporter),),
            False: (sent(spec.histogram, False, le=True),),
        }
    if spec.sum is not None:
        return {each: (sent(spec.sum, each),) for each in (True, False)}
    if spec.ratio is not None:
        ratio = spec.ratio
        return {each: (sent(ratio.numerator, each), sent(ratio.denominator, each)) for each in (True, False)}
    return {}


def render_views(resolutions: Mapping[str, Resolution], options: QueryOptions) -> dict[str, RenderedView]:
    """`signal/view` -> the view rendered, for every view a resolution has, in signal order
    (replica before fleet): the one place a live read fills the catalog's templates."""
    out: dict[str, RenderedView] = {}
    for name, res in resolutions.items():
        pairs: tuple[tuple[View, SourceSpec | None], ...] = (("replica", res.replica), ("fleet", res.fleet))
        for view, spec in pairs:
            template = None if spec is None else spec.replica if view == "replica" else spec.fleet
            if spec is None or template is None:
                continue
            scope = replace(options.scope(spec.exporter), exporter=spec.exporter)
            label = scope.replica_label if view == "replica" else ""
            rendered = RenderedView(
                signal=name,
                view=view,
                spec=spec,
                scope=scope,
                query=render(template, options, spec.exporter),
                selector=render("{$sel}", options, spec.exporter),
                grouping=grouping(template, view, label),
                replica_query=(
                    render(spec.replica, options, spec.exporter)
                    if view == "fleet" and spec.replica is not None
                    else None
                ),
                shaped_reads=_shaped_reads(spec, options),
            )
            out[rendered.key] = rendered
    return out
