"""Bearer tokens → users.

The formats are the launcher's (`MUSTER_TOKENS=token=user,token=user`, or a file named by
`MUSTER_TOKENS_FILE` with one `token=user` per line, blanks and `#` comments allowed); the
gateway parses them itself so it does not depend on the launcher package.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path


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


def load_tokens(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """MUSTER_TOKENS wins over MUSTER_TOKENS_FILE; neither set → no tokens."""
    env = os.environ if environ is None else environ
    spec = env.get("MUSTER_TOKENS", "").strip()
    if spec:
        return parse_tokens(spec)
    file_name = env.get("MUSTER_TOKENS_FILE", "").strip()
    if file_name:
        try:
            text = Path(file_name).read_text()
        except OSError as exc:
            raise TokenError(f"MUSTER_TOKENS_FILE: cannot read {file_name}: {exc}") from exc
        return parse_tokens_file(text)
    return {}


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class Authenticator:
    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(token.encode(), user) for token, user in tokens.items()]

    def __len__(self) -> int:
        return len(self._tokens)

    def user_for(self, token: str | None) -> str | None:
        """Compare against every token in constant time, so response timing does not leak
        how much of a guessed token was right."""
        if not token:
            return None
        candidate = token.encode()
        found: str | None = None
        for known, user in self._tokens:
            if hmac.compare_digest(known, candidate):
                found = user
        return found
