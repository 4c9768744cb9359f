"""PromQL read by the audit: the metric names an expression reads, and recording-rule expansion.

PromQL is scanned, not parsed: names, function calls and their parenthesised arguments
are all the checks need.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_NAME_MATCHER = re.compile(r"__name__\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS: Final = frozenset(
    {
        "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
        "offset", "bool", "inf", "nan", "start", "end", "atan2",
    }
)  # fmt: skip


def clean(expr: str) -> tuple[str, list[str]]:
    """The expression without strings, matchers, ranges and grouping clauses; and `__name__` matches.

    What is left holds metric names, function names, operators, numbers and parentheses:
    enough to find what is read and which function wraps it.
    """
    named = [m.group(1)[1:-1] for m in _NAME_MATCHER.finditer(expr)]
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    return text, named


def metric_names_in(expr: str) -> frozenset[str]:
    """Every metric (or recorded series) name a PromQL expression reads."""
    text, named = clean(expr)
    out = set(named)
    for match in _IDENT.finditer(text):
        name = match.group(0)
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or name in _KEYWORDS:
            continue
        out.add(name)
    return frozenset(out)


def calls(text: str, functions: Iterable[str]) -> list[tuple[str, str, str]]:
    """(function, first argument, whole argument text) for each call of `functions` in cleaned text."""
    out: list[tuple[str, str, str]] = []
    pattern = re.compile(r"(?<![A-Za-z0-9_:])(" + "|".join(map(re.escape, functions)) + r")\s*\(")
    for match in pattern.finditer(text):
        start = match.end()
        depth, i, comma = 1, start, -1
        while i < len(text) and depth:
            ch = text[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1 and comma < 0:
                comma = i
            i += 1
        inner = text[start : i - 1]
        first = text[start:comma].strip() if comma >= 0 else inner.strip()
        out.append((match.group(1), first, inner))
    return out


_MAX_DEPTH = 8


def _constant(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement for `re.sub` that inserts `text` literally (PromQL may hold backslashes)."""
    return lambda _match: text


def expand(
    query: str, recordings: Mapping[str, str], depth: int = 0, seen: frozenset[str] = frozenset()
) -> str:
    """The query with every recorded name replaced by its defining expression, recursively.

    A name recorded by several rules becomes their `or`; cycles and depth are bounded. A
    matcher on the recorded name (`x{model="a"}`) is dropped: only what is read matters.
    """
    if depth >= _MAX_DEPTH:
        return query
    used = [n for n in metric_names_in(query) if n in recordings and n not in seen]
    for name in sorted(used, key=len, reverse=True):
        inner = expand(recordings[name], recordings, depth + 1, seen | {name})
        pattern = re.compile(r"(?<![A-Za-z0-9_:])" + re.escape(name) + r"(?![A-Za-z0-9_:])(?:\s*\{[^{}]*\})?")
        query = pattern.sub(_constant(f"({inner})"), query)
    return query


__all__ = ["calls", "clean", "expand", "metric_names_in"]
