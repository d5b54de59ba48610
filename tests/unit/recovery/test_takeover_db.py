"""Takeover of executions and turns nobody holds, against a fresh migrated PostgreSQL, with
the scans' clock injected (no waiting for leases to expire)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from muster_recovery.postgres_scans import PostgresScans
from muster_recovery.reconcile import reconcile_executions, reconcile_sessions
from muster_recovery.takeover import take_over_execution
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.uow import leases

from tests.databases import uows

from .builders import delegating_parent, events_of, execution, outbox_commands, running_session

LATER = timedelta(seconds=60)


async def db_now(pool: Pool) -> datetime:
    now: datetime = await pool.fetchval("SELECT now()")
    return now


async def test_an_unclaimed_execution_is_taken_over_on_its_own_id_and_child(pool: Pool) -> None:
    parent, (eid,) = await delegating_parent(uows(pool), ["c1"])
    before = await execution(uows(pool), eid)
    await reconcile_executions(uows(pool), PostgresScans(pool), grace_s=10, cancel_grace_s=30, now=await db_now(pool) + LATER)
    after = await execution(uows(pool), eid)
    assert (after["status"], after["recoveries"], after["lease_expiries"]) == ("RECOVERING", 1, 0)
    assert (after["child_session_id"], after["deadline_at"]) == (before["child_session_id"], before["deadline_at"])
    runs = await outbox_commands(pool, "RunExecution", "execution_id", eid)
    assert len(runs) == 2  # the delegation's, then the takeover's
    assert runs[-1]["payload"]["child_session_id"] == str(before["child_session_id"])
    notices = await events_of(pool, parent, "ExecutionStatusChanged")
    assert [n["payload"]["status"] for n in notices] == ["RUNNING", "RECOVERING"]
    (recovering,) = await events_of(pool, eid, "ExecutionRecovering")
    assert recovering["payload"]["reason"] == "unclaimed"
    # Still unclaimed at the next scan: the command is re-sent, the takeover not re-recorded.
    await reconcile_executions(uows(pool), PostgresScans(pool), grace_s=10, cancel_grace_s=30, now=await db_now(pool) + LATER)
    assert len(await outbox_commands(pool, "RunExecution", "execution_id", eid)) == 3
    assert len(await events_of(pool, eid, "ExecutionRecovering")) == 1
    assert (await execution(uows(pool), eid))["recoveries"] == 1


async def test_an_expired_lease_counts_as_a_lease_expiry_and_a_live_one_blocks(pool: Pool) -> None:
    _, (expired, live) = await delegating_parent(uows(pool), ["a", "b"])
    await leases.try_acquire(pool, str(expired), "dead-worker", 0.001)
    await leases.try_acquire(pool, str(live), "live-worker", 3600)
    now = await db_now(pool) + LATER
    assert await take_over_execution(uows(pool), expired, now)
    assert not await take_over_execution(uows(pool), live, now)
    assert (await execution(uows(pool), expired))["lease_expiries"] == 1
    assert (await execution(uows(pool), live))["status"] == "RUNNING"
    (recovering,) = await events_of(pool, expired, "ExecutionRecovering")
    assert recovering["payload"]["reason"] == "lease_expired"


async def test_racing_takeovers_from_two_instances_record_one(pool: Pool, database_url: str) -> None:
    _, executions = await delegating_parent(uows(pool), ["x", "y", "z"])
    other: Any = await create_pool(database_url)  # a second recovery instance's pool
    try:
        now = await db_now(pool) + LATER
        attempts = [take_over_execution(uows(p), eid, now) for eid in executions for p in (pool, other, pool, other)]
        await asyncio.gather(*attempts)
        scans = [reconcile_executions(uows(p), PostgresScans(p), grace_s=10, cancel_grace_s=30, now=now) for p in (pool, other)]
        await asyncio.gather(*scans)
    finally:
        await other.close()
    for eid in executions:
        assert len(await events_of(pool, eid, "ExecutionRecovering")) == 1
        assert (await execution(uows(pool), eid))["recoveries"] == 1


async def test_a_deadline_is_absolute_across_restarts(pool: Pool) -> None:
    """Acceptance 11: an execution started 3590 s ago (by the injected clock) is taken over
    with its original deadline and fails 10 s (+ grace) later — not a fresh hour."""
    real_now = await db_now(pool)
    started = real_now - timedelta(seconds=3590)
    _, (eid,) = await delegating_parent(uows(pool), ["late"], clock=lambda: started)
    assert (await execution(uows(pool), eid))["deadline_at"] == started + timedelta(seconds=3600)
    # The worker died; after a restart recovery takes the run over, deadline unchanged.
    await reconcile_executions(uows(pool), PostgresScans(pool), grace_s=0, cancel_grace_s=30, now=real_now + timedelta(seconds=5))
    row = await execution(uows(pool), eid)
    assert row["status"] == "RECOVERING" and row["deadline_at"] == started + timedelta(seconds=3600)
    # 10 s + the 30 s grace later it is over, wherever it runs.
    await reconcile_executions(uows(pool), PostgresScans(pool), grace_s=0, cancel_grace_s=30, now=real_now + timedelta(seconds=41))
    row = await execution(uows(pool), eid)
    assert row["status"] == "FAILED" and "deadline" in row["error"]


async def test_a_turn_nobody_runs_is_resumed_once_and_waits_for_children_otherwise(pool: Pool) -> None:
    orphan = await running_session(uows(pool))
    waiting, _ = await delegating_parent(uows(pool), ["child"])
    now = await db_now(pool)

    async def phase(sid: UUID) -> str:
        value: str = await pool.fetchval("SELECT phase FROM sessions WHERE session_id = $1", sid)
        return value

    # Within the grace period a turn just started is left alone.
    await reconcile_sessions(uows(pool), PostgresScans(pool), grace_s=10, now=now)
    assert await phase(orphan) == "RUNNING"
    await reconcile_sessions(uows(pool), PostgresScans(pool), grace_s=10, now=now + LATER)
    assert (await phase(orphan), await phase(waiting)) == ("RESUMING", "RUNNING")  # the barrier resumes `waiting`
    commands = await outbox_commands(pool, "ProcessSession", "session_id", orphan)
    assert [c["payload"]["reason"] for c in commands] == ["recovery"]
    # A second scan re-sends the command but records no second takeover.
    await reconcile_sessions(uows(pool), PostgresScans(pool), grace_s=10, now=now + LATER)
    assert await pool.fetchval("SELECT recoveries FROM sessions WHERE session_id = $1", orphan) == 1
    assert len(await outbox_commands(pool, "ProcessSession", "session_id", orphan)) == 2
