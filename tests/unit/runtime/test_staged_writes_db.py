"""PostgreSQL's unit of work writes a decision's appends and commands together: one
statement before the decision's next read or at commit (ADR 0021), with the same rows,
positions, outbox and projections as one append at a time."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts.commands import RunExecution
from muster_runtime.messaging import dispatch
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from tests.unit.runtime.fakes import Producer
from tests.unit.runtime.uow_harness import created, message


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(appends, commands) of each staged write."""
    seen: list[tuple[int, int]] = []
    real = eventstore.write_staged

    async def counting(conn: Any, appends: Any, commands: Any) -> None:
        seen.append((len(appends), len(commands)))
        await real(conn, appends, commands)

    monkeypatch.setattr(eventstore, "write_staged", counting)
    return seen


async def test_a_delegation_shaped_decision_is_one_write(pool: Pool, writes: list[tuple[int, int]]) -> None:
    parent, children = uuid4(), [uuid4() for _ in range(3)]
    capture = Producer()
    dispatch.install(dispatch.Dispatcher(capture, pool))
    try:
        async with PostgresUnitOfWork(pool) as uow:
            await uow.append(str(parent), [created(parent)], expected_version=0)
        async with PostgresUnitOfWork(pool) as uow:
            row = await uow.lock_session(parent)
            assert row is not None
            for child in children:
                await uow.append(str(child), [created(child), message(1)], expected_version=0)
                await uow.send("muster.delegations", str(child), RunExecution(
                    execution_id=uuid4(), child_session_id=child, parent_session_id=parent))
            await uow.append(str(parent), [message(1)], expected_version=row["version"])
    finally:
        dispatch.install(None)
    assert writes == [(1, 0), (4, 3)]
    rows = await pool.fetch("SELECT stream_id, stream_version, position FROM events ORDER BY position")
    order = [str(parent)] + [str(c) for c in children for _ in range(2)] + [str(parent)]
    assert [r["stream_id"] for r in rows] == order  # positions in append order
    sessions = {r["session_id"]: r for r in await pool.fetch("SELECT * FROM sessions")}
    assert all(sessions[c]["message_count"] == 1 and sessions[c]["version"] == 2 for c in children)
    assert sessions[parent]["version"] == 2 and sessions[parent]["message_count"] == 1
    published = [json.loads(v) for v in capture.sent]
    commands = [b for b in published if b.get("type") == "RunExecution"]
    events = [b for b in published if b.get("kind") == "event"]
    assert sorted(UUID(c["child_session_id"]) for c in commands) == sorted(children)
    assert sorted(e["position"] for e in events) == [r["position"] for r in rows]


async def test_a_taken_version_found_at_commit_leaves_nothing(pool: Pool, writes: list[tuple[int, int]]) -> None:
    sid, other = uuid4(), uuid4()
    async with PostgresUnitOfWork(pool) as uow:
        await uow.append(str(sid), [created(sid)], expected_version=0)
    with pytest.raises(eventstore.ConcurrencyError):
        async with PostgresUnitOfWork(pool) as uow:
            await uow.append(str(other), [created(other)], expected_version=0)
            await uow.send("muster.commands", str(other), RunExecution(
                execution_id=uuid4(), child_session_id=other, parent_session_id=sid))
            await uow.append(str(sid), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=0)
    assert writes[-1] == (2, 1)
    assert await pool.fetchval("SELECT count(*) FROM events") == 1
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE payload IS NOT NULL") == 0
    assert await pool.fetchval("SELECT count(*) FROM sessions WHERE session_id = $1", other) == 0
    async with PostgresUnitOfWork(pool) as uow:  # the pooled connection is usable again
        assert await uow.lock_session(sid) is not None


async def test_the_version_of_a_stream_the_decision_wrote_needs_no_read(
    pool: Pool, writes: list[tuple[int, int]]
) -> None:
    sid = uuid4()
    async with PostgresUnitOfWork(pool) as uow:
        await uow.append(str(sid), [created(sid)], expected_version=0)
    async with PostgresUnitOfWork(pool) as uow:
        row = await uow.lock_session(sid)
        assert row is not None
        await uow.append(str(sid), [message(1), message(2)], expected_version=row["version"])
        assert await uow.current_version(str(sid)) == 3  # staged, not yet written
        await uow.append(str(sid), [message(3)], expected_version=3)
        assert await uow.current_version(str(sid)) == 4
        assert writes == [(1, 0)]  # only the first decision's write so far
    assert writes == [(1, 0), (2, 0)]  # both appends in the one write at commit
    async with PostgresUnitOfWork(pool) as uow:
        assert await uow.current_version(str(sid)) == 4
