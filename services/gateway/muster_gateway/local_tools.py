"""LOCAL clients: the sockets that said `hello {localTools: true}`, by user, and the tool
requests each was sent.

A tool request lives in `session_waits` until its result is recorded, so nothing here has
to survive a restart: a client that connects (or reconnects after any restart) is sent
every outstanding request of its user once; a request made while it is connected reaches
it when `muster.events` rings (`ToolRequested`), or at the next poll if the broker lost
that. Each socket is sent each request once; the client dedups by `requestId` across its
reconnects, and the first result counts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, Protocol
from uuid import UUID

from muster_contracts.tool_arguments import arguments_text, shown_arguments

from muster_gateway.read_port import ClientReads

log = logging.getLogger("muster.gateway.local")


class LocalSink(Protocol):
    user_id: str

    def push(self, frame: dict[str, Any]) -> bool: ...


class LocalTools:
    def __init__(self, reads: ClientReads, *, poll_interval_s: float = 5.0) -> None:
        self._reads = reads
        self._poll_interval_s = poll_interval_s
        self._sent: dict[str, dict[LocalSink, set[UUID]]] = {}  # user → socket → request ids
        self._tasks: set[asyncio.Task[None]] = set()

    def connected(self) -> int:
        return sum(len(sockets) for sockets in self._sent.values())

    async def attach(self, client: LocalSink) -> int:
        """Register a LOCAL client and send it every outstanding request of its user."""
        self._sent.setdefault(client.user_id, {}).setdefault(client, set())
        sent = await self._send_outstanding(client.user_id)
        log.info("local_client_attached user_sockets=%d sent=%d", len(self._sent[client.user_id]), sent)
        return sent

    def detach(self, client: LocalSink) -> None:
        sockets = self._sent.get(client.user_id)
        if sockets is not None and sockets.pop(client, None) is not None and not sockets:
            del self._sent[client.user_id]

    def requested(self, session_id: str) -> None:
        """A `ToolRequested` was recorded on `session_id`: send it to its user's clients."""
        if not self._sent:
            return
        task = asyncio.create_task(self._after_request(session_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _after_request(self, session_id: str) -> None:
        try:
            user_id = await self._reads.session_owner(UUID(session_id))
            if user_id is not None and user_id in self._sent:
                await self._send_outstanding(user_id)
        except Exception as exc:  # the poll sends it later
            log.warning("local_request_send_failed error=%s", type(exc).__name__)

    async def run_poller(self) -> None:
        """The backstop for a lost `muster.events` record."""
        while True:
            await asyncio.sleep(self._poll_interval_s)
            for user_id in list(self._sent):
                await self._send_outstanding(user_id)

    async def _send_outstanding(self, user_id: str) -> int:
        rows = await self._reads.outstanding_tool_requests(user_id)
        return self._push(user_id, rows)

    def _push(self, user_id: str, rows: Iterable[Any]) -> int:
        # No await from here on: the check and the mark of a request are one step, so two
        # concurrent sends never give a socket the same request twice.
        pushed = 0
        for row in rows:
            for client, sent in self._sent.get(user_id, {}).items():
                if row["wait_id"] in sent:
                    continue
                sent.add(row["wait_id"])
                pushed += client.push(_request_frame(row))
        return pushed

    async def settled(self) -> None:
        """Until the sends that rings started have finished."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.settled()


def _request_frame(row: Any) -> dict[str, Any]:
    detail = row["detail"]
    return {
        "type": "tool_request",
        "sessionId": str(row["session_id"]),
        "data": {
            "requestId": str(row["wait_id"]),
            "toolCallId": row["tool_call_id"],
            "name": detail["name"],
            # Parsed from the text on every send, so a re-sent request matches the first.
            "arguments": shown_arguments(arguments_text(detail["arguments"])),
        },
    }
