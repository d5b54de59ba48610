"""`muster chat`: post one message over the WebSocket API and print the turn as it streams."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

TERMINAL = {"COMPLETED": 0, "FAILED": 1, "CANCELLED": 1}
_MAX_SHOWN = 2000
# Events that only repeat what a `message` event shows anyway.
_ECHOES = {"message_queued", "tool_call_started"}


def ws_url(base: str, token: str) -> str:
    parts = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, "/v1/ws", f"token={quote(token, safe='')}", ""))


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + f"… ({len(text)} chars)"


def render(event: dict[str, Any]) -> list[str]:
    """Readable lines for one server event."""
    kind, data = event.get("type"), event.get("data") or {}
    if kind == "message":
        lines = []
        role = str(data.get("role", "?")).lower()
        if role == "tool":
            lines.append(f"  <- [{data.get('toolCallId')}] {_short(data.get('content'))}")
        elif data.get("content"):
            lines.append(f"{role}: {_short(data['content'])}")
        for call in data.get("toolCalls") or []:
            fn = call.get("function", {})
            lines.append(f"  -> {fn.get('name')}({_short(fn.get('arguments', ''))})")
        return lines
    if kind in _ECHOES:
        return []
    if kind == "session_created":
        return [f"-- session created ({data.get('agentType')})"]
    if kind == "session_status":
        return [f"-- {data.get('phase')}"]
    if kind == "subagent_session_created":
        return [f"-- subagent {data.get('agentType')} in session {data.get('childSessionId')}"]
    if kind == "side_session_created":
        return [f"-- side task {data.get('sessionId')} ({data.get('contextMode')})"]
    if kind == "execution_status":
        status = f"{data.get('status')}/{data.get('deliveryStatus')}"
        return [f"-- execution {data.get('executionId')}: {status}"]
    return [f"-- {kind}: {_short(data)}"]


@dataclass
class _Turn:
    """Decides when our turn is over: a terminal phase counts only once we saw our own
    message or a RUNNING phase, so the end of an earlier turn does not end the chat."""

    content: str
    message_id: str | None = None
    queued: bool = False
    armed: bool = False

    def observe(self, event: dict[str, Any]) -> int | None:
        data = event.get("data") or {}
        if event.get("type") == "message" and str(data.get("role", "")).upper() == "USER":
            if data.get("messageId") == self.message_id or data.get("content") == self.content:
                self.armed = True
        elif event.get("type") == "session_status":
            phase = data.get("phase")
            if phase == "RUNNING" and not self.queued:
                self.armed = True
            elif self.armed and phase in TERMINAL:
                return TERMINAL[phase]
        return None


async def _send(ws: ClientConnection, frame: dict[str, Any]) -> None:
    await ws.send(json.dumps(frame))


async def _request(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    """Send and wait for the ack of a request that produces no events before it."""
    await _send(ws, frame)
    while True:
        reply = json.loads(await ws.recv())
        if reply.get("id") == frame["id"]:
            if reply.get("type") == "error":
                raise RuntimeError(f"{frame['type']}: {reply.get('data')}")
            data: dict[str, Any] = reply.get("data") or {}
            return data


def _opening(request_id: str, payload: dict[str, Any], side_of: str | None, mode: str) -> dict[str, Any]:
    """The frame that starts the chat: a new session, or a side task of `side_of`."""
    if side_of is None:
        return {"type": "create_session", "id": request_id, "data": payload}
    data = {**payload, "contextMode": mode}
    return {"type": "create_side_session", "id": request_id, "sessionId": side_of, "data": data}


async def chat(
    base_url: str,
    token: str,
    message: str,
    session: str | None,
    side_of: str | None = None,
    mode: str = "none",
) -> int:
    async with connect(ws_url(base_url, token), max_size=16 << 20) as ws:
        turn = _Turn(message)
        request_id = uuid.uuid4().hex
        payload = {"content": message, "clientMessageId": uuid.uuid4().hex}
        if session:
            await _request(ws, {"type": "subscribe", "id": uuid.uuid4().hex, "sessionId": session})
            await _send(
                ws,
                {"type": "send_message", "id": request_id, "sessionId": session, "data": payload},
            )
        else:
            await _send(ws, _opening(request_id, payload, side_of, mode))
        async for raw in ws:
            frame = json.loads(raw)
            if frame.get("id") == request_id:
                if frame.get("type") == "error":
                    print(f"error: {frame.get('data')}", file=sys.stderr)
                    return 2
                ack = frame.get("data") or {}
                session = session or ack.get("sessionId")
                turn.message_id, turn.queued = ack.get("messageId"), bool(ack.get("queued"))
                print(f"session: {session}" + (" (queued)" if turn.queued else ""), flush=True)
                continue
            if frame.get("type") == "error":
                print(f"error: {frame.get('data')}", file=sys.stderr)
                continue
            if session and frame.get("sessionId") not in (None, session):
                continue
            for line in render(frame):
                print(line, flush=True)
            if (code := turn.observe(frame)) is not None:
                return code
    print("error: connection closed before the turn ended", file=sys.stderr)
    return 2


def run_chat(
    base_url: str,
    token: str,
    message: str,
    session: str | None,
    timeout: float,
    *,
    side_of: str | None = None,
    mode: str = "none",
) -> int:
    try:
        return asyncio.run(asyncio.wait_for(chat(base_url, token, message, session, side_of, mode), timeout))
    except TimeoutError:
        print(f"error: no end of turn within {timeout:g}s", file=sys.stderr)
        return 3
    except (OSError, RuntimeError, WebSocketException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
