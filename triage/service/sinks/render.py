"""Sink bodies and the annotation page, from bundled or user templates.

Templates are jinja2, bundled and overridable from a folder (a file of the same name,
or another named by a sink's `template`); they run in `SandboxedEnvironment`, and alert
data reaches them only as values (nothing ever calls `from_string` on a label). Each
kind of sink escapes every expression for its format (`triage.service.sinks.escape`,
the kind's `finalize`). A missing value renders `n/a`. A template that fails (a sandbox
violation, a bad expression, JSON that does not parse) is counted and the bundled
template used.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from triage.core.escape import printable
from triage.service.config import SinkSettings
from triage.service.metrics import Metrics
from triage.service.sinks.kind import Kind
from triage.service.sinks.registry import KINDS

_LOG = logging.getLogger("triage.service")


class NotAvailable(jinja2.ChainableUndefined):
    """A missing value renders `n/a`, never an empty string that reads as a real value."""

    def __str__(self) -> str:
        return "n/a"


def _page_finalize(value: Any) -> Any:
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _loader(folder: str | None) -> jinja2.BaseLoader:
    bundled = jinja2.PackageLoader("triage.service", "templates")
    if folder is None:
        return bundled
    return jinja2.ChoiceLoader([jinja2.FileSystemLoader(folder), bundled])


def _environment(kind: Kind, folder: str | None) -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        loader=_loader(folder), undefined=NotAvailable, autoescape=False, finalize=kind.finalize
    )
    env.filters.update(kind.filters)
    env.globals.update(kind.functions)
    return env


class Renderer:
    """Sink bodies and the annotation page, from bundled or user templates."""

    def __init__(self, folder: str | None = None, metrics: Metrics | None = None) -> None:
        self.metrics = metrics or Metrics()
        self._envs = {
            (kind.name, which): _environment(kind, folder if which == "user" else None)
            for kind in KINDS.values()
            for which in ("user", "bundled")
        }
        self._html = SandboxedEnvironment(
            loader=_loader(folder), undefined=NotAvailable, autoescape=True, finalize=_page_finalize
        )

    def check(self, sinks: Mapping[str, SinkSettings]) -> list[str]:
        """Problems with the templates the sinks name (for the start-up check)."""
        problems = []
        for name, sink in sinks.items():
            template = sink.template or KINDS[sink.kind].template
            try:
                self._envs[sink.kind, "user"].get_template(template)
            except jinja2.TemplateError as exc:
                problems.append(f"sinks.{name}.template: {template}: {exc}")
        return problems

    def body(self, sink: SinkSettings, message: Mapping[str, Any]) -> bytes:
        """The body for one sink; falls back to the bundled template on any template error.

        A `note` (the message was shortened) is added whatever the template says: a
        `note` key in a JSON object, a last line in text.
        """
        kind = KINDS[sink.kind]
        template = sink.template or kind.template
        alerts = list(message.get("alerts", []))
        shown = alerts[: sink.max_alerts_listed]
        more = int(message.get("alert_count", len(alerts))) - len(shown)
        context = {"message": message, "alerts": shown, "more": more, "sink": sink.name}
        note = str(message["note"]) if message.get("note") else None
        for which in ("user", "bundled"):
            name = template if which == "user" else kind.template
            try:
                text = self._envs[kind.name, which].get_template(name).render(context)
                return kind.body(text, note)
            except (jinja2.TemplateError, ValueError, TypeError) as exc:
                self.metrics.inc("triage_template_errors_total", sink=sink.name)
                _LOG.warning(
                    "sink %s: template %s failed (%s: %s); using the bundled one",
                    sink.name,
                    name,
                    type(exc).__name__,
                    str(exc)[:200],
                )
        raise RuntimeError("the bundled template failed")  # pragma: no cover

    def page(self, context: Mapping[str, Any]) -> str:
        return self._html.get_template("annotation.html.j2").render(context)
