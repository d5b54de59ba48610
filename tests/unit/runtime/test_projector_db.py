"""The set-based projector (`muster_project`, migration 0009) gives the rows of applying the
events one by one, however the positions are cut into ranges: a change recorded in the same
append as its row applies, one recorded before its row exists does not, the last change
wins and counters add up. The live append and replays of every range size agree."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from alembic import command
from alembic.config import Config
from muster_contracts import events as ev
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store import eventstore, rebuild
from muster_runtime.store.migrate import MIGRATIONS, sqlalchemy_url, upgrade

from tests.databases import fresh_database_url


@pytest.fixture
async def database(postgres_server_url: str) -> AsyncIterator[tuple[str, Pool]]:
    async with fresh_database_url(postgres_server_url, "projector_test") as url:
        pool: Pool = await create_pool(url, min_size=1, max_size=4)
        try:
            yield url, pool
        finally:
            await pool.close()


async def append(db: Any, stream: UUID, *events: ev.DomainEvent) -> None:
    """On a pool, one transaction per append; on a connection, inside the caller's."""
    if not hasattr(db, "acquire"):
        await eventstore.append(db, str(stream), list(events))
        return
    async with db.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(stream), list(events))


def started(execution: UUID, parent: UUID) -> ev.ExecutionStarted:
    return ev.ExecutionStarted(
        execution_id=execution, parent_session_id=parent, parent_tool_call_id=f"call-{execution}",
        parent_message_id=uuid4(), child_session_id=uuid4(), user_id="u", agent_type="coder",
        invocation_type="DELEGATE", task="t", round=1, start_message_id=uuid4(),
        deadline_at=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(hours=1))


async def tricky_log(pool: Any) -> dict[str, UUID]:
    sid, one, other = uuid4(), uuid4(), uuid4()
    a, b, c, early, late = uuid4(), uuid4(), uuid4(), uuid4(), uuid4()
    await append(pool, sid, ev.SessionCreated(session_id=sid, user_id="u", root_session_id=sid),
                 ev.UserMessageQueued(message_id=a, content="a"),
                 ev.UserMessageQueued(message_id=b, content="b"),
                 ev.MessageRecorded(message_id=a, seq=1, role="USER", content="a"),
                 ev.QueuedMessagesDropped(message_ids=[b, c], reason="cancelled"),  # c: no row yet
                 ev.SessionPhaseChanged(phase="RUNNING"))
    await append(pool, sid, ev.MessagesDiscarded(message_ids=[early], reason="before its row"),
                 ev.MessageRecorded(message_id=early, seq=2, role="ASSISTANT", content="kept"),
                 ev.SessionPhaseChanged(phase="RESUMING"),
                 ev.SessionPhaseChanged(phase="RUNNING"))
    await append(pool, sid, ev.UserMessageQueued(message_id=c, content="c"),
                 ev.QueuedMessagesDropped(message_ids=[a], reason="consumed, then dropped"))
    await append(pool, sid, ev.MessageRecorded(message_id=late, seq=3, role="ASSISTANT", content="x"),
                 ev.MessagesDiscarded(message_ids=[late], reason="same append"),
                 ev.SessionPhaseChanged(phase="FAILED", error="boom"))
    await append(pool, one, started(one, sid), ev.ExecutionRecovering(reason="lease_expired"),
                 ev.ExecutionFinished(status="COMPLETED", result="r", rounds=2, tool_calls=3,
                                      usage=ev.TokenUsage(prompt_tokens=7)),
                 ev.ExecutionDelivered(delivery_status="DELIVERED", tool_message_id=late),
                 ev.ExecutionRecovering(reason="unclaimed"))
    await append(pool, other, started(other, sid))
    await append(pool, other, ev.ExecutionRecovering(reason="lease_expired"))
    await append(pool, other, ev.ExecutionFinished(status="FAILED", error="e"))
    await append(pool, sid, ev.ExecutionStatusChanged(execution_id=other, status="FAILED",
                                                      delivery_status="PENDING"))
    return {"sid": sid, "one": one, "other": other, "a": a, "b": b, "c": c, "early": early, "late": late}


