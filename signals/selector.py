"""Series selectors as fixtures write them: `name{label="value", ...}`."""

from __future__ import annotations

import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "`": "`"}


def parse_selector(text: str) -> tuple[str, dict[str, str]]:
    """Metric name and labels of `name{a="1",b='2'}` (or `{__name__="name",...}`); ValueError if malformed."""
    text = text.strip()
    pos = 0
    name = ""
    match = _NAME.match(text, pos)
    if match:
        name = match.group(0)
        pos = match.end()
    labels: dict[str, str] = {}
    if pos < len(text):
        if text[pos] != "{":
            raise ValueError(f"unexpected '{text[pos]}' at column {pos + 1}")
        pos += 1
        while True:
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos < len(text) and text[pos] == "}":
                pos += 1
                break
            label = _LABEL.match(text, pos)
            if not label:
                raise ValueError(f"expected a label name at column {pos + 1}")
            key = label.group(0)
            pos = label.end()
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if not text.startswith("=", pos) or text.startswith("=~", pos):
                raise ValueError(f"label {key}: only = matchers describe a series (column {pos + 1})")
            pos += 1
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text) or text[pos] not in "\"'`":
                raise ValueError(f"label {key}: expected a quoted value at column {pos + 1}")
            quote = text[pos]
            pos += 1
            value = []
            while True:
                if pos >= len(text):
                    raise ValueError(f"label {key}: unterminated value")
                ch = text[pos]
                if ch == "\\" and quote != "`" and pos + 1 < len(text):
                    value.append(_ESCAPES.get(text[pos + 1], text[pos + 1]))
                    pos += 2
                    continue
                if ch == quote:
                    pos += 1
                    break
                value.append(ch)
                pos += 1
            if key in labels:
                raise ValueError(f"label {key} given twice")
            labels[key] = "".join(value)
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == "}":
                pos += 1
                break
            raise ValueError(f"expected ',' or '}}' at column {pos + 1}")
        if pos != len(text):
            raise ValueError(f"unexpected text after '}}' at column {pos + 1}")
    if "__name__" in labels:
        if name and labels["__name__"] != name:
            raise ValueError("metric name given twice, differently")
        name = labels.pop("__name__")
    if not name:
        raise ValueError("a series needs a metric name")
    return name, labels
