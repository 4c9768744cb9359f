"""`triage tui` on the command line: options are checked before the screen takes over."""

from __future__ import annotations

import pytest

from triage.cli.main import main
from triage.cli.tui import EPILOG

KV = "fixtures/kv-pressure-long-context.yaml"


def test_triage_help_lists_the_tui_and_its_help_teaches_the_keys(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as top:
        main(["--help"])
    assert top.value.code == 0
    assert "tui" in capsys.readouterr().out
    with pytest.raises(SystemExit) as sub:
        main(["tui", "--help"])
    assert sub.value.code == 0
    out = capsys.readouterr().out
    for text in (
        "--fixture",
        "--prometheus",
        "--alertmanager",
        "--service",
        "--symptom",
        "shift+←/→",
        "NO_COLOR",
    ):
        assert text in out
    assert EPILOG.splitlines()[1].strip() in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tui"], "give either --fixture PATH (replay) or --prometheus URL (live)"),
        (["tui", "--fixture", KV, "--prometheus", "http://p:9090"], "give either --fixture"),
        (["tui", "--fixture", KV, "--symptom", "ttft_slo"], "did you mean ttft_slow?"),
        (["tui", "--fixture", KV, "--alertmanager", "am:9093"], "--alertmanager: 'am:9093' is not an http"),
        (["tui", "--fixture", KV, "--refresh", "soon"], "--refresh:"),
        (["tui", "--fixture", "fixtures/nope.yaml"], "fixtures/nope.yaml"),
        (["tui", "--prometheus", "prometheus:9090"], "--prometheus: 'prometheus:9090' is not an http"),
        (["tui", "--fixture", KV, "--service-token-file", "/nonexistent/token"], "--service-token-file"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_without_a_terminal_it_says_what_to_use_instead(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", "--fixture", KV]) == 2
    assert "needs a terminal; for pipes use triage diagnose --format json" in capsys.readouterr().err


def test_other_commands_still_run_through_the_console_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--fixture", KV, "--format", "json"]) == 0
    assert '"cause": "kv_pressure"' in capsys.readouterr().out


def test_readme_shows_the_screenshot_and_every_key() -> None:
    from pathlib import Path

    from tui.screens import KEYS

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("## On call: the terminal UI") :]
    for key, meaning in KEYS:
        assert f"| `{key}` | {meaning} |" in section
    assert "](docs/tui-diagnosis.svg)" in section and (root / "docs" / "tui-diagnosis.svg").exists()
