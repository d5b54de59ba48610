"""A WebSocket client that survives gateway kills: it reconnects, re-subscribes every
tracked session with `afterPosition` (the last position it holds), and re-sends requests
that lost their reply. Events are kept per session; duplicates and reordering are counted."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import websockets

from tests.e2e.wsclient import request_frame

Frame = dict[str, Any]
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


class Lost(Exception):
    """The connection dropped before the reply arrived."""


class Conn:
    def __init__(self, ws_url: str, token: str) -> None:
        self.url = f"{ws_url}?token={token}"
        self.events: dict[str, list[Frame]] = defaultdict(list)
        self.last_pos: dict[str, int] = {}
        self.seen: dict[str, set[int]] = defaultdict(set)
        self.duplicates: list[tuple[str, int]] = []
        self.reordered: list[tuple[str, int]] = []
        self.subscribed: set[str] = set()
        self.connects = 0
        self._ws: Any = None
        self._connected = asyncio.Event()
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._replies: dict[str, asyncio.Future[Frame]] = {}
        self._task: asyncio.Task[None] | None = None
        self._resubscribing: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._connected.wait(), 60)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()

    # -- connection ------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                self._ws = await websockets.connect(self.url, max_size=16 * 1024 * 1024, open_timeout=5)
            except (TimeoutError, OSError, websockets.WebSocketException):
                await asyncio.sleep(0.3)
                continue
            self.connects += 1
            self._connected.set()
            self._resubscribing = [asyncio.create_task(self._resubscribe(s)) for s in list(self.subscribed)]
            try:
                async for raw in self._ws:
                    await self._on_frame(json.loads(raw))
            except websockets.WebSocketException:
                pass
            self._connected.clear()
            for future in self._replies.values():
                if not future.done():
                    future.set_exception(Lost())
            self._replies.clear()
            async with self._changed:
                self._changed.notify_all()

    async def _resubscribe(self, session_id: str) -> None:
        with contextlib.suppress(Lost, asyncio.TimeoutError, websockets.WebSocketException):
            await self._send_once(
                "subscribe", session_id, {"afterPosition": self.last_pos.get(session_id, 0)}
            )

    async def _on_frame(self, frame: Frame) -> None:
        frame_id = str(frame.get("id")) if "id" in frame else None
        future = self._replies.pop(frame_id, None) if frame_id else None
        if future is not None and not future.done():
            future.set_result(frame)
        elif "position" in frame and "sessionId" in frame:
            session_id, position = str(frame["sessionId"]), int(frame["position"])
            if position in self.seen[session_id]:
                self.duplicates.append((session_id, position))
            else:
                if position < self.last_pos.get(session_id, 0):
                    self.reordered.append((session_id, position))
                self.seen[session_id].add(position)
                self.events[session_id].append(frame)
                self.last_pos[session_id] = max(position, self.last_pos.get(session_id, 0))
        async with self._changed:
            self._changed.notify_all()

    # -- requests --------------------------------------------------------------------
    async def _send_once(
        self, type_: str, session_id: str | None, data: dict[str, Any] | None, within: float = 15.0
    ) -> Frame:
        await asyncio.wait_for(self._connected.wait(), within)
        frame_id = f"r{next(self._ids)}"
        frame = request_frame(type_, frame_id, session_id, data)
        future: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._replies[frame_id] = future
        try:
            await self._ws.send(json.dumps(frame))
        except websockets.WebSocketException as exc:
            self._replies.pop(frame_id, None)
            raise Lost() from exc
        try:
            return await asyncio.wait_for(future, within)
        finally:
            self._replies.pop(frame_id, None)

    async def request(
        self,
        type_: str,
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        *,
        retry: bool = True,
        within: float = 120.0,
    ) -> Frame:
        """Send and return the reply (ack or error); re-sent after a lost connection when
        `retry` (only for requests that are idempotent, e.g. with a clientMessageId)."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            try:
                return await self._send_once(type_, session_id, data)
            except (TimeoutError, Lost):
                if not retry or asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def subscribe(self, session_id: str) -> None:
        self.subscribed.add(session_id)
        await self.request("subscribe", session_id, {"afterPosition": self.last_pos.get(session_id, 0)})

    # -- waiting ---------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], bool], within: float) -> bool:
        """True when `predicate` held within `within` seconds, else False."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        try:
            await asyncio.wait_for(_wait(), within)
        except TimeoutError:
            return False
        return True

    def of_type(self, session_id: str, type_: str) -> list[Frame]:
        return [e for e in self.events[session_id] if e["type"] == type_]

    def turn_done(self, session_id: str, user_message_id: str) -> str | None:
        """The terminal phase of the turn that USER message `user_message_id` started."""
        start: int | None = None
        for event in self.events[session_id]:
            if event["type"] == "message" and event["data"].get("messageId") == user_message_id:
                start = event["position"]
            elif (
                start is not None and event["type"] == "session_status" and event["data"]["phase"] in TERMINAL
            ):
                return str(event["data"]["phase"])
        return None
