"""An in-process stand-in for the gateway's WebSocket, enough to test clients: requests are
acknowledged by `id`, session events carry positions, `subscribe` replays after
`afterPosition`, `hello` re-sends the outstanding tool requests, and the test can drop
every socket (as a gateway restart does)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

Frame = dict[str, Any]


class FakeGateway:
    def __init__(self) -> None:
        self.sockets: set[ServerConnection] = set()
        self.received: list[Frame] = []
        self.stored: dict[str, list[Frame]] = defaultdict(list)
        self.position = 0
        self.hellos = 0
        self.outstanding: dict[str, Frame] = {}
        self.tool_results: list[Frame] = []
        self.url = ""
        self.paths: list[str] = []
        self.refuse_hello = False  # answer hello as a gateway without LOCAL support does

    def of_type(self, type_: str) -> list[Frame]:
        return [f for f in self.received if f.get("type") == type_]

    async def handler(self, ws: ServerConnection) -> None:
        self.sockets.add(ws)
        self.paths.append(ws.request.path if ws.request is not None else "")
        try:
            async for raw in ws:
                frame = json.loads(raw)
                self.received.append(frame)
                await self._answer(ws, frame)
        finally:
            self.sockets.discard(ws)

    async def _answer(self, ws: ServerConnection, frame: Frame) -> None:
        kind, frame_id, data = frame.get("type"), frame.get("id"), frame.get("data") or {}
        if kind == "ping":
            await ws.send(json.dumps({"type": "pong", "id": frame_id}))
        elif kind == "hello" and not self.refuse_hello:
            self.hellos += 1
            await self._ack(ws, frame_id, {})
            for request in list(self.outstanding.values()):
                await ws.send(json.dumps(request))
        elif kind == "subscribe":
            session_id = frame["sessionId"]
            after = data.get("afterPosition")
            await self._ack(ws, frame_id, {"position": self.position if after is None else after})
            for event in self.stored[session_id]:
                if after is not None and event["position"] > after:
                    await ws.send(json.dumps(event))
        elif kind == "tool_result":
            self.tool_results.append(frame)
            self.outstanding.pop(data.get("requestId"), None)
            await self._ack(ws, frame_id, {})
        elif kind == "create_session":
            await self._ack(ws, frame_id, {"sessionId": "s-new", "messageId": "m1"})
        else:
            error = {"code": "unknown_type", "message": f"unknown type {kind!r}"}
            await ws.send(json.dumps({"type": "error", "id": frame_id, "data": error}))

    async def _ack(self, ws: ServerConnection, frame_id: Any, data: Frame) -> None:
        await ws.send(json.dumps({"type": "ack", "id": frame_id, "data": data}))

    async def event(self, session_id: str, type_: str, data: Frame, *, send: bool = True) -> Frame:
        """Store an event at the next position and (with `send`) push it to every socket."""
        self.position += 1
        event = {"type": type_, "sessionId": session_id, "position": self.position, "data": data}
        self.stored[session_id].append(event)
        if send:
            await self.broadcast(event)
        return event

    async def broadcast(self, frame: Frame) -> None:
        for ws in list(self.sockets):
            await ws.send(json.dumps(frame))

    async def tool_request(self, request_id: str, name: str, arguments: Frame, session_id: str = "s1") -> None:
        """Record an outstanding request (re-sent on every hello) and send it now."""
        frame = {
            "type": "tool_request",
            "sessionId": session_id,
            "data": {"requestId": request_id, "toolCallId": f"call_{request_id}", "name": name,
                     "arguments": arguments},
        }
        self.outstanding[request_id] = frame
        await self.broadcast(frame)

    async def drop(self) -> None:
        """Close every socket, as a gateway going down does."""
        for ws in list(self.sockets):
            await ws.close(1012)


@asynccontextmanager
async def running() -> AsyncIterator[FakeGateway]:
    gateway = FakeGateway()
    async with serve(gateway.handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        gateway.url = f"ws://127.0.0.1:{port}/v1/ws"
        yield gateway
