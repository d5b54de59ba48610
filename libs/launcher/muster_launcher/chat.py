"""`muster chat`: post one message over the WebSocket API and print the turn as it streams
(with `--local DIR`, also serve the turn's file tools in DIR as a LOCAL client)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from muster_client import Connection, Frame, Lost, ServerError, ws_url
from websockets.exceptions import WebSocketException

from .local_journal import RequestJournal, default_path
from .local_tools import LocalTools

__all__ = ["TERMINAL", "Streamed", "chat", "render", "run_chat", "ws_url"]

TERMINAL = {"COMPLETED": 0, "FAILED": 1, "CANCELLED": 1}
_MAX_SHOWN = 2000
# Events that only repeat what a `message` event shows anyway.
_ECHOES = {"message_queued", "tool_call_started"}


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
    if kind == "tool_request_sent":
        return [f"-- LOCAL {data.get('name')} requested ({data.get('requestId')})"]
    if kind == "tool_request_resolved":
        return [f"-- LOCAL request {data.get('requestId')}: {data.get('outcome')}"]
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


class Streamed:
    """Prints an answer as it streams (`assistant_delta`), then its durable `message`
    without repeating the text already shown; when pieces were missed (deltas are only a
    preview), the message's whole text is shown instead. Other events that arrive while an
    answer streams (a title made meanwhile, say) are held until its line is finished, so
    they never cut the answer in two."""

    # Events that end what was streaming: shown at once, after the line is finished.
    _ENDING = frozenset({"message", "session_status"})

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self._write = write or _stdout
        self._shown: dict[str, str] = {}  # messageId -> text printed so far
        self._open: str | None = None  # a message whose line is not finished
        self._held: list[str] = []  # lines of other events that came while it streamed

    def delta(self, frame: Frame) -> None:
        data = frame.get("data") or {}
        message_id, text = str(data.get("messageId")), str(data.get("text", ""))
        if message_id not in self._shown:
            self._end_line()
            self._shown[message_id] = ""
            self._write("assistant: ")
        elif self._open != message_id:
            # Its line was ended by another event: start it again, whole so far.
            self._end_line()
            self._write("assistant: " + self._shown[message_id])
        self._open = message_id
        self._shown[message_id] += text
        self._write(text)

    def lines(self, event: dict[str, Any]) -> list[str]:
        """What to print for one server event, given what was streamed."""
        if self._open is not None and event.get("type") not in self._ENDING:
            self._held += render(event)
            return []
        data = event.get("data") or {}
        shown = self._shown.pop(str(data.get("messageId")), None) if event.get("type") == "message" else None
        self._end_line()
        lines = render(event)
        if shown is not None and shown == (data.get("content") or "") and lines and shown:
            lines = lines[1:]  # the text is on screen already
        held, self._held = self._held, []
        return lines + held

    def _end_line(self) -> None:
        if self._open is not None:
            self._write("\n")
            self._open = None


def _stdout(text: str) -> None:
    print(text, end="", flush=True)


Opening = tuple[str, str | None, dict[str, Any]]


def _opening(payload: dict[str, Any], side_of: str | None, mode: str) -> Opening:
    """The request that starts the chat: a new session, or a side task of `side_of`."""
    if side_of is None:
        return "create_session", None, payload
    return "create_side_session", side_of, {**payload, "contextMode": mode}


def _on_frame(tools: LocalTools | None) -> Callable[[Frame], bool]:
    """Tool requests to the LOCAL tools; errors not answering a request are shown."""

    def take(frame: Frame) -> bool:
        if tools is not None and tools.on_frame(frame):
            return True
        if frame.get("type") == "error":
            print(f"error: {frame.get('data')}", file=sys.stderr)
            return True
        return False

    return take


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _converse(
    conn: Connection, message: str, session: str | None, opening: Opening, streamed: Streamed
) -> int:
    turn = _Turn(message)
    if session:
        await conn.subscribe(session)
        reply = await conn.request("send_message", session, opening[2])
    else:
        reply = await conn.request(*opening)
    if reply.get("type") == "error":
        print(f"error: {reply.get('data')}", file=sys.stderr)
        return 2
    ack = reply.get("data") or {}
    session = session or str(ack.get("sessionId"))
    conn.follow(session)
    turn.message_id, turn.queued = ack.get("messageId"), bool(ack.get("queued"))
    print(f"session: {session}" + (" (queued)" if turn.queued else ""), flush=True)
    async for event in conn.stream(session, deltas=True):
        if event.get("type") == "assistant_delta":
            streamed.delta(event)
            continue
        for line in streamed.lines(event):
            print(line, flush=True)
        if (code := turn.observe(event)) is not None:
            return code
    print("error: connection closed before the turn ended", file=sys.stderr)
    return 2


async def chat(
    base_url: str,
    token: str,
    message: str,
    session: str | None,
    side_of: str | None = None,
    mode: str = "none",
    local: Path | None = None,
    state_dir: Path | None = None,
) -> int:
    """One turn. With `local`, a LOCAL client too: the new session is LOCAL, tool requests
    run in that directory, and a dropped socket is reconnected (hello and subscriptions
    again) until the turn ends."""
    payload: dict[str, Any] = {"content": message, "clientMessageId": uuid.uuid4().hex}
    tools = None
    if local is not None:
        tools = LocalTools(local, RequestJournal(default_path(local, state_dir)), _stderr)
        if session is None and side_of is None:
            payload["executionMode"] = "LOCAL"
    conn = Connection(base_url, token, reconnect=tools is not None, keep_duplicates=False)
    if tools is not None:
        tools.attach(conn)
    streamed = Streamed()
    conn.on_frame = _on_frame(tools)
    try:
        await conn.start()
        return await _converse(conn, message, session, _opening(payload, side_of, mode), streamed)
    finally:
        await conn.close()
        if tools is not None:
            await tools.close()


def run_chat(
    base_url: str,
    token: str,
    message: str,
    session: str | None,
    timeout: float,
    *,
    side_of: str | None = None,
    mode: str = "none",
    local: Path | None = None,
    state_dir: Path | None = None,
) -> int:
    try:
        turn = chat(base_url, token, message, session, side_of, mode, local, state_dir)
        return asyncio.run(asyncio.wait_for(turn, timeout))
    except TimeoutError:
        print(f"error: no end of turn within {timeout:g}s", file=sys.stderr)
        return 3
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError, Lost, WebSocketException) as exc:
        print(f"error: {exc or type(exc).__name__}", file=sys.stderr)
        return 2
