"""`GET /v1/ws`: the client protocol of §7.

Auth failure: the handshake is accepted, then `error unauthorized` is sent and the socket is
closed with 4401, so browser clients (which cannot read a rejected handshake's status) learn
why. Frames of a socket are handled one at a time, in arrival order (messages queue in the
order sent); everything a socket receives goes through one ordered queue, so an `ack`
always precedes the events of the subscription it acknowledges.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import uuid4

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from muster_runtime.process import tracing
from muster_runtime.store import lineage
from starlette.websockets import WebSocketDisconnect

from muster_gateway import commands, limits, origin, side_sessions, ws_waits
from muster_gateway.auth import bearer_token
from muster_gateway.context import Gateway, gateway_of
from muster_gateway.errors import GatewayError, rest_body, ws_frame
from muster_gateway.fanout import Cursor
from muster_gateway.ids import parse_session_id
from muster_gateway.protocol import Frame, FrameError, parse_frame

log = logging.getLogger("muster.gateway.ws")
router = APIRouter()

MAX_PENDING = 10_000  # frames queued for one client before it counts as too slow
CLOSE_UNAUTHORIZED = 4401
CLOSE_TOO_SLOW = 1013  # "try again later": reconnect and resubscribe with afterPosition
CLOSE_FORBIDDEN_ORIGIN = 4403  # refused before the handshake completes: HTTP 403
CLOSE_TRY_AGAIN = 1013


class Client:
    """One socket's outgoing side; the hub's `Sink`."""

    def __init__(self, ws: WebSocket, user_id: str) -> None:
        self.ws = ws
        self.user_id = user_id
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._open = True

    def push(self, frame: dict[str, Any]) -> bool:
        if not self._open:
            return False
        if self._queue.qsize() >= MAX_PENDING:
            # Dropping a frame would leave a gap; better to make the client resubscribe.
            self._open = False
            self._queue.put_nowait(None)
            return False
        self._queue.put_nowait(frame)
        return True

    def reply(self, frame_type: str, frame_id: Any, data: dict[str, Any] | None) -> None:
        frame: dict[str, Any] = {"type": frame_type}
        if frame_id is not None:
            frame["id"] = frame_id
        if data is not None:
            frame["data"] = data
        self.push(frame)

    async def write(self) -> None:
        while (frame := await self._queue.get()) is not None:
            # `json`, not orjson: a frame echoes the client's id as it was sent, and orjson
            # would turn a non-finite number in it into null.
            await self.ws.send_text(json.dumps(frame, separators=(",", ":")))
        await self.ws.close(CLOSE_TOO_SLOW, "client too slow; resubscribe with afterPosition")


Handler = Callable[[Gateway, Client, Frame], Awaitable[None]]


async def _create_session(gw: Gateway, client: Client, frame: Frame) -> None:
    ack = await commands.create_session(
        gw.uows, client.user_id, frame.data, gw.settings.workspaces_dir, turns=await gw.admission.turns()
    )
    if "messageId" in ack:  # its first turn started
        gw.admission.turn_started(ack["sessionId"])
    client.reply("ack", frame.id, ack)
    gw.hub.subscribe(client, ack["sessionId"], Cursor(0, 0))  # all of its events, in order


async def _create_side_session(gw: Gateway, client: Client, frame: Frame) -> None:
    assert frame.session_id is not None
    ack = await side_sessions.create_side_session(
        gw.uows, client.user_id, frame.session_id, frame.data, turns=await gw.admission.turns()
    )
    gw.admission.turn_started(ack["sessionId"])
    client.reply("ack", frame.id, ack)
    gw.hub.subscribe(client, ack["sessionId"], Cursor(0, 0))  # all of its events, in order


async def _send_message(gw: Gateway, client: Client, frame: Frame) -> None:
    assert frame.session_id is not None
    ack = await commands.send_message(
        gw.uows, client.user_id, frame.session_id, frame.data, turns=await gw.admission.turns()
    )
    if not ack["queued"] and not ack.get("duplicate"):  # it started a turn (not queued input)
        gw.admission.turn_started(str(parse_session_id(frame.session_id)))
    client.reply("ack", frame.id, ack)


async def _cancel(gw: Gateway, client: Client, frame: Frame) -> None:
    assert frame.session_id is not None
    client.reply("ack", frame.id, await commands.cancel(gw.uows, client.user_id, frame.session_id))


async def _subscribe(gw: Gateway, client: Client, frame: Frame) -> None:
    assert frame.session_id is not None
    session_id = str(parse_session_id(frame.session_id))
    if gw.hub.is_subscribed(client, session_id):
        client.reply("ack", frame.id, {})
        return
    session_id, cursor = await gw.reads.subscription_cursor(
        client.user_id, frame.session_id, frame.data.afterPosition
    )
    client.reply("ack", frame.id, {"position": cursor.position})
    gw.hub.subscribe(client, session_id, cursor)


async def _unsubscribe(gw: Gateway, client: Client, frame: Frame) -> None:
    assert frame.session_id is not None
    session_id = str(parse_session_id(frame.session_id))
    if not gw.hub.is_subscribed(client, session_id):
        await gw.reads.owned_session_id(client.user_id, session_id)  # foreign → not_found
    gw.hub.unsubscribe(client, session_id)
    client.reply("ack", frame.id, {})


async def _ping(gw: Gateway, client: Client, frame: Frame) -> None:
    client.reply("pong", frame.id, None)


HANDLERS: dict[str, Handler] = {
    "create_session": _create_session,
    "send_message": _send_message,
    "create_side_session": _create_side_session,
    "cancel": _cancel,
    "subscribe": _subscribe,
    "unsubscribe": _unsubscribe,
    "ping": _ping,
    "answer_approval": ws_waits.answer_approval,
    "answer_question": ws_waits.answer_question,
    "tool_result": ws_waits.tool_result,
    "hello": ws_waits.hello,
}


# Frames that write, and so cause work elsewhere: each is the root of a trace.
TRACED = frozenset({"create_session", "send_message", "create_side_session", "cancel"})
# Frames that start work: each spends one of the user's messages a minute (`limits.py`).
# Cancel, answers and tool results never do: they end or unblock admitted work.
RATED = frozenset({"create_session", "send_message", "create_side_session"})


async def _serve(gw: Gateway, client: Client, raw: str | bytes) -> None:
    started = time.perf_counter()
    frame_type, frame_id = "invalid", None
    try:
        frame = parse_frame(raw)
        frame_type, frame_id = frame.type, frame.id
        gw.metrics.frame(frame_type)
        if frame.type in RATED:
            gw.admission.rates.admit(client.user_id)
        if frame.type in TRACED:
            # The root of the trace, and of the lineage, of everything this frame causes
            # (ADR 0017); a frame that posts input names that input instead.
            root = lineage.root(uuid4())
            with (
                tracing.server_span(f"ws {frame.type}", {"muster.frame_type": frame.type}),
                lineage.caused_by(root),
            ):
                await HANDLERS[frame.type](gw, client, frame)
        else:
            await HANDLERS[frame.type](gw, client, frame)
    except (FrameError, GatewayError) as exc:
        if isinstance(exc, FrameError):
            gw.metrics.frame("invalid")
            frame_id = exc.frame_id
        gw.metrics.errors.labels(exc.code).inc()
        retry_after_ms = exc.retry_after_ms if isinstance(exc, GatewayError) else None
        client.push(ws_frame(exc.code, exc.message, frame_id, retry_after_ms))
    except Exception as exc:
        log.error("ws_frame_failed type=%s error=%s", frame_type, type(exc).__name__, exc_info=exc)
        gw.metrics.errors.labels("internal").inc()
        client.push(ws_frame("internal", "internal error", frame_id))
    finally:
        gw.metrics.command_seconds.labels(frame_type).observe(time.perf_counter() - started)


@router.websocket("/v1/ws")
async def websocket(ws: WebSocket) -> None:
    gw = gateway_of(ws.app)
    allowed: frozenset[str] = getattr(ws.app.state, "allowed_origins", frozenset())
    if not origin.origin_allowed(ws.headers.get("origin"), ws.headers.get("host"), allowed):
        gw.metrics.errors.labels("forbidden_origin").inc()
        await ws.close(CLOSE_FORBIDDEN_ORIGIN, "origin not allowed")
        return
    offered = origin.offered_protocols(ws.headers.get("sec-websocket-protocol"))
    token = (
        ws.query_params.get("token")
        or bearer_token(ws.headers.get("authorization"))
        or origin.subprotocol_token(offered)
    )
    user_id = gw.auth.user_for(token)
    if user_id is not None and not gw.admission.sockets.open(user_id):
        await _refuse_socket(gw, ws)
        return
    try:
        await _connected(gw, ws, user_id, offered)
    finally:
        if user_id is not None:
            gw.admission.sockets.close(user_id)


async def _refuse_socket(gw: Gateway, ws: WebSocket) -> None:
    """Over `MUSTER_USER_MAX_SOCKETS`: the handshake is answered 429 with `Retry-After`."""
    gw.metrics.errors.labels("quota_exceeded").inc()
    retry_ms = limits.SOCKETS_RETRY_AFTER_S * 1000
    message = f"more than {gw.admission.limits.max_sockets} open WebSockets for this user"
    response = JSONResponse(
        rest_body("quota_exceeded", message, retry_ms),
        status_code=429,
        headers={"Retry-After": str(limits.SOCKETS_RETRY_AFTER_S)},
    )
    try:
        await ws.send_denial_response(response)
    except RuntimeError:  # a server without the denial extension: refused all the same (403)
        await ws.close(CLOSE_TRY_AGAIN, "too many open sockets")


async def _connected(gw: Gateway, ws: WebSocket, user_id: str | None, offered: list[str]) -> None:
    await ws.accept(subprotocol=origin.SUBPROTOCOL if origin.SUBPROTOCOL in offered else None)
    if user_id is None:
        gw.metrics.errors.labels("unauthorized").inc()
        await ws.send_text(json.dumps(ws_frame("unauthorized", "missing or invalid token")))
        await ws.close(CLOSE_UNAUTHORIZED, "unauthorized")
        return
    client = Client(ws, user_id)
    writer = asyncio.create_task(client.write())
    gw.metrics.connections.inc()
    try:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                break
            text, data = message.get("text"), message.get("bytes")
            await _serve(gw, client, text if text is not None else data or b"")
    except WebSocketDisconnect:
        pass
    finally:
        gw.hub.drop(client)
        gw.local.detach(client)
        gw.metrics.connections.dec()
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
