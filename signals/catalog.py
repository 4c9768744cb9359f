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
Exporter = Literal["engine", "gpu", "kube_pod", "kube_workload", "kube_endpoint", "gateway", "orchestrator"]
EXPORTERS: tuple[Exporter, ...] = (
    "engine",
    "gpu",
    "kube_pod",
    "kube_workload",
    "kube_endpoint",
    "gateway",
    "orchestrator",
)
"""Whose labels a source's series carry: each names a replica (or a workload) its own way.
`orchestrator` is the layer a serving stack puts in front of or around its engines (Dynamo's
frontend and planner, Ray Serve's proxy and replicas): scoped to a fleet, its series are read
with that fleet's own orchestrator labels, and a fleet the orchestrator does not run never
reads them."""
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


def sum_template(expr: object, replica: bool, le: bool = False) -> str:
    """`expr` summed by `le` (a histogram's buckets) and `$replica` where asked, else whole."""
    labels = [*(["le"] if le else []), *(["$replica"] if replica else [])]
    return f"sum by ({', '.join(labels)}) ({expr})" if labels else f"sum({expr})"


def shaped_query(data: Mapping[str, object], view: str) -> str:
    """The `replica` or `fleet` query template of a shaped source (as a mapping of its fields)."""
    replica = view == "replica"
    if data.get("histogram") is not None:
        buckets = sum_template(data["histogram"], replica, le=True)
        quantile, round_to = data["quantile"], data.get("round")
        assert isinstance(quantile, int | float) and isinstance(round_to, int | float | None)
        if round_to is not None:
            buckets = f"round({buckets}, {promql_number(round_to)})"
        return f"histogram_quantile({promql_number(quantile)}, {buckets})"

    if data.get("sum") is not None:
        return sum_template(data["sum"], replica)
    ratio = data["ratio"]
    if not isinstance(ratio, Ratio):
        ratio = Ratio.model_validate(ratio)
    return f"{sum_template(ratio.numerator, replica)} / ({sum_template(ratio.denominator, replica)} > 0)"


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
    stands_in: str | None = Field(default=None, min_length=1)
    """What the source really measures where it is not the signal itself (a stack that exports a
    mean where the signal is a P99, a throttle inferred from the SM clock): the diagnosis shows it
    beside every piece of evidence read from it, so a stand-in is never taken for the real thing."""

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


class Variant(BaseModel):
    """Another spelling of a source's metric names: every source named `of` (or `of_...`) gets a
    twin named `source` (or `source_...`) whose metric names are rewritten prefix by prefix
    (`rename`). Ray's stat logger re-exports vLLM's metrics as `ray_vllm_*`: one line here
    instead of a copy of every source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    of: str = Field(min_length=1)
    rename: dict[str, str] = Field(min_length=1)


class CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int
    signals: dict[str, tuple[SourceSpec, ...]]
    variants: tuple[Variant, ...] = ()


_NOT_RENAMED = frozenset({"source", "exporter", "stands_in", "views", "quantile", "round"})


def _renamed(text: str, rename: Mapping[str, str]) -> str:
    """`text` with every metric name starting with a key of `rename` given that prefix's value."""
    for old, new in rename.items():
        text = re.sub(r"(?<![A-Za-z0-9_:])" + re.escape(old), new.replace("\\", "\\\\"), text)
    return text


def variant_of(spec: SourceSpec, variant: Variant) -> SourceSpec:
    """`spec` under the variant's metric names (its shape, or its written queries, rewritten)."""
    data = spec.model_dump(by_alias=True, exclude_none=True)
    if spec.shape is not None:
        data.pop("replica", None)
        data.pop("fleet", None)
    else:
        data.pop("views", None)

    def walk(value: object, key: str = "") -> object:
        if key in _NOT_RENAMED:
            return value
        if isinstance(value, str):
            return _renamed(value, variant.rename)
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        return value

    renamed = walk(data)
    assert isinstance(renamed, dict)
    return SourceSpec.model_validate({**renamed, "source": variant.source + spec.source[len(variant.of) :]})


