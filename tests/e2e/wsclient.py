"""A small real WebSocket client for the tests: requests matched to replies by `id`,
server events collected per session, waits that end on an event (never on a sleep)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import httpx
import websockets

Frame = dict[str, Any]
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


def script(*steps: dict[str, Any]) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def request_frame(type_: str, frame_id: str, session_id: str | None, data: dict[str, Any] | None) -> Frame:
    """A client → server frame; `sessionId` and `data` only when given."""
    frame: Frame = {"type": type_, "id": frame_id}
    if session_id is not None:
        frame["sessionId"] = session_id
    if data is not None:
        frame["data"] = data
    return frame


class Client:
    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._replies: dict[str, asyncio.Future[Frame]] = {}
        self.events: dict[str, list[Frame]] = defaultdict(list)
        self.unmatched: list[Frame] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, ws_url: str, token: str) -> Client:
        ws = await websockets.connect(f"{ws_url}?token={token}", max_size=16 * 1024 * 1024)
        return cls(ws)

    async def close(self) -> None:
        self._reader.cancel()
        await self.ws.close()

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = json.loads(raw)
            future = self._replies.pop(str(frame.get("id")), None) if "id" in frame else None
            if future is not None and frame["type"] in ("ack", "error", "pong"):
                future.set_result(frame)
            elif "position" in frame:
                self.events[frame["sessionId"]].append(frame)
            else:
                self.unmatched.append(frame)
            async with self._changed:
                self._changed.notify_all()

    async def send_raw(self, text: str | bytes) -> None:
        await self.ws.send(text)

    async def request(self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None,
                      timeout: float = 15) -> Frame:
        frame_id = f"r{next(self._ids)}"
        future: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._replies[frame_id] = future
        await self.ws.send(json.dumps(request_frame(type_, frame_id, session_id, data)))
        return await asyncio.wait_for(future, timeout)

    async def ack(self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = await self.request(type_, session_id, data)
        assert reply["type"] == "ack", reply
        return dict(reply.get("data") or {})

    async def next_unmatched(self, timeout: float = 10) -> Frame:
        await self.wait_for(lambda: bool(self.unmatched), timeout)
        return self.unmatched.pop(0)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    def phases(self, session_id: str) -> list[str]:
        return [e["data"]["phase"] for e in self.events[session_id] if e["type"] == "session_status"]

    async def wait_phase(self, session_id: str, phases: tuple[str, ...] = TERMINAL, timeout: float = 60,
                         count: int = 1) -> str:
        def reached() -> bool:
            return sum(p in phases for p in self.phases(session_id)) >= count

        await self.wait_for(reached, timeout)
        return [p for p in self.phases(session_id) if p in phases][count - 1]

    async def run_turn(self, content: str, timeout: float = 60) -> str:
        """Create a session with `content` and wait for its turn to end; returns its id."""
        created = await self.ack("create_session", data={"content": content})
        session_id = str(created["sessionId"])
        await self.wait_phase(session_id, timeout=timeout)
        return session_id


class Rest:
    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=15)

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.http.get(path, params=params)

    async def json(self, path: str, **params: Any) -> Any:
        response = await self.get(path, **params)
        assert response.status_code == 200, response.text
        return response.json()

    async def messages(self, session_id: str, **params: Any) -> list[dict[str, Any]]:
        body = await self.json(f"/v1/sessions/{session_id}/messages", rounds=1000, **params)
        return list(body["items"])

    async def close(self) -> None:
        await self.http.aclose()
