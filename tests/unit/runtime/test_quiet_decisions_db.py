"""On PostgreSQL, two children closing at once behind their parent's lock: the one that gets
the lock second sees the first's close (a statement of its own after the lock), so exactly
one of them is the round's last and goes the long way to settle the barrier (ADR 0025)."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import pytest
from muster_agent import session_store as store
from muster_contracts import events as ev
from muster_runtime.process.db import Pool
from muster_runtime.uow import postgres_uow
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from tests.unit.runtime.test_quiet_decisions_contract import COMPLETED, answer, delegated, run_close, running
from tests.unit.runtime.uow_harness import Harness


async def waiting_for_locks(pool: Pool, count: int) -> None:
    query = """SELECT count(*) FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock'"""
    while await pool.fetchval(query) < count:
        await asyncio.sleep(0.01)


async def test_of_two_children_closing_together_exactly_one_is_the_last(pool: Pool) -> None:
    work = Harness(lambda: PostgresUnitOfWork(pool), list)
    parent, runs = await delegated(work, 2)

    async def close(child: Any, eid: Any) -> str:
        async with work.uow() as uow:
            return await uow.close_quietly(child, 1, [answer(2), COMPLETED], run=run_close(eid, parent))

    async with work.uow() as holder:
        assert await holder.lock_session(parent) is not None
        closes = [asyncio.create_task(close(child, eid)) for child, eid in runs]
        await asyncio.wait_for(waiting_for_locks(pool, 2), 10)  # both hold their child, wait for the parent
    outcomes = await asyncio.gather(*closes)
    assert sorted(outcomes) == ["closed", "last"]
    statuses = await pool.fetch("SELECT status FROM executions ORDER BY status")
    assert [r["status"] for r in statuses] == ["COMPLETED", "RUNNING"]


async def test_a_claims_state_is_read_with_its_lock_not_again(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = Harness(lambda: PostgresUnitOfWork(pool), list)
    sid = await running(work, 2)
    monkeypatch.setattr(postgres_uow, "LOAD_STATE", "SELECT 1 / 0")  # any state read fails
    async with work.uow() as uow:
        claim = await uow.claim_session("harness", "m1", sid, "h1", 60)
        assert claim.leased
        state = await uow.session_state(sid)
    assert state is not None and [m["seq"] for m in state.messages] == [1, 2]


async def test_a_turn_started_by_a_claim_carries_the_claims_state_as_a_reload_would_read_it(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = Harness(lambda: PostgresUnitOfWork(pool), list)
    sid = await running(work, 2)
    async with work.uow() as uow:
        ended = [answer(3), COMPLETED, ev.UserMessageQueued(message_id=uuid4(), content="next")]
        await uow.append(str(sid), ended, expected_version=4)
    with monkeypatch.context() as patched:
        patched.setattr(postgres_uow, "LOAD_STATE", "SELECT 1 / 0")  # any state read fails
        async with work.uow() as uow:
            claim = await uow.claim_session("harness", "m1", sid, "h1", 60)
            assert claim.row is not None
            started = await store.start_next_turn(uow, Session.of(claim.row))
    reloaded = await store.read_state(work.uow, sid)
    assert started is not None and reloaded is not None
    assert [m.content for m in started.messages] == ["m1", "m2", "done", "next"]
    assert started == reloaded
