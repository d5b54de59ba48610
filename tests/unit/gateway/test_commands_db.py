"""commands.py against a fresh migrated PostgreSQL (an embedded server unless DATABASE_URL is set)."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts.events import DomainEvent, SessionCreated, SessionPhaseChanged
from muster_gateway import commands
from muster_gateway.errors import SESSION_NOT_FOUND, GatewayError
from muster_gateway.protocol import CreateSessionData, SendMessageData
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory


def uows(pool: Pool) -> UnitOfWorkFactory:
    return partial(PostgresUnitOfWork, pool)


async def append(pool: Pool, session_id: str, *events: DomainEvent) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE",
                           UUID(session_id))
        await eventstore.append(conn, session_id, list(events))


async def new_session(pool: Pool, tmp_path: Path, user: str = "alice", **data: Any) -> str:
    ack = await commands.create_session(uows(pool), user, CreateSessionData(**data), tmp_path)
    return str(ack["sessionId"])


async def commands_for(pool: Pool, session_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT payload FROM outbox WHERE key = $1 AND event_position IS NULL ORDER BY id",
        session_id,
    )
    return [row["payload"]["type"] for row in rows]


async def event_types(pool: Pool, session_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT type FROM events WHERE stream_id = $1 ORDER BY position", session_id
    )
    return [row["type"] for row in rows]


async def test_create_session_without_content(pool: Pool, tmp_path: Path) -> None:
    ack = await commands.create_session(uows(pool), "alice", CreateSessionData(title="plan", agentType="coder"), tmp_path
    )
    sid = ack["sessionId"]
    assert set(ack) == {"sessionId"}
    row = await pool.fetchrow("SELECT * FROM sessions WHERE session_id = $1", UUID(sid))
    assert (row["user_id"], row["session_type"], row["title"], row["agent_type"]) == (
        "alice", "NORMAL", "plan", "coder"
    )
    assert row["root_session_id"] == UUID(sid) and row["parent_session_id"] is None
    assert (tmp_path / sid).is_dir()
    assert await event_types(pool, sid) == ["SessionCreated"]
    assert await commands_for(pool, sid) == []


async def test_create_session_with_content_posts_and_processes(
    pool: Pool, tmp_path: Path
) -> None:
    ack = await commands.create_session(uows(pool), "alice", CreateSessionData(content="hi", clientMessageId="c0"), tmp_path
    )
    sid = ack["sessionId"]
    assert await event_types(pool, sid) == ["SessionCreated", "UserMessageQueued"]
    inp = await pool.fetchrow("SELECT * FROM session_inputs WHERE session_id = $1", UUID(sid))
    assert str(inp["message_id"]) == ack["messageId"] and inp["client_message_id"] == "c0"
    assert await commands_for(pool, sid) == ["ProcessSession"]
    agent = await pool.fetchval("SELECT agent_type FROM sessions WHERE session_id = $1",
                                UUID(sid))
    assert agent == "general"


async def test_send_message_reports_queued_by_phase(pool: Pool, tmp_path: Path) -> None:
    sid = await new_session(pool, tmp_path)
    ack = await commands.send_message(uows(pool), "alice", sid, SendMessageData(content="one"))
    assert ack["queued"] is False and UUID(ack["messageId"])
    await append(pool, sid, SessionPhaseChanged(phase="RESUMING"))
    ack = await commands.send_message(uows(pool), "alice", sid, SendMessageData(content="two"))
    assert ack["queued"] is True
    assert await commands_for(pool, sid) == ["ProcessSession", "ProcessSession"]


async def test_client_message_id_is_deduplicated_by_the_constraint(
    pool: Pool, tmp_path: Path
) -> None:
    sid = await new_session(pool, tmp_path)
    first = await commands.send_message(uows(pool), "alice", sid, SendMessageData(content="hello", clientMessageId="k1")
    )
    again = await commands.send_message(uows(pool), "alice", sid, SendMessageData(content="hello", clientMessageId="k1")
    )
    assert again["messageId"] == first["messageId"] and again["duplicate"] is True
    racing = await asyncio.gather(*(
        commands.send_message(uows(pool), "alice", sid,
                              SendMessageData(content="x", clientMessageId="k2"))
        for _ in range(6)
    ))
    assert len({ack["messageId"] for ack in racing}) == 1
    assert sum(1 for ack in racing if not ack.get("duplicate")) == 1
    count = await pool.fetchval("SELECT count(*) FROM session_inputs WHERE session_id = $1",
                                UUID(sid))
    assert count == 2
    assert await commands_for(pool, sid) == ["ProcessSession", "ProcessSession"]
    # the same clientMessageId in another session is a different message
    other = await new_session(pool, tmp_path)
    ack = await commands.send_message(uows(pool), "alice", other, SendMessageData(content="hello", clientMessageId="k1")
    )
    assert "duplicate" not in ack


async def test_concurrent_messages_all_land_in_order_of_versions(
    pool: Pool, tmp_path: Path
) -> None:
    sid = await new_session(pool, tmp_path)
    acks = await asyncio.gather(*(
        commands.send_message(uows(pool), "alice", sid, SendMessageData(content=str(i)))
        for i in range(8)
    ))
    assert len({ack["messageId"] for ack in acks}) == 8
    versions = await pool.fetch(
        "SELECT stream_version FROM events WHERE stream_id = $1 ORDER BY position", sid
    )
    assert [r[0] for r in versions] == list(range(1, 10))


@pytest.mark.parametrize("action", ["send", "cancel"])
async def test_foreign_unknown_and_malformed_ids_are_not_found(
    pool: Pool, tmp_path: Path, action: str
) -> None:
    sid = await new_session(pool, tmp_path, user="alice")
    for user, target in (("bob", sid), ("alice", str(uuid4())), ("alice", "not-a-uuid")):
        with pytest.raises(GatewayError) as info:
            if action == "send":
                await commands.send_message(uows(pool), user, target, SendMessageData(content="x"))
            else:
                await commands.cancel(uows(pool), user, target)
        assert (info.value.code, info.value.message) == ("not_found", SESSION_NOT_FOUND)
    assert await event_types(pool, sid) == ["SessionCreated"]


async def test_cancel_idle_session_is_acknowledged_and_changes_nothing(
    pool: Pool, tmp_path: Path
) -> None:
    sid = await new_session(pool, tmp_path)
    await append(pool, sid, SessionPhaseChanged(phase="COMPLETED"))
    assert await commands.cancel(uows(pool), "alice", sid) == {}
    assert await event_types(pool, sid) == ["SessionCreated", "SessionPhaseChanged"]
    assert await commands_for(pool, sid) == []


async def test_cancel_running_session_drops_queue_and_sends_cancel(
    pool: Pool, tmp_path: Path
) -> None:
    sid = await new_session(pool, tmp_path)
    await append(pool, sid, SessionPhaseChanged(phase="RUNNING"))
    queued = [
        (await commands.send_message(uows(pool), "alice", sid, SendMessageData(content=c)))["messageId"]
        for c in ("a", "b")
    ]
    assert await commands.cancel(uows(pool), "alice", sid) == {}
    types = await event_types(pool, sid)
    assert types[-2:] == ["SessionPhaseChanged", "QueuedMessagesDropped"]
    row = await pool.fetchrow("SELECT phase FROM sessions WHERE session_id = $1", UUID(sid))
    assert row["phase"] == "CANCELLED"
    states = await pool.fetch(
        "SELECT message_id, state FROM session_inputs WHERE session_id = $1", UUID(sid)
    )
    assert {str(r["message_id"]): r["state"] for r in states} == dict.fromkeys(queued, "DROPPED")
    assert (await commands_for(pool, sid))[-1] == "CancelSession"
    # a second cancel finds nothing to do
    assert await commands.cancel(uows(pool), "alice", sid) == {}
    assert await event_types(pool, sid) == types


async def test_cancel_idle_session_with_pending_input_drops_it(
    pool: Pool, tmp_path: Path
) -> None:
    sid = await new_session(pool, tmp_path, content="start please")
    await commands.cancel(uows(pool), "alice", sid)
    assert (await event_types(pool, sid))[-1] == "QueuedMessagesDropped"
    assert await commands_for(pool, sid) == ["ProcessSession"]  # no CancelSession: not running


async def test_subagent_sessions_refuse_input_and_cancel(pool: Pool, tmp_path: Path) -> None:
    parent = await new_session(pool, tmp_path)
    child = uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(child), [SessionCreated(
            session_id=child, user_id="alice", session_type="SUBAGENT",
            parent_session_id=UUID(parent), root_session_id=UUID(parent),
        )], expected_version=0)
    with pytest.raises(GatewayError) as info:
        await commands.send_message(uows(pool), "alice", str(child), SendMessageData(content="x"))
    assert info.value.code == "conflict"
    with pytest.raises(GatewayError) as info:
        await commands.cancel(uows(pool), "alice", str(child))
    assert info.value.code == "conflict"
    with pytest.raises(GatewayError) as info:
        await commands.cancel(uows(pool), "bob", str(child))
    assert info.value.code == "not_found"
