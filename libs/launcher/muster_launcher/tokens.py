"""API tokens for the local run.

Two formats carry the same mapping: `MUSTER_TOKENS` is `token=user,token=user` and a tokens
file holds one `token=user` per line (blank lines and `#` comments allowed). The gateway reads
the same formats on its own; this module is the launcher's side of that contract.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

DEV_USER = "dev"
TOKENS_FILE_NAME = "tokens"
# The effective tokens of the current run; kept apart from `tokens` so that a run with
# MUSTER_TOKENS never overwrites the persisted dev token.
EFFECTIVE_TOKENS_FILE = Path("run") / "tokens"


def _parse_entries(entries: Iterable[str], origin: str) -> dict[str, str]:
    """Ordered token -> user; the first entry stays first because `token:` prints it."""
    tokens: dict[str, str] = {}
    for raw in entries:
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        # Split on the first '=' only: generated tokens never contain '=', user names might.
        token, sep, user = entry.partition("=")
        token, user = token.strip(), user.strip()
        if not sep or not token or not user:
            raise ValueError(f"{origin}: expected token=user, got {entry!r}")
        if tokens.get(token, user) != user:
            raise ValueError(f"{origin}: token {token[:4]}… maps to two users")
        tokens[token] = user
    return tokens


def parse_tokens(spec: str) -> dict[str, str]:
    """Parse the `MUSTER_TOKENS` form `token=user,token=user`."""
    return _parse_entries(spec.split(","), "MUSTER_TOKENS")


def parse_tokens_file(text: str, origin: str = "tokens file") -> dict[str, str]:
    return _parse_entries(text.splitlines(), origin)


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


def load_tokens(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """token -> user from MUSTER_TOKENS, else from the file named by MUSTER_TOKENS_FILE."""
    env = os.environ if environ is None else environ
    spec = env.get("MUSTER_TOKENS", "").strip()
    if spec:
        return parse_tokens(spec)
    file_name = env.get("MUSTER_TOKENS_FILE", "").strip()
    if file_name:
        path = Path(file_name)
        return parse_tokens_file(path.read_text(), str(path))
    return {}


def dev_tokens(data_dir: Path) -> dict[str, str]:
    """The persisted dev token, generated on first use so that it survives restarts."""
    path = data_dir / TOKENS_FILE_NAME
    if path.exists():
        tokens = parse_tokens_file(path.read_text(), str(path))
        if tokens:
            return tokens
    tokens = {secrets.token_urlsafe(24): DEV_USER}
    write_tokens_file(path, tokens)
    return tokens


def effective_tokens(data_dir: Path, environ: Mapping[str, str]) -> tuple[dict[str, str], Path]:
    """Tokens for this run and the file passed to services as MUSTER_TOKENS_FILE."""
    spec = environ.get("MUSTER_TOKENS", "").strip()
    tokens = parse_tokens(spec) if spec else dev_tokens(data_dir)
    if not tokens:
        raise ValueError("MUSTER_TOKENS holds no token")
    path = data_dir / EFFECTIVE_TOKENS_FILE
    write_tokens_file(path, tokens)
    return tokens, path


def default_client_token(data_dir: Path, environ: Mapping[str, str]) -> str | None:
    """The token `muster chat` uses without --token: $MUSTER_TOKEN, the last run's, the dev one."""
    if environ.get("MUSTER_TOKEN"):
        return environ["MUSTER_TOKEN"]
    for path in (data_dir / EFFECTIVE_TOKENS_FILE, data_dir / TOKENS_FILE_NAME):
        if path.exists():
            tokens = parse_tokens_file(path.read_text(), str(path))
            if tokens:
                return next(iter(tokens))
    return None
