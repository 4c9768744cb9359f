"""The signal catalog: vocabulary signal -> PromQL per exporter flavour, validated like the playbooks.

The bundled `catalog.yaml` maps every signal to an ordered list of sources (vLLM V1 with
the 0.9-0.11 renames folded in as `new or old`, vLLM V0, SGLang, the DCGM exporter,
kube-state-metrics and the kubelet's prober, and the edge in front of the engines: LiteLLM,
the Gateway API Inference Extension's endpoint picker, the vLLM production-stack router,
Envoy). A user file can add sources of its own, which are tried first. Against a live
server, `resolve` picks per signal and per view (replica, fleet) the first source whose
metrics exist, and reports what is blind and which deprecated names are still in use.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from signals.errors import InputError, InputErrors
from signals.vocabulary import SIGNALS, suggest
from signals.yamldoc import Document, read_yaml

BUNDLED = Path(__file__).resolve().parent / "catalog.yaml"
PLACEHOLDERS = frozenset({"replica", "sel", "window"})
DEFAULT_WINDOW = "5m"
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
Exporter = Literal["engine", "gpu", "kube_pod", "kube_workload", "kube_endpoint", "gateway"]
EXPORTERS: tuple[Exporter, ...] = ("engine", "gpu", "kube_pod", "kube_workload", "kube_endpoint", "gateway")
"""Whose labels a source's series carry: each names a replica (or a workload) its own way."""
NOT_ROUTER = 'server=""'
"""The engines' own series: a router's re-export of their gauges under the same names (the vLLM
production-stack router's `vllm:num_requests_waiting{server=...}`) carries `server`, the
backend's URL, and summed with the engines' would count every request twice."""
_SERVER_MATCHER = re.compile(r"(?:^|,)\s*server\s*(?:=|!=|=~|!~)")


def promql_number(value: float) -> str:
    """A number as PromQL writes it: `0.99`, `1`, `1e-06`, `NaN`, `Inf`, `-Inf`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def shaped_query(data: Mapping[str, object], view: str) -> str:
    """The `replica` or `fleet` query template of a shaped source (as a mapping of its fields)."""
    group = "$replica" if view == "replica" else ""
    if data.get("histogram") is not None:
        by = f"sum by (le, {group})" if group else "sum by (le)"
        buckets = f"{by} ({data['histogram']})"
        quantile, round_to = data["quantile"], data.get("round")
        assert isinstance(quantile, int | float) and isinstance(round_to, int | float | None)
        if round_to is not None:
            buckets = f"round({buckets}, {promql_number(round_to)})"
        return f"histogram_quantile({promql_number(quantile)}, {buckets})"

    def total(expr: object) -> str:
        return f"sum by ({group}) ({expr})" if group else f"sum({expr})"

    if data.get("sum") is not None:
        return total(data["sum"])
    ratio = data["ratio"]
    if not isinstance(ratio, Ratio):
        ratio = Ratio.model_validate(ratio)
    return f"{total(ratio.numerator)} / ({total(ratio.denominator)} > 0)"


class Ratio(BaseModel):
    """A ratio of two sums: `numerator` and `denominator` are what is summed (rates, usually)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    numerator: str = Field(min_length=1)
    denominator: str = Field(min_length=1)


Shape = Literal["histogram", "sum", "ratio"]
View = Literal["replica", "fleet"]


