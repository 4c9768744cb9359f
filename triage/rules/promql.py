"""A catalog query printed back per fleet: the rules' seam to the PromQL parser.

The catalog's queries aggregate as `sum by (le)`, `sum(...)` or `avg(max by ($replica)
(...))`: written for one fleet, they would add every fleet of a Prometheus together. To
record them per fleet, each query is parsed (PyPI `promql-parser`, as the audit reads
rules) and printed back with the fleet labels added to every `by` grouping (an
aggregation without one gets `by (<fleet labels>)`; a `without` keeps them anyway). A
query over series that do not carry the fleet labels themselves (DCGM's, kube-state-
metrics') also gets a join: each largest part of the query that aggregates nothing but
reads series (the argument of an innermost aggregation, or raw series compared with an
aggregation beside them, as DCGM's inferred throttle compares a GPU's clock with its
peers' median), the place where raw series are still whole, is handed to `Join`, which
returns it joined to the fleets. A binary operator's `on (...)` matching then gets the
fleet labels too: both its sides carry them, and a match across fleets is no match.

The printer is this module's own rather than the parser's: it re-escapes string values
(the parser's own printer writes a backslash of a regex matcher back unescaped, which no
longer parses), and it is where the rewriting happens. Its output is parsed again before
it is returned, so a query this module cannot print faithfully fails here and never
reaches a rule file. Nothing else in the rules imports `promql_parser`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import promql_parser
from promql_parser import (
    AggModifierType,
    AggregateExpr,
    AtModifier,
    AtModifierType,
    BinaryExpr,
    Call,
    Expr,
    LabelModifierType,
    MatchOp,
    MatrixSelector,
    NumberLiteral,
    ParenExpr,
    StringLiteral,
    SubqueryExpr,
    UnaryExpr,
    VectorMatchCardinality,
    VectorSelector,
)

from signals.catalog import promql_number

Printer = Callable[[Sequence[str]], str]
"""Prints an expression, with extra label matchers (`pod=""`) added to every selector in it."""
Join = Callable[[Printer], str]
"""An aggregation's argument (as a Printer) -> the same series joined to their fleet's labels."""

_OPS = ((MatchOp.Equal, "="), (MatchOp.NotEqual, "!="), (MatchOp.Re, "=~"), (MatchOp.NotRe, "!~"))
"""Match operators as PromQL writes them (a sequence: the parser's enums are not hashable)."""


class PromQLRewriteError(ValueError):
    """A query that cannot be parsed, or that this printer could not print back faithfully."""


@dataclass(frozen=True)
class _Rewrite:
    labels: tuple[str, ...]
    join: Join | None


def quote(value: str) -> str:
    """A PromQL string literal: backslashes, quotes and newlines escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _duration(delta: timedelta) -> str:
    if delta < timedelta(0):
        return "-" + str(promql_parser.display_duration(-delta))
    return str(promql_parser.display_duration(delta))


def _modifiers(offset: timedelta | None, at: AtModifier | None) -> str:
    out = f" offset {_duration(offset)}" if offset else ""
    if at is not None:
        if at.type == AtModifierType.Start:
            out += " @ start()"
        elif at.type == AtModifierType.End:
            out += " @ end()"
        elif at.at is not None:
            out += f" @ {promql_number(at.at.timestamp())}"
    return out


def _op(op: MatchOp) -> str:
    return next(text for known, text in _OPS if known == op)


def _selector(node: VectorSelector, extra: Sequence[str]) -> str:
    groups = [node.matchers.matchers, *node.matchers.or_matchers]
    printed = [[f"{m.name}{_op(m.op)}{quote(m.value)}" for m in group] for group in groups]
    if extra:
        printed = [[*group, *extra] for group in printed]
    body = " or ".join(",".join(group) for group in printed if group)
    name = node.name or ""
    return f"{name}{{{body}}}" if body or not name else name


def _labels(names: Sequence[str]) -> str:
    return "(" + ", ".join(names) + ")"


def _contains(node: object, kinds: type | tuple[type, ...]) -> bool:
    if isinstance(node, kinds):
        return True
    if isinstance(node, BinaryExpr):
        return _contains(node.lhs, kinds) or _contains(node.rhs, kinds)
    if isinstance(node, ParenExpr | UnaryExpr | SubqueryExpr):
        return _contains(node.expr, kinds)
    if isinstance(node, Call):
        return any(_contains(a, kinds) for a in node.args)
    if isinstance(node, AggregateExpr):
        return _contains(node.expr, kinds) or (node.param is not None and _contains(node.param, kinds))
    return False


def contains_aggregation(node: object) -> bool:
    return _contains(node, AggregateExpr)


def _to_join(node: object) -> bool:
    """Whether `node` is where the fleet join goes: it reads series and aggregates none (its
    parent, if any, does; the printer reaches the largest such part first)."""
    return _contains(node, (VectorSelector, MatrixSelector)) and not contains_aggregation(node)


def _print(node: object, rewrite: _Rewrite | None, extra: Sequence[str]) -> str:
    """`node` as PromQL; with `rewrite`, its aggregations grouped (and joined) per fleet."""

    def again(child: object, more: Sequence[str] = ()) -> str:
        return _print(child, rewrite, [*extra, *more])

    if rewrite is not None and rewrite.join is not None and _to_join(node):
        # parenthesised: a join is an `or` of branches, and an operand of `and` or `*` binds tighter
        return f"({_joined(node, rewrite.join, extra)})"
    if isinstance(node, NumberLiteral):
        return promql_number(node.val)
    if isinstance(node, StringLiteral):
        return quote(node.val)
    if isinstance(node, VectorSelector):
        return _selector(node, extra) + _modifiers(node.offset, node.at)
    if isinstance(node, MatrixSelector):
        inner = node.vector_selector
        return f"{_selector(inner, extra)}[{_duration(node.range)}]" + _modifiers(inner.offset, inner.at)
    if isinstance(node, SubqueryExpr):
        step = _duration(node.step) if node.step else ""
        return f"{again(node.expr)}[{_duration(node.range) if node.range else ''}:{step}]" + _modifiers(
            node.offset, node.at
        )
    if isinstance(node, ParenExpr):
        return f"({again(node.expr)})"
    if isinstance(node, UnaryExpr):
        return f"-{again(node.expr)}"
    if isinstance(node, Call):
        return f"{node.func.name}({', '.join(again(a) for a in node.args)})"
    if isinstance(node, BinaryExpr):
        return _binary(node, rewrite, again)
    if isinstance(node, AggregateExpr):
        return _aggregate(node, rewrite, extra, again)
    raise PromQLRewriteError(f"cannot print a {type(node).__name__}")


def _binary(node: BinaryExpr, rewrite: _Rewrite | None, again: Callable[[object], str]) -> str:
    parts = [again(node.lhs), str(node.op)]
    modifier = node.modifier
    if modifier is not None:
        if modifier.return_bool:
            parts.append("bool")
        if modifier.matching is not None:
            labels = list(modifier.matching.labels)
            if modifier.matching.type == LabelModifierType.Include:
                how = "on"
                if rewrite is not None:
                    labels += [label for label in rewrite.labels if label not in labels]
            else:
                how = "ignoring"
            parts.append(f"{how} {_labels(labels)}")
        if modifier.card == VectorMatchCardinality.ManyToOne:
            parts.append(f"group_left {_labels(modifier.group_labels or [])}")
        elif modifier.card == VectorMatchCardinality.OneToMany:
            parts.append(f"group_right {_labels(modifier.group_labels or [])}")
    parts.append(again(node.rhs))
    return " ".join(parts)


def _aggregate(
    node: AggregateExpr, rewrite: _Rewrite | None, extra: Sequence[str], again: Callable[[object], str]
) -> str:
    modifier = node.modifier
    grouping = ""
    if modifier is not None and modifier.type == AggModifierType.Without:
        grouping = f" without {_labels(modifier.labels)}"
    else:
        labels = list(modifier.labels) if modifier is not None else []
        if rewrite is not None:
            labels += [label for label in rewrite.labels if label not in labels]
        if modifier is not None or labels:
            grouping = f" by {_labels(labels)}"
    if rewrite is not None and rewrite.join is not None and _to_join(node.expr):
        argument = _joined(node.expr, rewrite.join, extra)  # the aggregation's own parentheses hold it
    else:
        argument = again(node.expr)
    param = f"{again(node.param)}, " if node.param is not None else ""
    return f"{node.op}{grouping} ({param}{argument})" if grouping else f"{node.op}({param}{argument})"


def _joined(node: object, join: Join, extra: Sequence[str]) -> str:
    """`node`, which aggregates nothing, joined to the fleets (and printed as it is inside the join)."""

    def printer(more: Sequence[str]) -> str:
        return _print(node, None, [*extra, *more])

    return join(printer)


def parse(query: str) -> Expr:
    try:
        return promql_parser.parse(query)
    except ValueError as exc:
        raise PromQLRewriteError(f"does not parse as PromQL: {exc}") from None


def per_fleet(query: str, labels: Sequence[str], join: Join | None = None) -> str:
    """`query` with `labels` in every `by` grouping and `on` matching, and each largest part that
    reads series but aggregates none (the whole query, when nothing aggregates) passed through `join`."""
    tree, rewrite = parse(query), _Rewrite(tuple(labels), join)
    out = _joined(tree, join, ()) if join is not None and _to_join(tree) else _print(tree, rewrite, ())
    try:
        promql_parser.parse(out)
    except ValueError as exc:  # pragma: no cover - a printer bug, caught by the tests
        raise PromQLRewriteError(f"printed back as `{out}`, which does not parse: {exc}") from None
    return out


def printed(query: str) -> str:
    """`query` as this printer writes it (for tests: the printer round-trips)."""
    return _print(parse(query), None, ())


__all__ = ["Join", "Printer", "PromQLRewriteError", "per_fleet", "printed", "quote"]
