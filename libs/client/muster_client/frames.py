"""Frames of the WebSocket contract (DESIGN §7) and the URL a client connects to."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

Frame = dict[str, Any]
# Phases that end a turn.
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
# Reply types a request can get; anything else with the same `id` is not its reply.
REPLIES = frozenset({"ack", "error", "pong"})


class Lost(Exception):
    """The connection dropped (or was never there) before the reply arrived."""


class ServerError(Exception):
    """The server answered a request with an `error` frame."""

    def __init__(self, type_: str, data: dict[str, Any]) -> None:
        self.code = str(data.get("code", ""))
        self.message = str(data.get("message", ""))
        super().__init__(f"{type_}: {self.code}: {self.message}")


def ws_url(base: str, token: str) -> str:
    """The socket URL for `base` (`http(s)://host:port` or `ws(s)://host:port/v1/ws`) with
    the token as `?token=` (quoted). A base without a path gets `/v1/ws`."""
    parts = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path if parts.path not in ("", "/") else "/v1/ws"
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "token"]
    query_text = urlencode(query) + ("&" if query else "") + f"token={quote(token, safe='')}"
    return urlunsplit((scheme, parts.netloc, path, query_text, ""))


def request_frame(type_: str, frame_id: str, session_id: str | None, data: dict[str, Any] | None) -> Frame:
    """A client → server frame; `sessionId` and `data` only when given."""
    frame: Frame = {"type": type_, "id": frame_id}
    if session_id is not None:
        frame["sessionId"] = session_id
    if data is not None:
        frame["data"] = data
    return frame


def parse(raw: str | bytes) -> Frame | None:
    """A server frame, or None for anything that is not a JSON object."""
    try:
        frame = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return frame if isinstance(frame, dict) else None


def is_event(frame: Frame) -> bool:
    """A session event: it carries the session and its event-store position."""
    return isinstance(frame.get("position"), int) and isinstance(frame.get("sessionId"), str)


def script(*steps: dict[str, Any]) -> str:
    """A message for the scripted model: `#script {"steps": [...]}`."""
    return "#script " + json.dumps({"steps": list(steps)})


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One tool call of a scripted step."""
    return {"name": name, "arguments": arguments}