class SourceSpec(BaseModel):
    """One way to compute a signal: the metrics it needs and its per-replica and fleet queries.

    The queries are written out (`replica`, `fleet`), or given by their shape, from which
    both are written (so rules, the audit and `signals check` read the same PromQL) and
    which tells a live fetch how to compute them client-side from fewer queries:

    - `histogram` (the bucket rates, before any sum) with `quantile` (and `round`): the
      quantile per replica and of the merged buckets. Every quantile of one histogram family is then
      computed from ONE query of bucket rates by `le` and replica;
    - `sum`: the sum per replica, and the fleet's sum of those;
    - `ratio`: a ratio of sums per replica and for the fleet (a denominator of 0 gives
      no sample), computed from the two sums per replica.

    `views` says which of the two a shaped source has (both by default).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: str = Field(min_length=1)
    exporter: Exporter = "engine"
    requires: tuple[str, ...] = ()
    requires_any: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    replica: str | None = None
    fleet: str | None = None
    histogram: str | None = None
    quantile: float | None = Field(default=None, ge=0, le=1)
    round_to: float | None = Field(default=None, gt=0, alias="round")
    """A histogram's summed bucket rates rounded to this (PromQL `round`) before the quantile:
    q=1 finds the highest bucket with observations only when its count equals +Inf's, and a
    sum taken in another order (another engine, sharded queriers) leaves it a hair below."""
    sum: str | None = None
    ratio: Ratio | None = None
    views: tuple[View, ...] = ("replica", "fleet")

    @property
    def shape(self) -> Shape | None:
        """Which shape the queries were written from, or None for queries written out."""
        if self.histogram is not None:
            return "histogram"
        if self.sum is not None:
            return "sum"
        if self.ratio is not None:
            return "ratio"
        return None

    @model_validator(mode="before")
    @classmethod
    def _write_shaped(cls, data: object) -> object:
        """A shaped source gets its `replica` and `fleet` queries written from its shape."""
        if not isinstance(data, dict):
            return data
        if "round" in data and data.get("histogram") is None:
            raise ValueError("round is for a histogram source")
        shapes = [k for k in ("histogram", "sum", "ratio") if data.get(k) is not None]
        if not shapes:
            if "views" in data:
                raise ValueError("views is for a source given by its shape (histogram, sum or ratio)")
            return data
        if len(shapes) > 1:
            raise ValueError(f"give one shape, not {' and '.join(shapes)}")
        if data.get("replica") is not None or data.get("fleet") is not None:
            raise ValueError(f"a source given by its shape ({shapes[0]}) has its queries written for it")
        if shapes[0] == "histogram" and not isinstance(data.get("quantile"), int | float):
            raise ValueError("a histogram source needs quantile: a number from 0 to 1")
        if not isinstance(data.get("round"), int | float | None):
            raise ValueError("round is a number: the precision the bucket rates are rounded to")
        if shapes[0] != "histogram" and (data.get("quantile") is not None or data.get("round") is not None):
            raise ValueError("quantile and round are for a histogram source")
        views = data.get("views", ("replica", "fleet"))
        written = {view: shaped_query(data, view) for view in ("replica", "fleet")}
        return {**data, **{view: text for view, text in written.items() if view in views}}

    @model_validator(mode="after")
    def _complete(self) -> SourceSpec:
        if not self.requires and not self.requires_any:
            raise ValueError("a source needs requires or requires_any: the metrics that must exist")
        if self.replica is None and self.fleet is None:
            raise ValueError("a source needs a replica query, a fleet query, or both")
        for name in (*self.requires, *self.requires_any, *self.deprecated):
            if not _NAME.match(name):
                raise ValueError(f"'{name}' is not a metric name")
        for query in (self.replica, self.fleet):
            if query is None:
                continue
            for _, named, braced, invalid in string.Template.pattern.findall(query):
                name = named or braced
                if invalid:
                    raise ValueError("a lone $ in a query: write $$ for a literal dollar (as in $$1)")
                if name and name not in PLACEHOLDERS:
                    raise ValueError(f"unknown placeholder ${name}; use $replica, $sel or $window")
        if self.replica is not None and "$replica" not in self.replica:
            raise ValueError("a replica query must group by $replica")
        return self

    def applies(self, names: set[str]) -> bool:
        if self.requires and not all(n in names for n in self.requires):
            return False
        return not self.requires_any or any(n in names for n in self.requires_any)


class CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int
    signals: dict[str, tuple[SourceSpec, ...]]


@dataclass(frozen=True)
class Catalog:
    """Sources per signal, user sources first."""

    sources: Mapping[str, tuple[SourceSpec, ...]]
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resolution:
    """What one signal resolved to on a server: the chosen sources per view, or blindness."""

    signal: str
    replica: SourceSpec | None
    fleet: SourceSpec | None
    deprecated_in_use: tuple[str, ...] = ()

    @property
    def blind(self) -> bool:
        return self.replica is None and self.fleet is None


@dataclass(frozen=True)
class Scope:
    """One exporter's view of the replicas being diagnosed: its matchers, the label naming a
    replica in its series, and replica names to rewrite (a worker pod to its group's leader)."""

    selector: str
    replica_label: str
    renames: Mapping[str, str] = field(default_factory=dict)
    exporter: str = ""
    """Whose series a query read with this scope (set per query by `signals.live.query_scopes`,
    so its answers can be checked the exporter's way: DCGM's blanks dropped)."""


@dataclass(frozen=True)
class QueryOptions:
    """How templates are filled: the replica label, the user's selector, the rate window.

    `scopes` holds, per exporter, the selector and replica label that scope its series to
    one fleet; an exporter without one uses `selector` and `replica_label`.
    """

    replica_label: str = "instance"
    selector: str = ""
    window: str = DEFAULT_WINDOW
    extra: Mapping[str, str] = field(default_factory=dict)
    scopes: Mapping[str, Scope] = field(default_factory=dict)
    engine: str | None = None
    """The engine of the fleet the scopes name: only its own engine sources are tried (another
    fleet's engine on the same server has the metric names, not this fleet's series)."""

    def scope(self, exporter: str) -> Scope:
        """The exporter's own scope, or the user's selector and replica label.

        The engine's always leaves a router's re-exports out (`server=""`, see NOT_ROUTER),
        scoped to a fleet or not, unless the selector already says something of `server`.
        """
        found = self.scopes.get(exporter) or Scope(self.selector, self.replica_label)
        if exporter == "engine" and not _SERVER_MATCHER.search(found.selector):
            return replace(found, selector=",".join(m for m in (found.selector, NOT_ROUTER) if m))
        return found


def _validate(doc: Document) -> CatalogFile:
    data = doc.data
    if not isinstance(data, dict):
        raise InputErrors([doc.error((), "a catalog is a mapping with schema_version: 1 and signals")])
    if data.get("schema_version") != 1:
        raise InputErrors([doc.error(("schema_version",), "expected schema_version: 1")])
    problems = [
        doc.error(("signals", name), f"unknown signal '{name}'{suggest(str(name))}")
        for name in (data.get("signals") or {})
        if name not in SIGNALS
    ]
    try:
        parsed = CatalogFile.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            path = tuple(err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown key"
            problems.append(doc.error(path, message))
        raise InputErrors(problems) from None
    if problems:
        raise InputErrors(problems)
    return parsed


def load_catalog(extra: Iterable[str] = ()) -> Catalog:
    """The bundled catalog with user files on top (their sources are tried first)."""
    files = [str(BUNDLED), *extra]
    merged: dict[str, tuple[SourceSpec, ...]] = {name: () for name in SIGNALS}
    problems: list[InputError] = []
    for path in files:
        try:
            parsed = _validate(read_yaml(path))
        except InputErrors as exc:
            problems.extend(exc.problems)
            continue
        except InputError as exc:
            problems.append(exc)
            continue
        for name, sources in parsed.signals.items():
            merged[name] = (*sources, *merged[name]) if path != str(BUNDLED) else (*merged[name], *sources)
    if problems:
        raise InputErrors(problems)
    return Catalog(merged, tuple(files))


def normalise_selector(selector: str) -> str:
    """`{namespace="llm"}` or `namespace="llm"` -> `namespace="llm"`; ValueError if unbalanced."""
    text = selector.strip()
    if text.startswith("{"):
        if not text.endswith("}"):
            raise ValueError("a selector in braces must end with }")
        text = text[1:-1].strip()
    if text.count('"') % 2:
        raise ValueError("unbalanced quotes in the selector")
    if "{" in text or "}" in text:
        raise ValueError('a selector holds label matchers only, like {namespace="llm"}')
    return text.rstrip(",")


def render(template: str, options: QueryOptions, exporter: str = "engine") -> str:
    """Fill a query template with the exporter's scope; empty selectors leave no stray commas."""
    scope = options.scope(exporter)
    text = string.Template(template).substitute(
        replica=scope.replica_label, sel=scope.selector, window=options.window
    )
    return text.replace("{,", "{").replace(",}", "}")


def resolve(catalog: Catalog, names: set[str], engine: str | None = None) -> dict[str, Resolution]:
    """Per signal, the first applicable source for each view, and the deprecated names in use.

    With `engine` (a fleet's), engine sources of other engines are passed over.
    """
    out: dict[str, Resolution] = {}
    for signal in SIGNALS:
        applicable = [
            s
            for s in catalog.sources.get(signal, ())
            if s.applies(names) and (engine is None or s.exporter != "engine" or s.source.startswith(engine))
        ]
        replica = next((s for s in applicable if s.replica is not None), None)
        fleet = next((s for s in applicable if s.fleet is not None), None)
        used = {s for s in (replica, fleet) if s is not None}
        deprecated = tuple(sorted({n for s in used for n in s.deprecated if n in names}))
        out[signal] = Resolution(signal, replica, fleet, deprecated)
    return out
