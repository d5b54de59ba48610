"""One client connection to the gateway's WebSocket (DESIGN §7).

Requests are matched to their reply by `id` (`ack`; an `error` raises `ServerError`; a
drop raises `Lost`); session events are kept per session with their positions (the
`EventLog`) and can be followed as a `stream`. With `reconnect`, a dropped socket is opened
again with backoff, `on_connect` runs again (a LOCAL client's `hello`) and every followed
session is subscribed again with `afterPosition` = the last position held, so its stream
goes on without a gap. Waits end on a condition, never on a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from websockets.exceptions import WebSocketException

from muster_client.frames import Frame, Lost, ServerError, request_frame
from muster_client.transport import OnFrame, Transport

OnConnect = Callable[["Connection"], Awaitable[None]]


class Connection(Transport):
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
        super().__init__(
            url, token, reconnect=reconnect, keep_duplicates=keep_duplicates, on_frame=on_frame,
            min_delay=min_delay, max_delay=max_delay,
        )
        self.on_connect = on_connect
        self.subscribed: set[str] = set()
        self.hook_error: BaseException | None = None
        self._ids = itertools.count(1)

    async def start(self, within: float = 60.0) -> None:
        """Connected and `on_connect` done; an error `on_connect` raised is raised here."""
        await super().start(within)
        if self.hook_error is not None:
            raise self.hook_error

    async def _opened(self) -> None:
        """`on_connect` first (a LOCAL client's `hello`), then the subscriptions again."""
        self.hook_error = None
        if self.on_connect is not None:
            try:
                await self.on_connect(self)
            except (Lost, TimeoutError, WebSocketException):
                pass  # the socket is going; the next open runs the hook again
            except Exception as exc:  # reported by start(); the connection stays usable
                self.hook_error = exc
        for session_id in list(self.subscribed):
            with contextlib.suppress(Lost, TimeoutError, ServerError, WebSocketException):
                await self._subscribe_once(session_id, self._resume.get(session_id, 0))

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

    async def stream(self, session_id: str, *, deltas: bool = False) -> AsyncIterator[Frame]:
        """Every event of the session held or still to come, in arrival order (with
        `deltas`, the `assistant_delta` previews among them); ends when the connection is
        gone for good."""
        frames = self.log.timeline if deltas else self.log.events
        index = 0
        while True:
            held = frames[session_id]
            while index < len(held):
                index += 1
                yield held[index - 1]
            if self.finished:
                return
            await self.wait_for(functools.partial(self._beyond, frames, session_id, index), None)

    def _beyond(self, frames: dict[str, list[Frame]], session_id: str, count: int) -> bool:
        return len(frames[session_id]) > count or self.finished
