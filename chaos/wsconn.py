"""The chaos driver's WebSocket client: a `muster_client.Connection` that survives gateway
kills (it reconnects and re-subscribes every tracked session with `afterPosition`, the last
position it holds), plus re-sending requests that lost their reply. Events are kept once per
session; duplicates and reordering are counted for check W."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from muster_client import TERMINAL, Connection, Frame, Lost, ServerError

__all__ = ["Conn", "Lost"]


class Conn:
    def __init__(self, ws_url: str, token: str) -> None:
        self.conn = Connection(ws_url, token, reconnect=True, keep_duplicates=False, max_delay=0.3)
        log = self.conn.log
        self.events, self.last_pos, self.seen = log.events, log.last_pos, log.seen
        self.duplicates, self.reordered = log.duplicates, log.reordered

    @property
    def subscribed(self) -> set[str]:
        return self.conn.subscribed

    @property
    def connects(self) -> int:
        return self.conn.connects

    async def start(self) -> None:
        await self.conn.start(within=60)

    async def close(self) -> None:
        await self.conn.close()

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
                return await self.conn.request(type_, session_id, data, within=15.0)
            except (TimeoutError, Lost):
                if not retry or asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def subscribe(self, session_id: str) -> None:
        deadline = asyncio.get_running_loop().time() + 120.0
        while True:
            try:
                await self.conn.subscribe(session_id, self.last_pos.get(session_id, 0))
                return
            except ServerError:  # e.g. not_found: nothing to follow, as before
                return
            except (TimeoutError, Lost):
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def wait_for(self, predicate: Callable[[], bool], within: float) -> bool:
        """True when `predicate` held within `within` seconds, else False."""
        try:
            await self.conn.wait_for(predicate, within)
        except TimeoutError:
            return False
        return True

    def of_type(self, session_id: str, type_: str) -> list[Frame]:
        return self.conn.log.of_type(session_id, type_)

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
