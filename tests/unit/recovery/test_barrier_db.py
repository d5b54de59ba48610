"""The barrier under races and crashes, against a fresh migrated PostgreSQL: many settles
from two recovery instances deliver once, in tool-call order; a cancelled parent is
suppressed and stays so."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from muster_agent.barrier import settle
from muster_contracts import events as ev
from muster_recovery.cascade import cancel_children
from muster_runtime.process.db import Pool, create_pool

from tests.databases import uows

from .builders import delegating_parent, execution, finished_unsettled, outbox_commands


async def tool_results(pool: Pool, parent: Any) -> list[Any]:
    return list(await pool.fetch(
        "SELECT tool_call_id, content FROM messages WHERE session_id = $1 AND role = 'TOOL' ORDER BY seq", parent
    ))


async def test_two_instances_settling_at_once_deliver_once_in_tool_call_order(pool: Pool, database_url: str) -> None:
    parent, executions = await delegating_parent(uows(pool), ["first", "second", "third"])
    # Children finish in the opposite order of their tool calls (acceptance 10).
    for eid in reversed(executions):
        await finished_unsettled(uows(pool), eid, f"failed {eid}")
    other: Any = await create_pool(database_url)
    try:
        settled = await asyncio.gather(*(settle(uows(p), parent) for p in (pool, other) * 5))
    finally:
        await other.close()
    assert sum(settled) == 3
    results = await tool_results(pool, parent)
    assert [r["tool_call_id"] for r in results] == ["first", "second", "third"]
    assert [json.loads(r["content"])["error"] for r in results] == [f"failed {eid}" for eid in executions]
    assert len(await outbox_commands(pool, "ResumeSession", "session_id", parent)) == 1
    rows = [await execution(uows(pool), eid) for eid in executions]
    assert {r["delivery_status"] for r in rows} == {"DELIVERED"}


async def test_a_parent_waits_for_every_child(pool: Pool) -> None:
    parent, (done, running) = await delegating_parent(uows(pool), ["done", "running"])
    await finished_unsettled(uows(pool), done, "boom")
    assert await settle(uows(pool), parent) == 0
    assert await tool_results(pool, parent) == []
    assert (await execution(uows(pool), done))["delivery_status"] == "PENDING"
    await finished_unsettled(uows(pool), running, "boom too")
    assert await settle(uows(pool), parent) == 2


async def test_a_parent_cancelled_while_down_gets_suppressed_results_and_stays_cancelled(pool: Pool) -> None:
    """Acceptance 8 at the database: the cancel landed, the cascade did not run (recovery
    was down); a restarted recovery cancels the children and suppresses their results,
    and later restarts change nothing."""
    parent, executions = await delegating_parent(uows(pool), ["a", "b"])
    async with uows(pool)() as uow:
        row = await uow.lock_session(parent)
        assert row is not None
        await uow.append(str(parent), [ev.SessionPhaseChanged(phase="CANCELLED")], expected_version=row["version"])
    for _ in range(3):  # the restart, then twice more
        await cancel_children(uows(pool), parent)
        rows = [await execution(uows(pool), eid) for eid in executions]
        assert [(r["status"], r["delivery_status"]) for r in rows] == [("CANCELLED", "SUPPRESSED")] * 2
        assert await tool_results(pool, parent) == []
        assert await outbox_commands(pool, "ResumeSession", "session_id", parent) == []
        assert await pool.fetchval("SELECT phase FROM sessions WHERE session_id = $1", parent) == "CANCELLED"
    children = [r["child_session_id"] for r in rows]
    phases = await pool.fetch("SELECT phase FROM sessions WHERE session_id = ANY($1::uuid[])", children)
    assert {p["phase"] for p in phases} == {"CANCELLED"}
