"""Session ids as clients send them: a malformed one is simply not found."""

from __future__ import annotations

from uuid import UUID

from muster_gateway.errors import not_found


def parse_session_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except (ValueError, TypeError, AttributeError):
        raise not_found() from None
