"""API tokens for the local run.

Two formats carry the same mapping: `MUSTER_TOKENS` is `token=user,token=user` and a tokens
file holds one `token=user` per line (blank lines and `#` comments allowed); both are parsed
by `muster_runtime.process.tokens`, as in the gateway. This module keeps the launcher's dev tokens.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from muster_runtime.process.settings import Settings
from muster_runtime.process.tokens import load_tokens, parse_tokens, parse_tokens_file

__all__ = ["load_tokens", "parse_tokens", "parse_tokens_file"]

DEV_USER = "dev"
TOKENS_FILE_NAME = "tokens"
# The effective tokens of the current run; kept apart from `tokens` so that a run with
# MUSTER_TOKENS never overwrites the persisted dev token.
EFFECTIVE_TOKENS_FILE = Path("run") / "tokens"


def format_tokens_file(tokens: Mapping[str, str]) -> str:
    return "".join(f"{token}={user}\n" for token, user in tokens.items())


def write_tokens_file(path: Path, tokens: Mapping[str, str]) -> None:
    """Write atomically with mode 0600: the file holds credentials."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(format_tokens_file(tokens))
    os.replace(tmp, path)


def new_token(draw: Callable[[int], str] = secrets.token_urlsafe) -> str:
    """A fresh URL-safe token that never starts with `-`: a command line would read such a
    token as an option (`muster chat --token -6js2…` fails with "expected one argument")."""
    while True:
        token = draw(24)
        if not token.startswith("-"):
            return token


def dev_tokens(data_dir: Path) -> dict[str, str]:
    """The persisted dev token, generated on first use so that it survives restarts."""
    path = data_dir / TOKENS_FILE_NAME
    if path.exists():
        tokens = parse_tokens_file(path.read_text(), str(path))
        if tokens:
            return tokens
    tokens = {new_token(): DEV_USER}
    write_tokens_file(path, tokens)
    return tokens


def effective_tokens(data_dir: Path, source: Settings | Mapping[str, str]) -> tuple[dict[str, str], Path]:
    """Tokens for this run and the file passed to services as MUSTER_TOKENS_FILE."""
    spec = Settings.of(source).tokens.strip()
    tokens = parse_tokens(spec) if spec else dev_tokens(data_dir)
    if not tokens:
        raise ValueError("MUSTER_TOKENS holds no token")
    path = data_dir / EFFECTIVE_TOKENS_FILE
    write_tokens_file(path, tokens)
    return tokens, path


def default_client_token(data_dir: Path, source: Settings | Mapping[str, str]) -> str | None:
    """The token `muster chat` uses without --token: $MUSTER_TOKEN, the last run's, the dev one."""
    given = Settings.of(source).client_token
    if given:
        return given
    for path in (data_dir / EFFECTIVE_TOKENS_FILE, data_dir / TOKENS_FILE_NAME):
        if path.exists():
            tokens = parse_tokens_file(path.read_text(), str(path))
            if tokens:
                return next(iter(tokens))
    return None
