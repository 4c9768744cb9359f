"""Text from outside, made safe for where it is shown: a terminal, or Markdown.

Replica names, label values, notes built from them and servers' error messages come
from systems this tool does not control. Every rendering of a diagnosis takes them
from `triage.core.sections`, which passes each through `printable` once, so the
terminal text, the Markdown, the TUI and the service's messages are safe alike.
Markdown (the diagnosis for tickets, the postmortem report, the scorecard, the
audit) escapes its free text with `escape_md`, the one `e_md` filter of every template.
"""

from __future__ import annotations

import re

_UNSAFE = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x0A}
_UNSAFE.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F)})


def printable(text: str) -> str:
    """Text from outside (labels, server messages) as it may reach a terminal: controls escaped.

    An ESC in a label would otherwise reach the terminal as a command (clear the screen,
    move the cursor) and a bidi override would reorder what follows it; both are shown
    as their escapes instead, e.g. `\\x1b[2J`. Line breaks are kept for messages that
    span lines.
    """
    return text.translate(_UNSAFE)


_MD_SPECIAL = re.compile(r"([\\`*\[\]|#!~])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_BLOCK = re.compile(r"^([-+=])|^(\d{1,9})([.)])(?=\s|$)")
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape_md(value: object) -> str:
    """Text safe in a Markdown table cell, list item or paragraph: one line, no markup, no HTML.

    Whitespace runs (line breaks included) fold into one space, so a value cannot end
    a table row or start a block; other control and bidi characters are shown as their
    escapes (`printable`). `&`, `<` and `>` become entities, so no raw HTML, autolink or
    entity gets through; every character Markdown reads as markup (backslash, backtick,
    `*`, brackets, `|`, `#`, `!`, `~`) is backslash-escaped, and so is a leading list,
    heading-underline or numbered-list marker. Underscores inside words are left alone
    (GFM does not emphasise them), so ids such as kv_pressure stay readable in the source.
    """
    text = printable(" ".join(str(value).split())).translate(_HTML)
    text = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text)
    return _MD_BLOCK.sub(lambda m: "\\" + m.group(0) if m.group(1) else f"{m.group(2)}\\{m.group(3)}", text)
