"""Delivery through the barrier, on the in-memory unit of work (`muster_agent.barrier.settle`,
found by reconciliation or a recovery handler): terminal results reach the parent in
tool-call order with one ResumeSession, exactly once; a parent waits for every child; a
cancelled parent's children are cancelled and their results suppressed, never resumed."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

from muster_agent.barrier import settle
from muster_contracts import events as ev
from muster_recovery import handlers

from .builders import delegating_parent, finished_unsettled
from .recovery_world import RecoveryWorld, published


async def test_results_are_delivered_once_in_tool_call_order_and_a_second_pass_is_a_no_op(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    parent, executions = await delegating_parent(world.uows, ["first", "second", "third"])
    for eid in reversed(executions):  # the children finish in the opposite order
        await finished_unsettled(world.uows, eid, f"failed {eid}")
    await world.reconcile(world.later(0))
    results = await world.tool_results(parent)
    assert [r["tool_call_id"] for r in results] == ["first", "second", "third"]
    assert [json.loads(r["content"])["error"] for r in results] == [f"failed {eid}" for eid in executions]
    assert {(await world.execution(eid))["delivery_status"] for eid in executions} == {"DELIVERED"}
    assert len(world.sent("ResumeSession", session_id=parent)) == 1
    async with world.uows() as uow:
        version = await uow.current_version(str(parent))
    await world.reconcile(world.later(0))  # a second pass, and a late reaction, find nothing
    assert await settle(world.uows, parent) == 0
    async with world.uows() as uow:
        assert await uow.current_version(str(parent)) == version
    assert len(await world.tool_results(parent)) == 3
    assert len(world.sent("ResumeSession", session_id=parent)) == 1


async def test_a_parent_waits_for_every_child(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    parent, (done, running) = await delegating_parent(world.uows, ["done", "running"])
    await finished_unsettled(world.uows, done, "boom")
    await world.reconcile(world.later(0))
    assert await world.tool_results(parent) == []
    assert (await world.execution(done))["delivery_status"] == "PENDING"
    assert world.sent("ResumeSession", session_id=parent) == []
    await finished_unsettled(world.uows, running, "boom too")
    await world.reconcile(world.later(0))
    assert [r["tool_call_id"] for r in await world.tool_results(parent)] == ["done", "running"]


async def test_a_cancelled_parents_children_are_cancelled_and_suppressed_for_good(tmp_path: Path) -> None:
    """The cancel landed while recovery was down (its cascade never ran): the next passes
    cancel the children and suppress their results, and later passes change nothing."""
    world = RecoveryWorld(tmp_path)
    parent, executions = await delegating_parent(world.uows, ["a", "b"])
    async with world.uows() as uow:
        await uow.append(str(parent), [ev.SessionPhaseChanged(phase="CANCELLED")], expected_version=None)
    for _ in range(3):
        await world.reconcile(world.later(0))
        rows = [await world.execution(eid) for eid in executions]
        assert [(r["status"], r["delivery_status"]) for r in rows] == [("CANCELLED", "SUPPRESSED")] * 2
        assert await world.tool_results(parent) == []
        assert world.sent("ResumeSession", session_id=parent) == []
    assert len(world.sent("CancelExecution")) == 2  # each worker told to stop, once
    for row in rows:
        async with world.uows() as uow:
            child = await uow.lock_session(row["child_session_id"])
        assert child is not None and child["phase"] == "CANCELLED"


async def never_subagent(session_id: UUID) -> bool:
    return False


async def test_the_events_that_complete_a_round_deliver_it_at_once(tmp_path: Path) -> None:
    """Recovery's reactions: a finish its writer did not settle delivers the round; a
    parent's cancellation cascades to its children and suppresses their results."""
    world = RecoveryWorld(tmp_path)
    parent, (eid,) = await delegating_parent(world.uows, ["a"])
    await finished_unsettled(world.uows, eid, "boom")
    (finished,) = await world.events(eid, "ExecutionFinished")
    await handlers.on_event(published(finished), world.uows, never_subagent)
    assert (await world.execution(eid))["delivery_status"] == "DELIVERED"
    assert len(world.sent("ResumeSession", session_id=parent)) == 1

    other, (running,) = await delegating_parent(world.uows, ["b"])
    async with world.uows() as uow:
        await uow.append(str(other), [ev.SessionPhaseChanged(phase="CANCELLED")], expected_version=None)
    cancelled = (await world.events(other, "SessionPhaseChanged"))[-1]
    await handlers.on_event(published(cancelled), world.uows, never_subagent)
    row = await world.execution(running)
    assert (row["status"], row["delivery_status"]) == ("CANCELLED", "SUPPRESSED")
    assert world.sent("ResumeSession", session_id=other) == []
