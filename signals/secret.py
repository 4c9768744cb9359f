"""Reading a secret (a bearer token, a password, `user:password`) from a file.

One reader for every door that takes a credential file (the CLI's `--token-file`, the
service's `*_file` settings), so each says the same thing when the file cannot be used.
"""

from __future__ import annotations

from pathlib import Path


class SecretFileError(ValueError):
    """A credential file that cannot be used; the message names the setting and the file."""


def read_secret(path: str, where: str) -> str:
    """The file's text, stripped of surrounding white space.

    `where` names the setting the path came from (`--token-file`, `prometheus.token_file`)
    and starts the message of the `SecretFileError` raised for a file that cannot be read
    or holds nothing: an empty token would otherwise be sent as no credential at all.
    """
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecretFileError(f"{where}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SecretFileError(f"{where}: {path} is not UTF-8 text") from None
    if not value:
        raise SecretFileError(f"{where}: {path} is empty")
    return value
