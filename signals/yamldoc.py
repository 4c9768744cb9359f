"""Safe YAML reading that remembers where every key came from.

Fixtures, playbooks and catalogs are written by people, so every error must name the
file, the line and the key. PyYAML's loaders forget positions once they build Python
objects, so this module composes the node tree (with libyaml when present, for speed
on large fixtures) and builds plain data itself, recording the line of each key and
item. It also guards the two ways a YAML document can hurt the process that reads it:
very deep nesting (libyaml's C loader overflows the C stack and kills the process
before Python can catch anything) and alias bombs (a few bytes that expand into
billions of nodes). Duplicate keys are rejected rather than silently keeping the last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from signals.errors import InputError

MAX_DEPTH = 64
MAX_EXPANDED_NODES = 1_000_000
MAX_BYTES = 512 * 1024 * 1024

_Loader: type[yaml.SafeLoader]
try:
    _Loader = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Document:
    """Plain data read from YAML, with the line (1-based) of every key and item."""

    source: str
    data: Any
    lines: Mapping[Path, int] = field(default_factory=dict)

    def line(self, path: Iterable[str | int]) -> int:
        """Line of the deepest known prefix of `path` (1 when nothing is known)."""
        parts = tuple(path)
        while parts:
            if parts in self.lines:
                return self.lines[parts]
            parts = parts[:-1]
        return self.lines.get((), 1)

    def error(self, path: Iterable[str | int], message: str) -> InputError:
        """An InputError located at `path` in this document."""
        parts = tuple(path)
        return InputError(self.source, self.line(parts), key_name(parts), message)


def key_name(path: Iterable[str | int]) -> str:
    """Render a path the way a person would type it: `causes.kv_pressure.requires[0].kind`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


def _flow(line: str, flow: int) -> tuple[int, int]:
    """The flow bracket depth after `line` and the deepest it reached, from `flow` before it;
    brackets inside quoted scalars and comments do not count."""
    peak = flow
    if "[" not in line and "{" not in line and "]" not in line and "}" not in line:
        return flow, peak  # the common line, read without looking at each character
    quote = ""
    previous = " "
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"" and previous in " [{,:":
            quote = ch
        elif ch == "#" and previous in " \t":
            break
        elif ch in "[{":
            flow += 1
            peak = max(peak, flow)
        elif ch in "]}":
            flow = max(0, flow - 1)
        previous = ch
    return flow, peak


def _estimate_depth(text: str) -> tuple[int, int]:
    """Upper bound of nesting depth without parsing, and the line where it peaks.

    Counts block indentation levels, block-sequence dashes opened on one line and
    flow brackets outside quoted scalars. It may overestimate (a bracket inside a plain
    scalar counts), never underestimate by much, which is what a guard needs.
    """
    indents: list[int] = [-1]
    flow = 0
    worst, worst_line = 0, 1
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(stripped)
        if flow == 0:
            while indents and indent <= indents[-1]:
                indents.pop()
            indents.append(indent)
        dashes = 0
        rest = stripped
        while flow == 0 and (rest.startswith("- ") or rest == "-"):
            dashes += 1
            rest = rest[2:].lstrip(" ")
        flow, peak = _flow(rest, flow)
        depth = len(indents) + dashes + peak
        if depth > worst:
            worst, worst_line = depth, number
    return worst, worst_line


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many nodes the tree holds once every alias is expanded (memoised per node)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a cycle counts once; construction rejects it later
    size = 1
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            size += _expanded_size(item, memo)
            if size > MAX_EXPANDED_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            size += _expanded_size(k, memo) + _expanded_size(v, memo)
            if size > MAX_EXPANDED_NODES:
                break
    memo[key] = size
    return size


class _Builder:
    def __init__(self, source: str, loader: yaml.SafeLoader) -> None:
        self.source = source
        self.loader = loader
        self.lines: dict[Path, int] = {}

    def build(self, node: yaml.Node, path: Path, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise InputError(
                self.source,
                node.start_mark.line + 1,
                key_name(path),
                f"nesting deeper than {MAX_DEPTH} levels",
            )
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.ScalarNode):
            return self.loader.construct_object(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise InputError(
                        self.source,
                        key_node.start_mark.line + 1,
                        key_name(path),
                        "merge keys (<<) are not supported: write the keys out",
                    )
                if not isinstance(key_node, yaml.ScalarNode):
                    raise InputError(
                        self.source,
                        key_node.start_mark.line + 1,
                        key_name(path),
                        "a mapping key must be a plain value",
                    )
                key = self.loader.construct_object(key_node)
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    key = str(key)
                if key in out:
                    raise InputError(
                        self.source,
                        key_node.start_mark.line + 1,
                        key_name((*path, str(key))),
                        "duplicate key",
                    )
                self.lines[(*path, str(key) if not isinstance(key, int) else key)] = (
                    key_node.start_mark.line + 1
                )
                out[key] = self.build(
                    value_node, (*path, key if isinstance(key, (str, int)) else str(key)), depth + 1
                )
            return out
        raise InputError(
            self.source, node.start_mark.line + 1, key_name(path), "unsupported YAML node"
        )  # pragma: no cover


def parse_yaml(text: str, source: str) -> Document:
    """Parse one YAML document from `text`; `source` names it in every error."""
    if len(text) > MAX_BYTES:
        raise InputError(source, 1, "(document)", f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
    depth, depth_line = _estimate_depth(text)
    if depth > MAX_DEPTH:
        raise InputError(
            source, depth_line, "(document)", f"nesting deeper than {MAX_DEPTH} levels; refusing to parse"
        )
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError(source, 1, "(document)", "the document is empty")
        if _expanded_size(node, {}) > MAX_EXPANDED_NODES:
            raise InputError(
                source,
                node.start_mark.line + 1,
                "(document)",
                f"expands to more than {MAX_EXPANDED_NODES:,} nodes (alias bomb?)",
            )
        builder = _Builder(source, loader)
        data = builder.build(node, (), 0)
        return Document(source, data, builder.lines)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise InputError(source, line, "(document)", f"malformed YAML: {message}") from None
    except yaml.YAMLError as exc:
        raise InputError(source, 1, "(document)", f"malformed YAML: {exc}") from None
    except RecursionError:
        raise InputError(source, 1, "(document)", "nesting too deep to read") from None
    finally:
        loader.dispose()


def read_yaml(path: str) -> Document:
    """Read and parse a YAML file; an unreadable file is an InputError too."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise InputError(path, 0, "(file)", "no such file") from None
    except IsADirectoryError:
        raise InputError(path, 0, "(file)", "is a directory, not a YAML file") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, 0, "(file)", f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise InputError(path, 0, "(file)", exc.strerror or str(exc)) from None
    return parse_yaml(text, path)
