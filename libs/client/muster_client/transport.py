"""The socket under a `Connection`: open it (again, with backoff, when `reconnect`), read
every frame and route it, fail the requests a drop leaves without a reply.

Replies (`ack`, `error`, `pong`) resolve the request waiting on their `id`; session events
and `assistant_delta` previews go to the `EventLog`; anything else goes to the `on_frame`
hook (a LOCAL client's `tool_request`) or else to `unmatched`. After each open, `_opened`
runs (the `Connection` says `hello` and subscribes again there) before the transport counts
as ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from muster_client.events import EventLog
from muster_client.frames import REPLIES, Frame, Lost, is_event, parse, ws_url

MAX_SIZE = 16 * 1024 * 1024
UNAUTHORIZED_CLOSE = 4401  # a rejected token: reconnecting cannot help
STABLE_AFTER = 5.0  # a socket that lived this long resets the reconnect backoff
OnFrame = Callable[[Frame], bool]


class Transport:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        reconnect: bool = False,
        keep_duplicates: bool = True,
        on_frame: OnFrame | None = None,
        min_delay: float = 0.2,
        max_delay: float = 5.0,
    ) -> None:
        self.url = ws_url(url, token)
        self.reconnect = reconnect
        self.on_frame = on_frame
        self.min_delay, self.max_delay = min_delay, max_delay
        self.log = EventLog(keep_duplicates)
        self.unmatched: list[Frame] = []
        self.connects = 0
        self.close_code: int | None = None
        self._resume: dict[str, int] = {}  # session -> the highest position held
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._ready = asyncio.Event()
        self._changed = asyncio.Condition()
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

    async def _opened(self) -> None:
        """Runs after every open, before the transport is ready."""

    async def start(self, within: float = 60.0) -> None:
        """Connect (without `reconnect` a failure raises) and wait until `_opened` ran."""
        first = None if self.reconnect else await self._open()
        self._task = asyncio.create_task(self._run(first))
        await self.wait_for(lambda: self._ready.is_set() or self._gone, within)
        if self._gone and not self._ready.is_set():
            raise Lost()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()

    async def send_raw(self, text: str | bytes) -> None:
        if self._ws is None or not self._connected.is_set():
            raise Lost()
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise Lost() from exc

    async def wait_for(self, predicate: Callable[[], bool], within: float | None = 60.0) -> None:
        """Until `predicate` holds; TimeoutError after `within` seconds (None: no limit)."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), within)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _open(self) -> ClientConnection:
        return await connect(self.url, max_size=MAX_SIZE, open_timeout=10)

    async def _run(self, ws: ClientConnection | None) -> None:
        try:
            await self._loop(ws)
        finally:
            self._gone = True
            await self._notify()

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
        opened = asyncio.create_task(self._when_opened())
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
            opened.cancel()
            for future in self._replies.values():
                if not future.done():
                    future.set_exception(Lost())
            self._replies.clear()
            await self._notify()

    async def _when_opened(self) -> None:
        await self._opened()
        self._ready.set()
        await self._notify()

    async def _dispatch(self, frame: Frame) -> None:
        frame_id = str(frame["id"]) if "id" in frame else None
        future = self._replies.get(frame_id) if frame_id is not None else None
        if frame_id is not None and future is not None and frame.get("type") in REPLIES:
            del self._replies[frame_id]
            if not future.done():
                future.set_result(frame)
        elif is_event(frame):
            self.log.add(frame)
            session_id = str(frame["sessionId"])
            self._resume[session_id] = max(self._resume.get(session_id, 0), int(frame["position"]))
        elif frame.get("type") == "assistant_delta" and isinstance(frame.get("sessionId"), str):
            self.log.add_delta(frame)
        elif self.on_frame is None or not self.on_frame(frame):
            self.unmatched.append(frame)
        await self._notify()
