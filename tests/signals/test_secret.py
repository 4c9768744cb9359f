"""The one credential-file reader: the CLI and the service say the same thing about a bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from signals.secret import SecretFileError, read_secret
from triage.cli.common import EXIT_USAGE
from triage.cli.main import main


def test_a_secret_is_read_and_stripped(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("  s3cret\n", encoding="utf-8")
    assert read_secret(str(path), "--token-file") == "s3cret"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "--token-file: cannot read {path}: No such file or directory"),
        (" \n", "--token-file: {path} is empty"),
    ],
)
def test_an_unusable_secret_names_the_setting_and_the_file(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SecretFileError) as caught:
        read_secret(str(path), "--token-file")
    assert str(caught.value) == expected.format(path=path)


def test_an_empty_token_file_is_a_usage_error_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "token"
    path.write_text("\n", encoding="utf-8")
    assert main(["diagnose", "--prometheus", "http://127.0.0.1:9", "--token-file", str(path)]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"triage: --token-file: {path} is empty"
