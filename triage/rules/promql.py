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

import json
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
    """A PromQL string literal: Go escapes, so backslashes, quotes and control characters survive."""
    return json.dumps(value, ensure_ascii=False)


def duration_text(delta: timedelta) -> str:
    """A duration as PromQL writes it (`5m`, `1h30m`), negative ones with a sign."""
    if delta < timedelta(0):
        return "-" + str(promql_parser.display_duration(-delta))
    return str(promql_parser.display_duration(delta))


def _modifiers(offset: timedelta | None, at: AtModifier | None) -> str:
    out = f" offset {duration_text(offset)}" if offset else ""
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


def syntax_children(node: object) -> list[Expr]:
    """The node's operands in the order PromQL writes them (an aggregation's parameter first)."""
    if isinstance(node, AggregateExpr):
        return [c for c in (node.param, node.expr) if isinstance(c, Expr)]
    if isinstance(node, BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, ParenExpr | UnaryExpr | SubqueryExpr):
        return [node.expr]
    if isinstance(node, Call):
        return [a for a in node.args if isinstance(a, Expr)]
    if isinstance(node, MatrixSelector):
        return [node.vector_selector]
    return []


def node_text(
    node: object, operands: Sequence[str], *, matchers: Sequence[str] = (), fleet: Sequence[str] = ()
) -> str:
    """One node as PromQL, given its operands' text in `syntax_children` order: the one printer
    of the project (the rules write per-fleet queries with it, the audit shows expanded rules).

    `matchers` are added to a selector's; `fleet` labels to an aggregation's `by` grouping (one
    without any gets `by (<fleet>)`, a `without` keeps them anyway) and to a binary operator's
    `on` matching.
    """
    if isinstance(node, NumberLiteral):
        return promql_number(node.val)
    if isinstance(node, StringLiteral):
        return quote(node.val)
    if isinstance(node, VectorSelector):
        return _selector(node, matchers) + _modifiers(node.offset, node.at)
    if isinstance(node, MatrixSelector):
        inner = node.vector_selector
        return f"{_selector(inner, matchers)}[{duration_text(node.range)}]" + _modifiers(
            inner.offset, inner.at
        )
    if isinstance(node, SubqueryExpr):
        step = duration_text(node.step) if node.step else ""
        range_ = duration_text(node.range) if node.range else ""
        return f"{operands[0]}[{range_}:{step}]" + _modifiers(node.offset, node.at)
    if isinstance(node, ParenExpr):
        return f"({operands[0]})"
    if isinstance(node, UnaryExpr):
        return f"-{operands[0]}"
    if isinstance(node, Call):
        return f"{node.func.name}({', '.join(operands)})"
    if isinstance(node, BinaryExpr):
        return _binary(node, operands, fleet)
    if isinstance(node, AggregateExpr):
        return _aggregate(node, operands, fleet)
    raise PromQLRewriteError(f"cannot print a {type(node).__name__}")


def _print(node: object, rewrite: _Rewrite | None, extra: Sequence[str]) -> str:
    """`node` as PromQL; with `rewrite`, its aggregations grouped (and joined) per fleet."""

    def again(child: object) -> str:
        return _print(child, rewrite, extra)

    join = rewrite.join if rewrite is not None else None
    if join is not None and _to_join(node):
        # parenthesised: a join is an `or` of branches, and an operand of `and` or `*` binds tighter
        return f"({_joined(node, join, extra)})"
    if isinstance(node, VectorSelector | MatrixSelector):
        operands = []
    elif isinstance(node, AggregateExpr) and join is not None and _to_join(node.expr):
        param = [again(node.param)] if node.param is not None else []
        operands = [*param, _joined(node.expr, join, extra)]  # the aggregation's parentheses hold it
    else:
        operands = [again(child) for child in syntax_children(node)]
    return node_text(node, operands, matchers=extra, fleet=rewrite.labels if rewrite is not None else ())


def _binary(node: BinaryExpr, operands: Sequence[str], fleet: Sequence[str]) -> str:
    parts = [operands[0], str(node.op)]
    modifier = node.modifier
    if modifier is not None:
        if modifier.return_bool:
            parts.append("bool")
        if modifier.matching is not None:
            labels = list(modifier.matching.labels)
            if modifier.matching.type == LabelModifierType.Include:
                how = "on"
                labels += [label for label in fleet if label not in labels]
            else:
                how = "ignoring"
            parts.append(f"{how} {_labels(labels)}")
        if modifier.card == VectorMatchCardinality.ManyToOne:
            parts.append(f"group_left {_labels(modifier.group_labels or [])}")
        elif modifier.card == VectorMatchCardinality.OneToMany:
            parts.append(f"group_right {_labels(modifier.group_labels or [])}")
    parts.append(operands[1])
    return " ".join(parts)


def _aggregate(node: AggregateExpr, operands: Sequence[str], fleet: Sequence[str]) -> str:
    modifier = node.modifier
    grouping = ""
    if modifier is not None and modifier.type == AggModifierType.Without:
        grouping = f" without {_labels(modifier.labels)}"
    else:
        labels = list(modifier.labels) if modifier is not None else []
        labels += [label for label in fleet if label not in labels]
        if modifier is not None or labels:
            grouping = f" by {_labels(labels)}"
    inside = ", ".join(operands)
    return f"{node.op}{grouping} ({inside})" if grouping else f"{node.op}({inside})"


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


__all__ = [
    "Join",
    "Printer",
    "PromQLRewriteError",
    "duration_text",
    "node_text",
    "per_fleet",
    "printed",
    "quote",
    "syntax_children",
]