async def test_changes_apply_as_if_one_event_at_a_time(database: tuple[str, Pool]) -> None:
    _, pool = database
    ids = await tricky_log(pool)
    states = dict(await pool.fetch("SELECT message_id, state FROM session_inputs"))
    assert states == {ids["a"]: "DROPPED", ids["b"]: "DROPPED", ids["c"]: "QUEUED"}
    discarded = dict(await pool.fetch("SELECT message_id, discarded FROM messages"))
    assert discarded == {ids["a"]: False, ids["early"]: False, ids["late"]: True}
    session = await pool.fetchrow("SELECT * FROM sessions WHERE session_id = $1", ids["sid"])
    assert session is not None
    assert (session["phase"], session["last_error"], session["recoveries"]) == ("FAILED", "boom", 1)
    assert (session["message_count"], session["version"]) == (3, 16)  # 16: ExecutionStatusChanged
    failed = await pool.fetchval(
        "SELECT position FROM events WHERE stream_id = $1 AND payload->>'phase' = 'FAILED'", str(ids["sid"]))
    assert session["turn_ended_position"] == failed  # the turn end rides on the row's update
    one = await pool.fetchrow("SELECT * FROM executions WHERE execution_id = $1", ids["one"])
    assert one is not None
    assert (one["status"], one["result"], one["rounds"], one["tool_calls"]) == ("RECOVERING", "r", 2, 3)
    assert (one["delivery_status"], one["tool_message_id"]) == ("DELIVERED", ids["late"])
    assert (one["recoveries"], one["lease_expiries"], one["version"]) == (2, 1, 5)
    assert one["usage"] == {"prompt_tokens": 7, "completion_tokens": 0}
    other = await pool.fetchrow("SELECT * FROM executions WHERE execution_id = $1", ids["other"])
    assert other is not None
    assert (other["status"], other["error"], other["delivery_status"]) == ("FAILED", "e", "PENDING")
    assert (other["recoveries"], other["lease_expiries"], other["version"]) == (1, 1, 3)


@pytest.mark.parametrize("batch", [1, 2, 3, 5, 10_000])
async def test_every_range_size_replays_the_live_rows(database: tuple[str, Pool], batch: int) -> None:
    _, pool = database
    await tricky_log(pool)
    await tricky_log(pool)
    async with pool.acquire() as conn:
        report = await rebuild.check(conn, batch=batch)
        assert report.equal, report
        assert (await rebuild.rebuild(conn, batch=batch)).events == report.events
        assert (await rebuild.check(conn)).equal


async def test_the_projectors_join_their_changes_by_primary_key(database: tuple[str, Pool]) -> None:
    # They plan once per connection (a generic plan), so the settings, not the table sizes
    # at planning time, must keep each set-based UPDATE a nested loop over the index: on a
    # few hundred rows PostgreSQL would otherwise hash the pass's rows and scan the table.
    _, pool = database
    await tricky_log(pool)
    async with pool.acquire() as conn:
        await conn.execute("INSERT INTO sessions (session_id, user_id, session_type, root_session_id,"
                           " agent_type, version, created_at, updated_at) SELECT gen_random_uuid(), 'u', 'NORMAL',"
                           " gen_random_uuid(), 'coder', 1, now(), now() FROM generate_series(1, 300)")
        await conn.execute("ANALYZE")
    async with pool.acquire() as conn, conn.transaction():
        ids = await tricky_log(conn)
        scans = dict(await conn.fetch(
            "SELECT relname, seq_scan FROM pg_stat_xact_user_tables"
            " WHERE relname IN ('sessions', 'executions', 'session_inputs', 'messages')"))
        assert scans == dict.fromkeys(("sessions", "executions", "session_inputs", "messages"), 0)
        assert (await conn.fetchval("SELECT phase FROM sessions WHERE session_id = $1", ids["sid"])) == "FAILED"


def _downgrade(url: str, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    command.downgrade(config, revision)


async def test_the_per_event_projector_of_0008_and_the_set_based_one_agree(
    database: tuple[str, Pool], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, pool = database
    await tricky_log(pool)  # projected live by 0009
    await asyncio.to_thread(_downgrade, url, "0008")
    # The tables of 0008's schema (later migrations added more).
    monkeypatch.setattr(rebuild, "PROJECTION_TABLES", tuple(t for t in rebuild.PROJECTION_TABLES if t not in ("compactions", "session_waits")))
    async with pool.acquire() as conn:
        assert (await rebuild.check(conn)).equal  # replayed by 0007's per-event functions
    await tricky_log(pool)  # projected live by 0007's
    monkeypatch.undo()
    await asyncio.to_thread(upgrade, url)
    async with pool.acquire() as conn:
        assert (await rebuild.check(conn, batch=3)).equal
