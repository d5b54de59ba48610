"""A WebSocket client that keeps every frame exactly as the server sent it (its text), for
tests that compare payloads byte for byte; requests are matched to replies by `id`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class RawSocket:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.texts: list[str] = []
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, ws_url: str, token: str) -> RawSocket:
        return cls(await connect(f"{ws_url}?token={token}", max_size=16 * 1024 * 1024))

    async def _read(self) -> None:
        async for text in self.ws:
            async with self._changed:
                self.texts.append(text if isinstance(text, str) else text.decode())
                self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    async def ack(self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None) -> Any:
        frame_id = f"raw{next(self._ids)}"
        frame: dict[str, Any] = {"type": type_, "id": frame_id}
        if session_id is not None:
            frame["sessionId"] = session_id
        if data is not None:
            frame["data"] = data
        await self.ws.send(json.dumps(frame))
        replies: list[dict[str, Any]] = []

        def replied() -> bool:
            replies[:] = [f for f in map(json.loads, self.texts) if f.get("id") == frame_id]
            return bool(replies)

        await self.wait_for(replied, 15)
        assert replies[0]["type"] == "ack", replies[0]
        return replies[0].get("data") or {}

    def events(self, session_id: str) -> list[str]:
        """The texts of the stored events of one session (frames with a position), in order."""
        return [t for t in self.texts if _is_event_of(t, session_id)]

    def phases(self, session_id: str) -> list[str]:
        frames = [json.loads(t) for t in self.events(session_id)]
        return [f["data"]["phase"] for f in frames if f["type"] == "session_status"]

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def _is_event_of(text: str, session_id: str) -> bool:
    frame = json.loads(text)
    return frame.get("sessionId") == session_id and isinstance(frame.get("position"), int)
