"""One client connection to the gateway's WebSocket.

Requests are matched to their reply (`ack`, `error`, `pong`) by `id`; session events go to
an `EventLog` by session and position; anything else (a `tool_request`, an error without
`id`) goes to the `on_frame` hook, or else to `unmatched`. With `reconnect`, a dropped socket
is opened again with backoff, `on_connect` runs again (a LOCAL client's `hello`) and every
subscribed session is subscribed again with `afterPosition` = the last position held, so
the stream goes on without a gap. Waits end on a condition, never on a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from muster_client.events import EventLog
from muster_client.frames import REPLIES, Frame, Lost, ServerError, is_event, parse, request_frame, ws_url

MAX_SIZE = 16 * 1024 * 1024
UNAUTHORIZED_CLOSE = 4401
STABLE_AFTER = 5.0  # a socket that lived this long resets the reconnect backoff
OnConnect = Callable[["Connection"], Awaitable[None]]
OnFrame = Callable[[Frame], bool]


class Connection:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        reconnect: bool = False,
        keep_duplicates: bool = True,
        on_connect: OnConnect | None = None,
        on_frame: OnFrame | None = None,
        min_delay: float = 0.2,
        max_delay: float = 5.0,
    ) -> None:
        self.url = ws_url(url, token)
        self.reconnect = reconnect
        self.on_connect, self.on_frame = on_connect, on_frame
        self.min_delay, self.max_delay = min_delay, max_delay
        self.log = EventLog(keep_duplicates)
        self.unmatched: list[Frame] = []
        self.subscribed: set[str] = set()
        self.connects = 0
        self.close_code: int | None = None
        self.hook_error: BaseException | None = None
        self._resume: dict[str, int] = {}
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._ready = asyncio.Event()
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._replies: dict[str, asyncio.Future[Frame]] = {}
        self._task: asyncio.Task[None] | None = None
        self._gone = False

    @property
    def events(self) -> dict[str, list[Frame]]:
        return self.log.events

    @property
    def finished(self) -> bool:
        """The connection is gone for good (closed, or dropped without `reconnect`)."""
        return self._gone

    # -- lifecycle -------------------------------------------------------------------
    async def start(self, within: float = 60.0) -> None:
        """Connect (without `reconnect` a failure raises) and wait until `on_connect` ran."""
        first = None if self.reconnect else await self._open()
        self._task = asyncio.create_task(self._run(first))
        await self.wait_for(lambda: self._ready.is_set() or self._gone, within)
        if self._gone and not self._ready.is_set():
            raise Lost()
        if self.hook_error is not None:
            raise self.hook_error

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()

    async def _open(self) -> ClientConnection:
        return await connect(self.url, max_size=MAX_SIZE, open_timeout=10)

    async def _run(self, ws: ClientConnection | None) -> None:
        try:
            await self._loop(ws)
        finally:
            self._gone = True
            async with self._changed:
                self._changed.notify_all()

    async def _loop(self, ws: ClientConnection | None) -> None:
        delay = self.min_delay
        while True:
            if ws is None:
                try:
                    ws = await self._open()
                except (OSError, TimeoutError, WebSocketException):
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.max_delay)
                    continue
            opened = asyncio.get_running_loop().time()
            await self._serve(ws)
            ws = None
            if not self.reconnect or self.close_code == UNAUTHORIZED_CLOSE:
                return
            if asyncio.get_running_loop().time() - opened >= STABLE_AFTER:
                delay = self.min_delay
            else:  # closed right after opening (e.g. a gateway shutting down): back off
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_delay)

    async def _serve(self, ws: ClientConnection) -> None:
        self._ws, self.close_code = ws, None
        self.connects += 1
        self._connected.set()
        hooks = asyncio.create_task(self._after_connect())
        try:
            async for raw in ws:
                if (frame := parse(raw)) is not None:
                    await self._dispatch(frame)
        except ConnectionClosed:
            pass
        finally:
            self.close_code = ws.close_code
            self._connected.clear()
            self._ready.clear()
            hooks.cancel()
            for future in self._replies.values():
                if not future.done():
                    future.set_exception(Lost())
            self._replies.clear()
            async with self._changed:
                self._changed.notify_all()

    async def _after_connect(self) -> None:
        """`on_connect` first (a LOCAL client's `hello`), then the subscriptions again."""
        self.hook_error = None
        if self.on_connect is not None:
            try:
                await self.on_connect(self)
            except (Lost, TimeoutError, WebSocketException):
                pass
            except Exception as exc:  # reported by start(); the connection stays usable
                self.hook_error = exc
        for session_id in list(self.subscribed):
            with contextlib.suppress(Lost, TimeoutError, ServerError, WebSocketException):
                await self._subscribe_once(session_id, self._resume.get(session_id, 0))
        self._ready.set()
        async with self._changed:
            self._changed.notify_all()

    async def _dispatch(self, frame: Frame) -> None:
        frame_id = str(frame["id"]) if "id" in frame else None
        future = self._replies.get(frame_id) if frame_id is not None else None
        if future is not None and frame.get("type") in REPLIES:
            del self._replies[str(frame_id)]
            if not future.done():
                future.set_result(frame)
        elif is_event(frame):
            self.log.add(frame)
            session_id = str(frame["sessionId"])
            self._resume[session_id] = max(self._resume.get(session_id, 0), int(frame["position"]))
        elif self.on_frame is None or not self.on_frame(frame):
            self.unmatched.append(frame)
        async with self._changed:
            self._changed.notify_all()

    # -- requests --------------------------------------------------------------------
    async def send_raw(self, text: str | bytes) -> None:
        if self._ws is None or not self._connected.is_set():
            raise Lost()
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise Lost() from exc

    async def request(
        self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None, *,
        within: float = 15.0,
    ) -> Frame:
        """Send one frame and return its reply (ack, error or pong). Raises `Lost` when the
        socket drops first (a reconnecting client waits up to `within` for a socket)."""
        if not self._connected.is_set():
            if not self.reconnect or self.finished:
                raise Lost()
            try:
                await asyncio.wait_for(self._connected.wait(), within)
            except TimeoutError as exc:
                raise Lost() from exc
        frame_id = f"r{next(self._ids)}"
        future: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._replies[frame_id] = future
        try:
            await self.send_raw(json.dumps(request_frame(type_, frame_id, session_id, data)))
            return await asyncio.wait_for(future, within)
        finally:
            self._replies.pop(frame_id, None)

    async def ack(
        self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None, *,
        within: float = 15.0,
    ) -> dict[str, Any]:
        """The `data` of the ack; an `error` reply raises `ServerError`."""
        reply = await self.request(type_, session_id, data, within=within)
        if reply.get("type") == "error":
            raise ServerError(type_, dict(reply.get("data") or {}))
        return dict(reply.get("data") or {})

    async def ping(self, within: float = 15.0) -> bool:
        return (await self.request("ping", within=within)).get("type") == "pong"

    async def subscribe(self, session_id: str, after_position: int | None = None) -> dict[str, Any]:
        """Follow a session (again after every reconnect). `after_position`: first every
        stored event after it; None: live from now."""
        self.subscribed.add(session_id)
        return await self._subscribe_once(session_id, after_position)

    def follow(self, session_id: str) -> None:
        """Track a session this socket is already subscribed to (one it created)."""
        self.subscribed.add(session_id)

    async def _subscribe_once(self, session_id: str, after: int | None) -> dict[str, Any]:
        data = None if after is None else {"afterPosition": after}
        ack = await self.ack("subscribe", session_id, data)
        if isinstance(ack.get("position"), int):
            self._resume[session_id] = max(self._resume.get(session_id, 0), ack["position"])
        return ack

    # -- waiting ---------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], bool], within: float | None = 60.0) -> None:
        """Until `predicate` holds; TimeoutError after `within` seconds (None: no limit)."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), within)

    async def stream(self, session_id: str) -> AsyncIterator[Frame]:
        """Every event of the session held or still to come, in arrival order; ends when
        the connection is gone for good."""
        index = 0
        while True:
            events = self.log.events[session_id]
            while index < len(events):
                index += 1
                yield events[index - 1]
            if self.finished:
                return
            await self.wait_for(functools.partial(self._beyond, session_id, index), None)

    def _beyond(self, session_id: str, count: int) -> bool:
        return len(self.log.events[session_id]) > count or self.finished
