"""The error vocabulary of the public contract (§7), shared by the WebSocket and REST edges.

Handlers raise `GatewayError`; each edge renders it in its own shape. Anything else that
escapes a handler is an `internal` error: logged with its type, never shown to the client.
"""

from __future__ import annotations

from typing import Any, Literal

ErrorCode = Literal[
    "bad_request",
    "unknown_type",
    "too_large",
    "unauthorized",
    "not_found",
    "conflict",
    "rate_limited",
    "quota_exceeded",
    "overloaded",
    "internal",
]

HTTP_STATUS: dict[str, int] = {
    "bad_request": 400,
    "unknown_type": 400,
    "too_large": 413,
    "unauthorized": 401,
    "not_found": 404,
    "conflict": 409,
    "rate_limited": 429,
    "quota_exceeded": 429,
    "overloaded": 503,
    "internal": 500,
}

# One message for every reason a session is invisible (unknown, malformed id, other user's),
# so a client cannot tell "exists but not yours" from "does not exist".
SESSION_NOT_FOUND = "session not found"


class GatewayError(Exception):
    def __init__(self, code: ErrorCode, message: str, *, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        # When to try again (`rate_limited`, `quota_exceeded`, `overloaded`): the frame's
        # `data.retryAfterMs`, REST's `Retry-After` (whole seconds, rounded up).
        self.retry_after_ms = retry_after_ms

    @property
    def status(self) -> int:
        return HTTP_STATUS[self.code]


def not_found() -> GatewayError:
    return GatewayError("not_found", SESSION_NOT_FOUND)


def _body(code: str, message: str, retry_after_ms: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if retry_after_ms is not None:
        body["retryAfterMs"] = retry_after_ms
    return body


def retry_after_header(retry_after_ms: int) -> str:
    """`Retry-After` in whole seconds, never less than the hint."""
    return str(max(1, -(-retry_after_ms // 1000)))


def rest_body(code: str, message: str, retry_after_ms: int | None = None) -> dict[str, Any]:
    return {"error": _body(code, message, retry_after_ms)}


def ws_frame(
    code: str, message: str, frame_id: Any = None, retry_after_ms: int | None = None
) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "error", "data": _body(code, message, retry_after_ms)}
    if frame_id is not None:
        frame["id"] = frame_id
    return frame
