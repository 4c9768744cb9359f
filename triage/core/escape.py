"""Text from outside, made safe for where it is shown.

Replica names, label values, notes built from them and servers' error messages come
from systems this tool does not control. Every rendering of a diagnosis takes them
from `triage.core.sections`, which passes each through `printable` once, so the
terminal text, the Markdown, the TUI and the service's messages are safe alike.
"""

from __future__ import annotations

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
