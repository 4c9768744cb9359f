"""`triage mcp`: a Model Context Protocol server over stdio, on the protocol's own SDK.

An assistant connected to it calls the commands an on-call engineer would run, and
reads the same JSON they print (`mcptools` builds it through the commands' handlers).
Each tool's work blocks (files, the diagnosis, Prometheus), so it runs in a worker
thread and the event loop keeps serving. A problem the command line would print as one
line (bad input, an unknown id, a Prometheus that cannot be read) is a tool error with
that line; anything else is logged with its traceback to stderr and answered as a tool
error naming it, and the server goes on. Stdout is the protocol's alone: the SDK's stdio
transport points file descriptor 1 at stderr while it serves.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable
from typing import Annotated, Any, TextIO

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from signals.errors import InputError, InputErrors, SignalError
from triage import __version__
from triage.cli import common
from triage.cli.handlers.mcptools import NotConfigured, Tools

log = logging.getLogger("triage.mcp")

EXPECTED: tuple[type[Exception], ...] = (
    InputError,
    InputErrors,
    common.UsageError,
    common.SourceArgError,
    SignalError,
    NotConfigured,
)
"""What the command line reports as one line (exit 2 or 3): a tool error carrying that line."""

INSTRUCTIONS = """\
Incident triage for LLM inference services (vLLM, SGLang, their GPUs and the gateway in
front). Start live work with `fleets` (the names `fleet` takes), then `diagnose` with the
user-visible symptom (ttft_slow, tpot_slow, errors, rejected, cost_up, quality_down, or
auto). Every answer ranks causes with their evidence, first actions, and forbidden actions
with the reason: never propose a forbidden action. `explain_cause` gives the playbook of a
cause id. All tools are read-only."""

FLEET = "one fleet, as `fleets` names it (or labels: namespace=llm,model_name=M); default: the server's"
AT = "the moment: an RFC 3339 time, or a duration ago (20m); default now"


Payload = dict[str, Any] | list[dict[str, str]]
"""A command's JSON: an object, or the audit's list of items."""


def _json_result(payload: Payload) -> CallToolResult:
    """The command's JSON as text, and as structured content for clients that read it (an object:
    a list, the audit's, is wrapped as `{"result": [...]}`, as the SDK wraps any non-object result)."""
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    structured = payload if isinstance(payload, dict) else {"result": payload}
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


async def answer(tool: str, work: Callable[[], Payload]) -> CallToolResult:
    """`work` run in a worker thread; what goes wrong becomes a tool error with its reason."""
    try:
        payload = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except EXPECTED as exc:
        # A flag the tool takes as an argument is named as the argument.
        raise ToolError(re.sub(r"^--(at|every|fixture|fleet|symptom): ", r"\1: ", str(exc))) from None
    except Exception as exc:
        log.exception("triage mcp: %s: internal error", tool)
        reason = f"internal error: {type(exc).__name__}: {exc} (logged on the server's stderr)"
        raise ToolError(reason) from None
    return _json_result(payload)


def build_server(config: argparse.Namespace) -> MCPServer:
    """The server with its six tools, reading Prometheus and the playbooks as `config` says."""
    tools = Tools(config)
    server: MCPServer = MCPServer(
        name="llm-triage", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    # Read-only, and the same answer for the same data; the live tools reach outside (Prometheus).
    local = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
    live = local.model_copy(update={"open_world_hint": True})
    local = local.model_copy(update={"open_world_hint": False})

    @server.tool(name="fleets", annotations=live)
    async def fleets(at: Annotated[str | None, Field(description=AT)] = None) -> CallToolResult:
        """The fleets the server's Prometheus holds (the replicas serving one model in one workload):
        engine, model, namespace, workload, replicas as each exporter names them, GPUs joined, signals
        blind for each fleet, and every join that failed. The JSON of `triage fleets --format json`."""
        return await answer("fleets", lambda: tools.fleets(at))

    @server.tool(name="diagnose", annotations=live)
    async def diagnose(
        fixture: Annotated[
            str | None,
            Field(description="an incident fixture (a YAML path on the server); without it, live Prometheus"),
        ] = None,
        fleet: Annotated[str | None, Field(description=FLEET + " (live only)")] = None,
        symptom: Annotated[
            str | None,
            Field(
                description="where to start: ttft_slow, tpot_slow, errors, rejected, cost_up, quality_down "
                "or auto (default: the fixture's, else auto)"
            ),
        ] = None,
        at: Annotated[
            str | None,
            Field(
                description="the moment: with a fixture an offset from its start (40m) or an RFC 3339 time "
                "(default its at); live a duration ago or an RFC 3339 time (default now)"
            ),
        ] = None,
    ) -> CallToolResult:
        """The diagnosis at one moment: the symptom, ranked causes with their evidence, first actions,
        forbidden actions with the reason, missing signals. From a fixture, or from the server's
        Prometheus (one fleet; with several and no fleet, every fleet in breach). The JSON of
        `triage diagnose --format json`."""
        return await answer("diagnose", lambda: tools.diagnose(fixture, fleet, symptom, at))

    @server.tool(name="replay", annotations=local)
    async def replay(
        fixture: Annotated[str, Field(description="an incident fixture (YAML path on the server)")],
        symptom: Annotated[str | None, Field(description="where to start (default: the fixture's)")] = None,
        every: Annotated[str | None, Field(description="step between diagnoses (default 1m)")] = None,
    ) -> CallToolResult:
        """An incident replayed: the top causes at every step, when the top cause first appeared and
        when it settled, how long after the onset. The JSON of `triage replay --format json`."""
        return await answer("replay", lambda: tools.replay(fixture, symptom, every))

    @server.tool(name="signals_check", annotations=live)
    async def signals_check(
        fleet: Annotated[str | None, Field(description=FLEET)] = None,
        at: Annotated[str | None, Field(description=AT + " (when to find the fleet)")] = None,
    ) -> CallToolResult:
        """Every vocabulary signal resolved against the server's Prometheus: its source or blind,
        the causes that leaves unprovable, deprecated metric names in use. The JSON of
        `triage signals check --format json`."""
        return await answer("signals_check", lambda: tools.signals_check(fleet, at))

    @server.tool(name="audit", annotations=live)
    async def audit(
        fleet: Annotated[str | None, Field(description=FLEET)] = None,
        at: Annotated[str | None, Field(description=AT)] = None,
    ) -> CallToolResult:
        """The live fleet against the deployment checklist: every item pass, fail, unknown (with the
        evidence that would settle it) or not_applicable, with how to fix it. The JSON of
        `triage audit --format json`."""
        return await answer("audit", lambda: tools.audit(fleet, at))

    @server.tool(name="explain_cause", annotations=local)
    async def explain_cause(
        cause: Annotated[str, Field(description="a cause id, as a diagnosis names it (kv_pressure)")],
    ) -> CallToolResult:
        """What the playbooks say about one cause: its layer and mechanism, the checks that prove it
        (requires), support it and speak against it, the causes it explains, its first actions with
        the query that confirms each, and the actions forbidden for it with the reason."""
        return await answer("explain_cause", lambda: tools.explain_cause(cause))

    return server


def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """Serve over stdin and stdout until the client hangs up."""
    server = build_server(args)
    live = "the configured Prometheus" if args.prometheus else "no Prometheus (fixtures and playbooks only)"
    sys.stderr.write(f"triage mcp {__version__}: serving MCP on stdio; live tools read {live}\n")
    server.run("stdio")
    return common.EXIT_OK
