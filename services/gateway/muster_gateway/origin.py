"""Who may open the WebSocket, and how a browser hands it the token (issue 36).

A browser sends `Origin` on every WebSocket handshake and lets any page open a socket to
any host, so without a check another site could drive a signed-in console's socket. The
gateway therefore accepts a handshake whose `Origin` is its own (the `Host` the browser
connected to) or one listed in `MUSTER_ALLOWED_ORIGINS` (comma-separated, `*` for any).
Clients that are not browsers send no `Origin` and are not affected.

A browser cannot set `Authorization` on a WebSocket, and a token in the URL ends up in
logs and histories, so the console offers it as a subprotocol instead:
`Sec-WebSocket-Protocol: muster, bearer.<base64url(token)>`; the gateway answers `muster`.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlsplit

SUBPROTOCOL = "muster"
_BEARER = "bearer."


def allowed_origins(raw: str) -> frozenset[str]:
    """The origins `MUSTER_ALLOWED_ORIGINS` lists (`Settings.allowed_origins`)."""
    return frozenset(_normal(item) for item in raw.split(",") if item.strip())


def _normal(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_allowed(origin: str | None, host: str | None, allowed: frozenset[str]) -> bool:
    """True without an `Origin` (not a browser), for the gateway's own origin, and for the
    listed ones."""
    if origin is None:
        return True
    origin = _normal(origin)
    if "*" in allowed or origin in allowed:
        return True
    parts = urlsplit(origin)
    return bool(host) and parts.scheme in ("http", "https") and parts.netloc == (host or "").lower()


def offered_protocols(header: str | None) -> list[str]:
    return [item.strip() for item in (header or "").split(",") if item.strip()]


def subprotocol_token(offered: list[str]) -> str | None:
    """The token a browser offered as `bearer.<base64url>`, or None."""
    for item in offered:
        if item.startswith(_BEARER):
            encoded = item[len(_BEARER) :]
            try:
                padded = encoded + "=" * (-len(encoded) % 4)
                token = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return None
            return token or None
    return None
