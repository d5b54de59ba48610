"""The two units of work under one contract (as the eventsourcing library tests its
recorders): `work` is a PostgreSQL one on a fresh database, then an in-memory one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_runtime.messaging import dispatch
from muster_runtime.process.db import create_pool
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from tests.databases import fresh_database_url
from tests.unit.runtime.fakes import Producer

Factory = Callable[[], AbstractUnitOfWork]


class Harness:
    """A factory of units of work plus a way to see what was sent after commit and which
    file contents are stored (the unit of work stores them but has no read of its own)."""

    def __init__(
        self,
        factory: Factory,
        sent: Callable[[], list[UUID]],
        blob: Callable[[str], Awaitable[str | None]] | None = None,
    ) -> None:
        self.uow = factory
        self.sent = sent
        self.blob = blob


@pytest.fixture(params=["memory", "postgres"])
async def work(request: pytest.FixtureRequest, postgres_server_url: str) -> AsyncIterator[Harness]:
    if request.param == "memory":
        store = MemoryStore()

        async def kept(digest: str) -> str | None:
            return store.state.blobs.get(digest)

        yield Harness(store.uow, lambda: [m.message_id for _, _, m in store.sent], kept)
        return
    async with fresh_database_url(postgres_server_url, "uow") as url:
        pool: Any = await create_pool(url)
        capture = Producer()
        dispatch.install(dispatch.Dispatcher(capture, pool))
        try:

            def sent() -> list[UUID]:
                bodies = [json.loads(v) for v in capture.sent]
                return [UUID(b["message_id"]) for b in bodies if "message_id" in b]

            async def stored(digest: str) -> str | None:
                content: str | None = await pool.fetchval("SELECT content FROM blobs WHERE sha256 = $1", digest)
                return content

            yield Harness(lambda: PostgresUnitOfWork(pool), sent, stored)
        finally:
            dispatch.install(None)
            await pool.close()


def created(session_id: UUID) -> ev.SessionCreated:
    return ev.SessionCreated(session_id=session_id, user_id="u", root_session_id=session_id)


def started(execution_id: UUID, parent: UUID, child: UUID, call: str, round_: int = 1) -> ev.ExecutionStarted:
    return ev.ExecutionStarted(
        execution_id=execution_id, parent_session_id=parent, parent_tool_call_id=call,
        parent_message_id=uuid4(), child_session_id=child, user_id="u", agent_type="coder",
        invocation_type="DELEGATE" if round_ == 1 else "FOLLOWUP", task="t", round=round_,
        start_message_id=uuid4(), deadline_at=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip


def message(seq: int) -> ev.MessageRecorded:
    return ev.MessageRecorded(message_id=uuid4(), seq=seq, role="USER", content=f"m{seq}")


async def new_session(work: Harness) -> UUID:
    session_id = uuid4()
    async with work.uow() as uow:
        await uow.append(str(session_id), [created(session_id)], expected_version=0)
    return session_id
