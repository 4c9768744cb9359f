"""PromQL, parsed: what an expression reads, with recording rules expanded into it.

The audit judges alert rules by what they read (a P99 or a mean, of which latency), so
it reads them with a real PromQL parser (PyPI `promql-parser`, a binding of the Rust
parser that follows Prometheus 2.45) rather than a scanner: a metric-like word inside
a string, a comment, `NaN`, a `{__name__="..."}` matcher, a subquery or an `on(...)`
clause are each what the grammar says they are. This module is the audit's seam:
nothing else in the audit imports `promql_parser`, and its errors become `PromQLError`
here. It prints with the rules' printer (`triage.rules.promql.node_text`), the project's one
PromQL printer, adding only the expansion of recorded names.

Recording rules are expanded by walking: a selector that names a recorded series
stands for the expressions that record it (every one, when several rules record the
same name), recursively, up to `MAX_DEPTH` levels and never through a name already
being expanded. The walk itself visits both the recorded name and what it reads.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import promql_parser
from promql_parser import (
    AggregateExpr,
    BinaryExpr,
    Call,
    Expr,
    MatchOp,
    MatrixSelector,
    NumberLiteral,
    ParenExpr,
    VectorSelector,
)

from triage.rules.promql import duration_text, node_text, syntax_children

MAX_DEPTH: Final = 8
"""How many recording rules deep an alert is expanded (a chain longer than this is cut)."""
MAX_NESTING: Final = 128
"""Brackets deeper than this are not handed to the parser (see `_refusal`)."""
MAX_OPERATORS: Final = 1024
"""Nor are more operators than this (the bundled rules' widest, `error_ratio` as the or of every
stack's source, holds about 550)."""

Recordings = Mapping[str, Sequence[Expr]]
"""Recorded name -> the parsed expressions of every rule that records it, in rule order."""


class PromQLError(ValueError):
    """An expression that cannot be read: `message` is the parser's own words, or why it was not asked."""

    def __init__(self, expr: str, message: str) -> None:
        super().__init__(message)
        self.expr = expr
        self.message = message


@functools.lru_cache(maxsize=2048)
def parse(expr: str) -> Expr:
    """The syntax tree of `expr` (cached: rules and catalog templates are parsed again and again).

    Raises PromQLError with the parser's message. The trees are shared: never modify one.
    """
    refusal = _refusal(expr)
    if refusal is not None:
        raise PromQLError(expr, refusal)
    try:
        return promql_parser.parse(expr)
    except ValueError as exc:
        raise PromQLError(expr, str(exc)) from None


_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`|#[^\n]*')
_OPERATOR = re.compile(r"[-+*/%^<>=!]+|\b(?:and|or|unless|atan2)\b")


def _refusal(expr: str) -> str | None:
    """Why `expr` is not handed to the parser, or None.

    The Rust parser recurses on the native stack: some thousands of nested parentheses
    or chained operators crash the process (SIGSEGV), which no exception can catch.
    Real rules stay far below these bounds (kube-prometheus: 14 levels, 13 operators).
    """
    code = _STRING_OR_COMMENT.sub(" ", expr)
    depth = deepest = 0
    for char in code:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        return f"nested {deepest} levels deep, more than the {MAX_NESTING} the audit parses"
    operators = len(_OPERATOR.findall(code))
    if operators > MAX_OPERATORS:
        return f"{operators} operators, more than the {MAX_OPERATORS} the audit parses"
    return None


def parse_recordings(texts: Mapping[str, str]) -> dict[str, tuple[Expr, ...]]:
    """`Recordings` from name -> expression text; a text that does not parse is left out."""
    out: dict[str, tuple[Expr, ...]] = {}
    for name, text in texts.items():
        try:
            out[name] = (parse(text),)
        except PromQLError:
            continue
    return out


def selector_names(node: Expr) -> tuple[str, ...]:
    """The metric names a selector reads: its name, or `__name__="..."` matchers (also in `or` groups)."""
    if isinstance(node, MatrixSelector):
        node = node.vector_selector
    if not isinstance(node, VectorSelector):
        return ()
    names = [node.name] if node.name else []
    for group in (node.matchers.matchers, *node.matchers.or_matchers):
        names.extend(m.value for m in group if m.name == "__name__" and m.op == MatchOp.Equal)
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Node:
    """A node of an expression, with how deep in recording rules it sits and which names led there."""

    expr: Expr
    depth: int = 0
    seen: frozenset[str] = frozenset()


def expansions(node: Node, recordings: Recordings) -> list[tuple[str, Sequence[Expr]]]:
    """(recorded name, its expressions) for each recorded name this selector node stands for."""
    if node.depth >= MAX_DEPTH or not isinstance(node.expr, VectorSelector | MatrixSelector):
        return []
    return [
        (name, recordings[name])
        for name in selector_names(node.expr)
        if name in recordings and name not in node.seen
    ]


def children(node: Node, recordings: Recordings) -> list[Node]:
    """The node's operands; for a recorded name, the expressions that record it, one level deeper."""
    expanded = expansions(node, recordings)
    if expanded:
        return [Node(expr, node.depth + 1, node.seen | {name}) for name, exprs in expanded for expr in exprs]
    return [Node(c, node.depth, node.seen) for c in syntax_children(node.expr)]


def walk(node: Node, recordings: Recordings) -> Iterator[Node]:
    """Every node under `node` (itself first), depth first, recording rules expanded."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current, recordings)))


def names_read(node: Node, recordings: Recordings) -> frozenset[str]:
    """Every metric or recorded name read under `node`, recorded names and what they record alike."""
    return frozenset(name for n in walk(node, recordings) for name in selector_names(n.expr))


_QUANTILE_CALLS: Final = ("histogram_quantile", "quantile_over_time")


def _number(expr: Expr | None) -> float | None:
    while isinstance(expr, ParenExpr):
        expr = expr.expr
    return expr.val if isinstance(expr, NumberLiteral) else None


def takes_quantile(expr: Expr) -> bool:
    """Whether the node takes a quantile: `histogram_quantile`, `quantile_over_time` or `quantile`."""
    return (isinstance(expr, Call) and expr.func.name in _QUANTILE_CALLS) or (
        isinstance(expr, AggregateExpr) and str(expr.op) == "quantile"
    )


def quantile_taken(expr: Expr) -> float | None:
    """The quantile such a node takes, when it is written as a number (not computed)."""
    if isinstance(expr, Call) and expr.func.name in _QUANTILE_CALLS and expr.args:
        return _number(expr.args[0])
    if isinstance(expr, AggregateExpr) and str(expr.op) == "quantile":
        return _number(expr.param)
    return None


def averaging(expr: Expr) -> str | None:
    """`avg` or `avg_over_time` when the node averages what it reads, else None."""
    if isinstance(expr, AggregateExpr) and str(expr.op) == "avg":
        return "avg"
    if isinstance(expr, Call) and expr.func.name == "avg_over_time":
        return "avg_over_time"
    return None


def division(node: Node, recordings: Recordings) -> tuple[Node, Node] | None:
    """The dividend and divisor of a `/` node, else None."""
    expr = node.expr
    if isinstance(expr, BinaryExpr) and str(expr.op) == "/":
        lhs, rhs = children(node, recordings)
        return lhs, rhs
    return None


def metric_names_in(expr: str) -> frozenset[str]:
    """Every metric (or recorded series) name a PromQL expression reads; PromQLError if it does not parse."""
    return names_read(Node(parse(expr)), {})


def expand(query: str, recordings: Mapping[str, str]) -> str:
    """The query with every recorded name replaced by its defining expression, recursively.

    Cycles and depth are bounded as in `walk`. Matchers, offsets and `@` on a recorded
    name are dropped (only what is read matters); a range over it becomes a subquery.
    """
    return render(Node(parse(query)), parse_recordings(recordings))


def render(node: Node, recordings: Recordings) -> str:
    """PromQL text of `node` with recorded names expanded: what `AlertFacts.expanded` shows.

    Built bottom-up with an explicit stack, so that a long chain of operators expanded
    through several recording rules cannot exhaust Python's recursion limit.
    """
    frames: list[tuple[Node, list[Node], list[str]]] = [(node, children(node, recordings), [])]
    while True:
        current, kids, texts = frames[-1]
        if len(texts) < len(kids):
            child = kids[len(texts)]
            frames.append((child, children(child, recordings), []))
            continue
        frames.pop()
        text = _text(current, texts, bool(expansions(current, recordings)))
        if not frames:
            return text
        frames[-1][2].append(text)


def _text(node: Node, sub: list[str], expanded: bool) -> str:
    """One node as PromQL, given its operands' text (for a recorded name: the expressions recording
    it); everything but the expansion is the rules' printer (`triage.rules.promql.node_text`)."""
    expr = node.expr
    if not expanded:
        return node_text(expr, sub)
    text = "(" + " or ".join(f"({s})" for s in sub) + ")" if len(sub) > 1 else f"({sub[0]})"
    return f"{text}[{duration_text(expr.range)}:]" if isinstance(expr, MatrixSelector) else text


__all__ = [
    "MAX_DEPTH",
    "MAX_NESTING",
    "MAX_OPERATORS",
    "Expr",
    "Node",
    "PromQLError",
    "Recordings",
    "averaging",
    "children",
    "division",
    "expand",
    "metric_names_in",
    "names_read",
    "parse",
    "parse_recordings",
    "quantile_taken",
    "render",
    "selector_names",
    "takes_quantile",
    "walk",
]
