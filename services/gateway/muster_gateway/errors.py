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
    "internal",
]

HTTP_STATUS: dict[str, int] = {
    "bad_request": 400,
    "unknown_type": 400,
    "too_large": 413,
    "unauthorized": 401,
    "not_found": 404,
    "conflict": 409,
    "internal": 500,
}

# One message for every reason a session is invisible (unknown, malformed id, other user's),
# so a client cannot tell "exists but not yours" from "does not exist".
SESSION_NOT_FOUND = "session not found"


class GatewayError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message

    @property
    def status(self) -> int:
        return HTTP_STATUS[self.code]


def not_found() -> GatewayError:
    return GatewayError("not_found", SESSION_NOT_FOUND)


def rest_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def ws_frame(code: str, message: str, frame_id: Any = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "error", "data": {"code": code, "message": message}}
    if frame_id is not None:
        frame["id"] = frame_id
    return frame
