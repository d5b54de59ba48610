"""Bearer tokens → users.

The formats are parsed by `muster_runtime.process.tokens`, shared with the launcher.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping


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
