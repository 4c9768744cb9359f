"""Label text made safe for each sink's format, so an alert's labels are read, never obeyed.

Every value from an alert reaches a template as data, and each format escapes it where
the template writes it (the renderer's `finalize`), so a template cannot forget to:
Slack's control characters become entities, so a label `<!channel>` cannot page a
channel. Control and bidi characters are shown as their escapes everywhere
(`triage.core.escape.printable`, as on the terminal). Only `link(url, text)` produces a
raw Slack link.
"""

from __future__ import annotations

from typing import Any

import jinja2

from triage.core.escape import printable


class SlackLink(str):
    """A link built by `link()`: the only text that reaches Slack unescaped."""


def slack_escape(value: Any) -> str:
    """Slack's control characters as entities, and control characters made visible."""
    text = printable(str(value))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def missing_or(value: Any) -> Any:
    """`n/a` for a missing value (never an empty string that reads as a real value), else None."""
    if value is None:
        return "n/a"
    if isinstance(value, jinja2.Undefined):
        return str(value)
    return None


def slack_finalize(value: Any) -> Any:
    if isinstance(value, SlackLink):
        return value
    missing = missing_or(value)
    return missing if missing is not None else slack_escape(value)


def text_finalize(value: Any) -> Any:
    """Plain text (a PagerDuty or Opsgenie note): control characters made visible."""
    missing = missing_or(value)
    return missing if missing is not None else printable(str(value))


def slack_link(url: Any, text: Any) -> SlackLink:
    safe_url = slack_escape(url).replace("|", "%7C")
    return SlackLink(f"<{safe_url}|{slack_escape(text).replace('|', '¦')}>")
