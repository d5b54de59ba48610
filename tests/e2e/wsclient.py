"""The tests' WebSocket client: a thin layer over `muster_client.Connection` (requests
matched to replies by `id`, server events collected per session, waits that end on an
event, never on a sleep), keeping the helper names the tests call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from muster_client import TERMINAL, Connection, Frame, call, request_frame, script

__all__ = ["TERMINAL", "Client", "Frame", "Rest", "call", "request_frame", "script"]


class Client:
    """One socket, no reconnect; every received event is kept (duplicates too, so a test
    can see one)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, ws_url: str, token: str) -> Client:
        conn = Connection(ws_url, token)
        await conn.start()
        return cls(conn)

    @property
    def events(self) -> dict[str, list[Frame]]:
        return self.conn.events

    @property
    def unmatched(self) -> list[Frame]:
        return self.conn.unmatched

    async def close(self) -> None:
        await self.conn.close()

    async def send_raw(self, text: str | bytes) -> None:
        await self.conn.send_raw(text)

    async def request(self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None,
                      timeout: float = 15) -> Frame:
        return await self.conn.request(type_, session_id, data, within=timeout)

    async def ack(self, type_: str, session_id: str | None = None, data: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = await self.request(type_, session_id, data)
        assert reply["type"] == "ack", reply
        return dict(reply.get("data") or {})

    async def next_unmatched(self, timeout: float = 10) -> Frame:
        await self.wait_for(lambda: bool(self.unmatched), timeout)
        return self.unmatched.pop(0)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        await self.conn.wait_for(predicate, timeout)

    def phases(self, session_id: str) -> list[str]:
        return self.conn.log.phases(session_id)

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
