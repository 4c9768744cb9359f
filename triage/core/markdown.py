"""The Markdown of a Diagnosis for tickets, and the jinja2 environment every Markdown product uses.

Kept apart from the text and JSON renderings so that jinja2 loads only when Markdown is
asked for. The template has autoescaping off (Markdown is not HTML) and table cells are
escaped by one filter.
"""

from __future__ import annotations

import jinja2

from triage.core.escape import escape_md
from triage.core.model import Diagnosis
from triage.core.render import fmt
from triage.core.sections import sections


def markdown_environment(package: str) -> jinja2.Environment:
    """The jinja2 environment for a room's bundled Markdown templates (`<package>/templates`).

    No autoescape (Markdown is not HTML); free text is escaped by the one `e_md` filter,
    so the diagnosis, the audit and any other Markdown product escape alike.
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=False,
    )
    env.filters["e_md"] = escape_md
    return env


_ENV = markdown_environment("triage.core")


def markdown_template(name: str) -> jinja2.Template:
    """A bundled Markdown template of the core (table cells escaped by the `e_md` filter)."""
    return _ENV.get_template(name)


def to_markdown(diagnosis: Diagnosis) -> str:
    template = markdown_template("diagnosis.md.j2")
    return template.render(s=sections(diagnosis), fmt=fmt)
