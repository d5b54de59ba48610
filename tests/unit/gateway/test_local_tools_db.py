"""local_tools.py against a fresh migrated PostgreSQL: a LOCAL client is sent every
outstanding request of its user once per socket, never another user's, new ones when
`muster.events` rings and, when that ring was lost, at the next poll."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_gateway.local_tools import LocalTools
from muster_gateway.postgres_reads import PostgresReads
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore


class Socket:
    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.frames: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    def push(self, frame: dict[str, Any]) -> bool:
        self.frames.append(frame)
        self.arrived.set()
        return True

    def request_ids(self) -> list[str]:
        return [f["data"]["requestId"] for f in self.frames]


async def local_session(pool: Pool, user: str) -> UUID:
    sid = uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(sid), [ev.SessionCreated(
            session_id=sid, user_id=user, root_session_id=sid, execution_mode="LOCAL")])
    return sid


async def request(pool: Pool, sid: UUID, path: str) -> UUID:
    request_id = uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(sid), [
            we.ToolRequested(request_id=request_id, tool_call_id=f"call-{path}", name="read_file",
                             arguments=json.dumps({"path": path})),
            ev.SessionPhaseChanged(phase="WAITING_CLIENT"),
        ], expected_version=None)
    return request_id


async def test_outstanding_requests_go_to_their_users_sockets_once_each(pool: Pool) -> None:
    mine, theirs = await local_session(pool, "carol"), await local_session(pool, "dave")
    first = await request(pool, mine, "a.txt")
    await request(pool, theirs, "secret.txt")
    local = LocalTools(PostgresReads(pool), poll_interval_s=3600)
    laptop, phone, other = Socket("carol"), Socket("carol"), Socket("dave-not")
    assert await local.attach(laptop) == 1
    assert await local.attach(other) == 0
    frame = laptop.frames[0]
    assert (frame["type"], frame["sessionId"]) == ("tool_request", str(mine))
    assert frame["data"] == {"requestId": str(first), "toolCallId": "call-a.txt", "name": "read_file",
                             "arguments": {"path": "a.txt"}}
    second = await request(pool, mine, "b.txt")
    local.requested(str(mine))  # the ring of its ToolRequested record
    await local.settled()
    assert len(laptop.frames) == 2
    await local.attach(phone)  # a second socket gets both, once
    local.requested(str(mine))  # a duplicate ring sends nothing twice
    await local.attach(laptop)  # nor does attaching the same socket again
    await local.settled()
    assert laptop.request_ids() == [str(first), str(second)]
    assert phone.request_ids() == [str(first), str(second)]
    assert other.frames == [] and local.connected() == 3
    local.detach(phone)
    assert local.connected() == 2


async def test_a_lost_ring_is_made_up_by_the_poll(pool: Pool) -> None:
    sid = await local_session(pool, "erin")
    local = LocalTools(PostgresReads(pool), poll_interval_s=0.05)
    laptop = Socket("erin")
    await local.attach(laptop)
    poller = asyncio.create_task(local.run_poller())
    try:
        request_id = await request(pool, sid, "late.txt")  # no ring
        await asyncio.wait_for(laptop.arrived.wait(), 10)
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
    assert laptop.request_ids() == [str(request_id)]

