"""An upgrade from a database the previous release wrote (MessageRecorded v2 and the wait
events v1 stored tool-call arguments as parsed objects): the projections still equal a
rebuild from the events, and every reader shows those arguments as one text — the one the
previous release showed (issue 34)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal
from uuid import UUID, uuid4

import pytest
from muster_agent import session_store as store
from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_contracts.upcasting import load_event
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store import eventstore, rebuild
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from tests.databases import fresh_database_url


class _CallV2(ev.Message):
    id: str
    name: str
    arguments: dict[str, Any]


class _MessageRecordedV2(ev.DomainEvent):
    type: Literal["MessageRecorded"] = "MessageRecorded"
    schema_version: int = 2
    message_id: UUID
    seq: int
    role: ev.Role
    content: str
    tool_calls: list[_CallV2] | None = None
    tool_call_id: str | None = None
    usage: ev.TokenUsage | None = None
    source_session_id: UUID | None = None


class _ApprovalRequestedV1(ev.DomainEvent):
    type: Literal["ApprovalRequested"] = "ApprovalRequested"
    approval_id: UUID
    tool_call_id: str
    tool: str
    arguments: dict[str, Any]


@pytest.fixture(scope="module")
async def pool(postgres_server_url: str) -> AsyncIterator[Pool]:
    async with fresh_database_url(postgres_server_url, "upgrade_test") as url:
        created: Pool = await create_pool(url, min_size=1, max_size=4)
        try:
            yield created
        finally:
            await created.close()


async def append(pool: Pool, stream: UUID, *events: ev.DomainEvent) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(stream), list(events))


async def test_old_events_rebuild_equal_and_read_as_the_text_shown_before(pool: Pool) -> None:
    sid, answer = uuid4(), uuid4()
    written = {"path": "a.txt", "old_string": "x", "new_string": "é"}  # not JSONB's key order
    await append(pool, sid, ev.SessionCreated(session_id=sid, user_id="alice", root_session_id=sid, title="old"))
    await append(pool, sid, ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content="go"),
                 ev.SessionPhaseChanged(phase="RUNNING"))
    await append(pool, sid, _MessageRecordedV2(message_id=answer, seq=2, role="ASSISTANT", content="",
                                               tool_calls=[_CallV2(id="c1", name="edit_file", arguments=written)]))
    await append(pool, sid, _ApprovalRequestedV1(approval_id=uuid4(), tool_call_id="c1", tool="edit_file",
                                                 arguments=written),
                 ev.SessionPhaseChanged(phase="WAITING_APPROVAL"))

    async with pool.acquire() as conn:
        report = await rebuild.check(conn)
        stored = await conn.fetch("SELECT type, schema_version, payload FROM events WHERE stream_id = $1 "
                                  "ORDER BY stream_version", str(sid))
    assert report.equal, report

    # The text the previous release showed: json.dumps of the object as JSONB gave it back
    # (keys by length, then bytes).
    as_stored = '{"path": "a.txt", "new_string": "\\u00e9", "old_string": "x"}'
    assert json.dumps(stored[3]["payload"]["tool_calls"][0]["arguments"]) == as_stored
    message, approval = (load_event(r["type"], r["schema_version"], dict(r["payload"])) for r in stored[3:5])
    assert isinstance(message, ev.MessageRecorded) and message.tool_calls is not None
    assert message.tool_calls[0].arguments == as_stored
    assert isinstance(approval, we.ApprovalRequested) and approval.arguments == as_stored

    state = await store.read_state(lambda: _uow(pool), sid)
    assert state is not None
    (call,) = state.chat[-1]["tool_calls"]
    assert call["function"]["arguments"] == as_stored


def _uow(pool: Pool) -> AbstractUnitOfWork:
    return PostgresUnitOfWork(pool)
