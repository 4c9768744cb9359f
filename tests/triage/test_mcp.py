"""`triage mcp`: the six tools answer what the commands print, and every failure is a tool error.

In process, each test talks to the server through the SDK's own client; the live tools
read a real Prometheus serving the bundled two-fleet recording (skipped loudly without
`prometheus` and `promtool`, failed under CI=true); one test runs the console script
over real stdio.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fleetrecording import LARGE, SMALL, recording, serving
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent
from promserver import require_prometheus_binaries

from signals.timeparse import format_instant
from triage.cli.common import EXIT_FAILED, EXIT_OK
from triage.cli.handlers.mcp import build_server
from triage.cli.handlers.mcptools import Tools
from triage.cli.main import build_parser, main
from triage.sources import load_playbooks

ROOT = Path(__file__).resolve().parents[2]
KV = str(ROOT / "fixtures" / "kv-pressure-long-context.yaml")
REPLICA_DOWN = str(ROOT / "fixtures" / "replica-down-queue-growth.yaml")
TOOLS = {"fleets", "diagnose", "replay", "signals_check", "audit", "explain_cause"}
CREDENTIAL_WORDS = ("url", "prometheus", "token", "password", "auth", "header", "credential", "secret")


def client_for(*options: str) -> Client:
    """An in-process client of a server started as `triage mcp OPTIONS`."""
    return Client(build_server(build_parser().parse_args(["mcp", *options])))


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def answer(result: CallToolResult) -> Any:
    """A successful tool answer: its JSON text, which its structured content must equal."""
    assert not result.is_error, text_of(result)
    data = json.loads(text_of(result))
    structured = data if isinstance(data, dict) else {"result": data}
    assert result.structured_content == structured
    return data


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = EXIT_OK) -> Any:
    assert main(list(argv)) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


async def assert_tool_error(
    client: Client, tool: str, arguments: dict[str, Any], *reasons: str, internal: bool = False
) -> str:
    """The call is a tool error naming each reason, with no traceback; the session goes on.

    An expected problem (bad input, an unreachable server) is told as the command line tells
    it; only an unexpected exception reads as an internal error."""
    result = await client.call_tool(tool, arguments)
    text = text_of(result)
    assert result.is_error, text
    for reason in reasons:
        assert reason in text, text
    assert "Traceback" not in text
    assert ("internal error" in text) == internal, text
    again = answer(await client.call_tool("explain_cause", {"cause": "replica_down"}))
    assert again["cause"] == "replica_down"
    return text


# ------------------------------------------------------------------ the tools listed


async def test_lists_the_six_tools_and_none_takes_a_url_or_credential() -> None:
    async with client_for() as offline:
        listed = (await offline.list_tools()).tools
        assert {t.name for t in listed} == TOOLS and len(listed) == len(TOOLS)
        for tool in listed:
            assert tool.description, tool.name
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            properties = tool.input_schema.get("properties", {})
            for name in properties:
                assert not any(word in name.lower() for word in CREDENTIAL_WORDS), (tool.name, name)
        schemas = {t.name: t.input_schema for t in listed}
        assert set(schemas["diagnose"]["properties"]) == {"fixture", "fleet", "symptom", "at"}
        assert schemas["explain_cause"]["required"] == ["cause"]
        assert schemas["replay"]["required"] == ["fixture"]


# ------------------------------------------------------------------ the same answers as the CLI


async def test_diagnose_a_fixture_is_the_cli_diagnosis(capsys: pytest.CaptureFixture[str]) -> None:
    async with client_for() as offline:
        tool = answer(await offline.call_tool("diagnose", {"fixture": KV}))
        cli = cli_json(capsys, "diagnose", "--fixture", KV, "--format", "json")
        assert tool["causes"][0]["cause"] == cli["causes"][0]["cause"] == "kv_pressure"
        assert tool["causes"][0]["evidence"] == cli["causes"][0]["evidence"]
        assert [f["action"] for f in tool["forbidden"]] == [f["action"] for f in cli["forbidden"]]
        assert "scale_out" in {f["action"] for f in tool["forbidden"]}
        assert tool == cli


async def test_diagnose_takes_the_symptom_and_the_moment_as_the_cli_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with client_for() as offline:
        arguments = {"fixture": REPLICA_DOWN, "symptom": "ttft_slow", "at": "20m"}
        tool = answer(await offline.call_tool("diagnose", arguments))
        argv = ["--symptom", "ttft_slow", "--at", "20m", "--format", "json"]
        cli = cli_json(capsys, "diagnose", "--fixture", REPLICA_DOWN, *argv)
        assert tool == cli
        assert tool["symptom"] == "ttft_slow" and tool["symptom_source"] == "given"
        whole = answer(await offline.call_tool("diagnose", {"fixture": REPLICA_DOWN}))
        assert whole["at"] != tool["at"] and whole["causes"][0]["cause"] == "replica_down"


async def test_replay_is_the_cli_replay(capsys: pytest.CaptureFixture[str]) -> None:
    async with client_for() as offline:
        tool = answer(await offline.call_tool("replay", {"fixture": REPLICA_DOWN, "every": "5m"}))
        cli = cli_json(capsys, "replay", REPLICA_DOWN, "--every", "5m", "--format", "json")
        assert tool == cli
        assert tool["summary"]["top_cause"] == "replica_down" and len(tool["steps"]) > 3


async def test_explain_cause_is_the_playbook(capsys: pytest.CaptureFixture[str]) -> None:
    async with client_for() as offline:
        kb = load_playbooks(ROOT / "playbooks")
        spec = kb.causes["kv_pressure"]
        found = answer(await offline.call_tool("explain_cause", {"cause": "kv_pressure"}))
        assert found["cause"] == "kv_pressure" and found["layer"] == spec.layer == "resource"
        assert found["mechanism"] == spec.mechanism and "KV" in found["mechanism"]
        assert found["checks"]["requires"][0] == {
            "kind": "above",
            "signal": "kv_usage_ratio",
            "view": "max_replica",
            "threshold": 0.95,
            "for": "5m",
        }
        assert len(found["checks"]["requires"]) == len(spec.requires)
        assert [a["id"] for a in found["first_actions"]] == list(spec.first_actions)
        assert all(a["text"] == kb.actions[a["id"]].text for a in found["first_actions"])
        forbidden = {f["action"]: f for f in found["forbidden"]}
        assert {"scale_out", "raise_gpu_memory_utilization", "raise_max_num_seqs"} <= set(forbidden)
        assert "force_prefix_cache" not in forbidden  # linked to prefix_cache_miss only
        assert "tpot_slow" in found["symptoms"]
        assert re.search(r"causes-resource\.yaml:\d+$", found["playbook"]), found["playbook"]
        # What a diagnosis of this cause advises and forbids comes from this playbook.
        diagnosis = cli_json(capsys, "diagnose", "--fixture", KV, "--format", "json")
        assert {a["id"] for a in diagnosis["first_actions"]} & set(spec.first_actions)
        linked = {"scale_out", "raise_gpu_memory_utilization"}
        assert linked <= {f["action"] for f in diagnosis["forbidden"]} and linked <= set(forbidden)


async def test_scale_out_is_not_forbidden_for_a_true_capacity_shortage() -> None:
    async with client_for() as offline:
        found = answer(await offline.call_tool("explain_cause", {"cause": "capacity_shortage"}))
        assert "scale_out" not in {f["action"] for f in found["forbidden"]}
        gateway = answer(await offline.call_tool("explain_cause", {"cause": "gateway_bottleneck"}))
        scale_out = next(f for f in gateway["forbidden"] if f["action"] == "scale_out")
        assert "edge" in scale_out["because"]


# ------------------------------------------------------------------ errors


async def test_a_missing_fixture_is_a_tool_error(tmp_path: Path) -> None:
    async with client_for() as offline:
        missing = tmp_path / "nope.yaml"
        await assert_tool_error(
            offline, "diagnose", {"fixture": str(missing)}, f"{missing}:0:", "no such file"
        )
        await assert_tool_error(offline, "replay", {"fixture": str(missing)}, "no such file")
        # A path that reads like a flag is still a path, never parsed as an option.
        await assert_tool_error(offline, "replay", {"fixture": "--help"}, "--help", "no such file")
        await assert_tool_error(offline, "diagnose", {"fixture": "--prometheus=http://x"}, "no such file")


async def test_invalid_yaml_is_a_tool_error_naming_file_and_line(tmp_path: Path) -> None:
    async with client_for() as offline:
        bad = tmp_path / "bad.yaml"
        bad.write_text("name: bad\nat: [\n", encoding="utf-8")
        await assert_tool_error(offline, "diagnose", {"fixture": str(bad)}, f"{bad}:", "malformed YAML")
        shape = tmp_path / "shape.yaml"
        shape.write_text("name: shape\nsymtpom: ttft_slow\n", encoding="utf-8")
        await assert_tool_error(
            offline, "diagnose", {"fixture": str(shape)}, f"{shape}:2: symtpom: unknown key"
        )


async def test_an_unknown_symptom_is_a_tool_error() -> None:
    async with client_for() as offline:
        text = await assert_tool_error(
            offline, "diagnose", {"fixture": KV, "symptom": "slow"}, "unknown symptom 'slow'", "ttft_slow"
        )
        assert text.count("--symptom") == 0


async def test_an_unknown_cause_is_a_tool_error_listing_the_known() -> None:
    async with client_for() as offline:
        await assert_tool_error(
            offline,
            "explain_cause",
            {"cause": "kv_presure"},
            "unknown cause 'kv_presure'",
            "did you mean kv_pressure",
        )
        text = await assert_tool_error(offline, "explain_cause", {"cause": "xyzzy"}, "known causes:")
        assert "replica_down" in text and "gpu_fault" in text


@pytest.mark.parametrize("tool", ["fleets", "signals_check", "audit", "diagnose"])
async def test_a_live_tool_without_prometheus_says_how_to_configure_it(tool: str) -> None:
    async with client_for() as offline:
        await assert_tool_error(offline, tool, {}, "no Prometheus configured", "triage mcp --prometheus URL")


async def test_an_unreachable_prometheus_is_a_tool_error_with_the_reason() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with client_for("--prometheus", f"http://127.0.0.1:{port}", "--timeout", "2") as client:
        for tool in ("fleets", "diagnose", "signals_check"):
            await assert_tool_error(client, tool, {}, "unreachable", "connection refused")
        # The fixture tools do not need it.
        assert (
            answer(await client.call_tool("diagnose", {"fixture": KV}))["causes"][0]["cause"] == "kv_pressure"
        )


async def test_an_unexpected_exception_is_logged_and_the_server_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object) -> dict[str, Any]:
        raise RuntimeError("replay broke")

    monkeypatch.setattr(Tools, "replay", broken)
    async with client_for() as offline:
        reason = "internal error: RuntimeError: replay broke"
        await assert_tool_error(offline, "replay", {"fixture": KV}, reason, internal=True)
        assert answer(await offline.call_tool("diagnose", {"fixture": KV}))["causes"]
    logged = [r for r in caplog.records if r.name == "triage.mcp"]
    assert logged and logged[0].exc_info is not None and "replay" in logged[0].getMessage()


async def test_blocking_work_runs_in_a_worker_thread_while_the_server_answers() -> None:
    started, release = threading.Event(), threading.Event()
    threads: list[int] = []

    def slow(self: Tools, *args: object) -> dict[str, Any]:
        threads.append(threading.get_ident())
        started.set()
        release.wait(10)
        return {"done": True}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tools, "replay", slow)
        async with client_for() as offline, anyio.create_task_group() as group:
            group.start_soon(offline.call_tool, "replay", {"fixture": KV})
            with anyio.fail_after(5):
                while not started.is_set():
                    await anyio.sleep(0.01)
                found = answer(await offline.call_tool("explain_cause", {"cause": "kv_pressure"}))
            assert found["cause"] == "kv_pressure" and not release.is_set()
            release.set()
    assert threads and threads[0] != threading.get_ident()


# ------------------------------------------------------------------ live, against a real Prometheus


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    require_prometheus_binaries()
    with serving(recording()) as prometheus:
        yield prometheus.url


def _moment() -> str:
    return format_instant(recording().at)


async def test_fleets_names_both_fleets_as_the_cli_does(
    prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with client_for("--prometheus", prometheus_url) as live:
        end = format_instant(recording().frame.end)
        tool = answer(await live.call_tool("fleets", {"at": end}))
        cli = cli_json(capsys, "fleets", "--prometheus", prometheus_url, "--at", end, "--format", "json")
        assert tool == cli
        assert [f["name"] for f in tool["fleets"]] == [LARGE, SMALL]
        assert tool["server"] == prometheus_url


async def test_live_diagnose_of_one_fleet_finds_its_cause(
    prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with client_for("--prometheus", prometheus_url) as live:
        arguments = {"fleet": SMALL, "symptom": "tpot_slow", "at": _moment()}
        tool = answer(await live.call_tool("diagnose", arguments))
        argv = ["--fleet", SMALL, "--symptom", "tpot_slow", "--at", _moment(), "--format", "json"]
        cli = cli_json(capsys, "diagnose", "--prometheus", prometheus_url, *argv)
        assert tool["causes"][0]["cause"] == cli["causes"][0]["cause"] == "kv_pressure"
        assert [c["cause"] for c in tool["causes"]] == [c["cause"] for c in cli["causes"]]
        assert [f["action"] for f in tool["forbidden"]] == [f["action"] for f in cli["forbidden"]]
        assert "scale_out" in {f["action"] for f in tool["forbidden"]}
        assert dict(tool["fleet"])["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"


async def test_live_diagnose_of_an_unknown_fleet_lists_the_fleets(prometheus_url: str) -> None:
    async with client_for("--prometheus", prometheus_url) as live:
        await assert_tool_error(live, "diagnose", {"fleet": "llm/nope", "at": _moment()}, "fleet:", SMALL)


async def test_signals_check_is_the_cli_check(
    prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with client_for("--prometheus", prometheus_url) as live:
        tool = answer(await live.call_tool("signals_check", {}))
        cli = cli_json(capsys, "signals", "check", "--prometheus", prometheus_url, "--format", "json")
        assert tool == cli
        assert tool["signals"]["kv_usage_ratio"]["blind"] is False
        assert tool["signals"]["gpu_xid"]["blind"] is False  # DCGM is in the recording
        scoped = answer(await live.call_tool("signals_check", {"fleet": SMALL, "at": _moment()}))
        assert scoped["fleet"] == SMALL


async def test_audit_is_the_cli_audit(prometheus_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    async with client_for("--prometheus", prometheus_url) as live:
        at = format_instant(recording().frame.end)
        tool = answer(await live.call_tool("audit", {"at": at, "fleet": SMALL}))
        argv = ["audit", "--prometheus", prometheus_url, "--at", at, "--fleet", SMALL, "--format", "json"]
        assert main(argv) in (EXIT_OK, EXIT_FAILED)
        cli = json.loads(capsys.readouterr().out)
        assert [(i["id"], i["status"]) for i in tool] == [(i["id"], i["status"]) for i in cli]
        assert tool == cli
        assert {"pass", "fail"} & {i["status"] for i in tool}


# ------------------------------------------------------------------ the real console script


async def test_the_console_script_serves_over_stdio() -> None:
    script = Path(sys.executable).parent / "triage"
    params = StdioServerParameters(command=str(script), args=["mcp"], cwd=str(ROOT))
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        found = answer(await client.call_tool("explain_cause", {"cause": "replica_down"}))
        assert found["layer"] == "supply" and found["first_actions"]
        error = await client.call_tool("explain_cause", {"cause": "nope"})
        assert error.is_error and "unknown cause 'nope'" in text_of(error)


def test_help_names_the_tools_and_a_client_configuration() -> None:
    script = Path(sys.executable).parent / "triage"
    result = subprocess.run([str(script), "mcp", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for tool in TOOLS:
        assert f"\n  {tool} " in result.stdout, tool
    assert '"mcpServers"' in result.stdout and '"args": ["mcp"' in result.stdout