def _varies(spec: SourceSpec, variant: Variant) -> bool:
    return spec.source == variant.of or spec.source.startswith(variant.of + "_")


def _with_variants(
    sources: Mapping[str, tuple[SourceSpec, ...]], variants: Iterable[Variant]
) -> dict[str, tuple[SourceSpec, ...]]:
    """Each variant's twin placed right after every source it is a variant of."""
    chosen = list(variants)
    out: dict[str, tuple[SourceSpec, ...]] = {}
    for signal, specs in sources.items():
        listed: list[SourceSpec] = []
        for spec in specs:
            listed.append(spec)
            listed += [variant_of(spec, v) for v in chosen if _varies(spec, v)]
        out[signal] = tuple(listed)
    return out


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
    orchestrator: str | None = None
    """The orchestrator of that fleet (`dynamo`, `ray_serve`), whose own sources it reads; a fleet
    scoped without one reads no orchestrator source."""

    def sees(self, exporter: str) -> bool:
        """Whether this exporter's series can be read at all: always unscoped; scoped to a fleet,
        only where the fleet has a scope for it (or it is the gateway, which keeps the user's
        selector). A fleet whose pods kube-state-metrics never saw is blind there, never read
        as the whole server."""
        return not self.scopes or exporter in self.scopes or exporter == "gateway"

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
    variants: list[Variant] = []
    for path in files:
        try:
            parsed = _validate(read_yaml(path))
        except InputErrors as exc:
            problems.extend(exc.problems)
            continue
        except InputError as exc:
            problems.append(exc)
            continue
        variants += parsed.variants
        for name, sources in parsed.signals.items():
            merged[name] = (*sources, *merged[name]) if path != str(BUNDLED) else (*merged[name], *sources)
    if problems:
        raise InputErrors(problems)
    return Catalog(_with_variants(merged, variants), tuple(files))


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


def _fleet_reads(spec: SourceSpec, engine: str | None, orchestrator: str | None) -> bool:
    """Whether a fleet of `engine` run by `orchestrator` reads `spec` (no fleet: every source)."""
    if engine is None:
        return True
    if spec.exporter == "engine":
        return spec.source.startswith(engine)
    if spec.exporter == "orchestrator":
        return orchestrator is not None and spec.source.startswith(orchestrator)
    return True


def resolve(
    catalog: Catalog,
    names: set[str],
    engine: str | None = None,
    orchestrator: str | None = None,
    options: QueryOptions | None = None,
    engine_names: set[str] | None = None,
) -> dict[str, Resolution]:
    """Per signal, the first applicable source for each view, and the deprecated names in use.

    With `engine` (a fleet's), engine sources of other engines are passed over, and so are the
    orchestrator sources of any orchestrator but the fleet's own; with `options` scoped to a
    fleet, so are the sources of exporters that see nothing of it (`QueryOptions.sees`). With
    `engine_names` (the names the fleet's own engine series carry), an engine source applies
    only when the fleet itself exports its metrics: a vLLM 0.33 fleet beside an older one
    gives the older one none of its new sources.
    """
    out: dict[str, Resolution] = {}
    for signal in SIGNALS:
        applicable = [
            s
            for s in catalog.sources.get(signal, ())
            if s.applies(engine_names if engine_names is not None and s.exporter == "engine" else names)
            and _fleet_reads(s, engine, orchestrator)
            and (options is None or options.sees(s.exporter))
        ]
        replica = next((s for s in applicable if s.replica is not None), None)
        fleet = next((s for s in applicable if s.fleet is not None), None)
        used = {s for s in (replica, fleet) if s is not None}
        deprecated = tuple(
            sorted(
                {
                    n
                    for s in used
                    for n in s.deprecated
                    if n in (engine_names if engine_names is not None and s.exporter == "engine" else names)
                }
            )
        )
        out[signal] = Resolution(signal, replica, fleet, deprecated)
    return out
