"""API tokens → users, in the two forms every process reads: `MUSTER_TOKENS`
(`token=user,token=user`) and a file named by `MUSTER_TOKENS_FILE` (one `token=user` per
line, blank lines and `#` comments allowed). Error messages never contain a token."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from muster_runtime.process.settings import Settings


class TokenError(ValueError):
    """The token configuration is unusable; the message never contains a token."""


def _parse(entries: Iterable[str], origin: str) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for number, raw in enumerate(entries, start=1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        # Split on the first '=': user names may contain '=', generated tokens do not.
        token, sep, user = (part.strip() for part in entry.partition("="))
        if not sep or not token or not user:
            raise TokenError(f"{origin}: entry {number} is not token=user")
        if tokens.get(token, user) != user:
            raise TokenError(f"{origin}: entry {number} maps a token to a second user")
        tokens[token] = user
    return tokens


def parse_tokens(spec: str) -> dict[str, str]:
    """`token=user,token=user` (the MUSTER_TOKENS form)."""
    return _parse(spec.split(","), "MUSTER_TOKENS")


def parse_tokens_file(text: str, origin: str = "MUSTER_TOKENS_FILE") -> dict[str, str]:
    return _parse(text.splitlines(), origin)


def load_tokens(source: Settings | Mapping[str, str]) -> dict[str, str]:
    """MUSTER_TOKENS wins over MUSTER_TOKENS_FILE; neither set → no tokens. `source` is the
    process's settings, or an environment given as a mapping."""
    settings = Settings.of(source)
    spec = settings.tokens.strip()
    if spec:
        return parse_tokens(spec)
    file_name = settings.tokens_file.strip()
    if file_name:
        try:
            text = Path(file_name).read_text()
        except OSError as exc:
            raise TokenError(f"MUSTER_TOKENS_FILE: cannot read {file_name}: {exc}") from exc
        return parse_tokens_file(text)
    return {}
