"""A takeover, on the in-memory unit of work: a run nobody holds is marked RECOVERING once
and re-sent on its own execution id and child session (`takeover.take_over_execution`);
the worker then resumes the child (`muster_agent.loop.step`): the crash's incomplete tail is
discarded, an interrupted tool is never re-run, and a final answer already recorded closes
the run without a model call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

from muster_contracts import events as ev
from muster_contracts.commands import RunExecution
from muster_recovery.takeover import take_over_execution, take_over_session

from .builders import assistant, delegating_parent, record, running_session
from .recovery_world import Answers, NoModel, RecoveryWorld


def write(call_id: str, path: str) -> dict[str, Any]:
    return {"id": call_id, "name": "write_file", "arguments": {"path": path, "content": path}}


async def taken_over(world: RecoveryWorld, execution_id: Any) -> RunExecution:
    await world.reconcile(world.later())
    (*_, command) = world.sent("RunExecution", execution_id=execution_id)
    assert isinstance(command, RunExecution)
    return command


async def test_a_run_nobody_holds_is_taken_over_once_on_its_own_id_and_child(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    parent, (eid,) = await delegating_parent(world.uows, ["c1"])
    before = await world.execution(eid)
    command = await taken_over(world, eid)
    after = await world.execution(eid)
    assert (after["status"], after["recoveries"], after["lease_expiries"]) == ("RECOVERING", 1, 0)
    assert (after["child_session_id"], after["deadline_at"]) == (before["child_session_id"], before["deadline_at"])
    assert (command.child_session_id, command.parent_session_id) == (before["child_session_id"], parent)
    assert len(world.sent("RunExecution", execution_id=eid)) == 2  # the delegation's, then the takeover's
    notices = await world.events(parent, "ExecutionStatusChanged")
    assert [n.event.status for n in notices] == ["RUNNING", "RECOVERING"]  # type: ignore[attr-defined]
    (recovering,) = await world.events(eid, "ExecutionRecovering")
    assert recovering.event.reason == "unclaimed"  # type: ignore[attr-defined]
    # Still unclaimed at the next pass: the command is re-sent, the takeover not re-recorded.
    await world.reconcile(world.later())
    assert len(world.sent("RunExecution", execution_id=eid)) == 3
    assert len(await world.events(eid, "ExecutionRecovering")) == 1


async def test_an_expired_lease_is_a_lease_expiry_and_a_live_one_blocks(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    _, (expired, live) = await delegating_parent(world.uows, ["a", "b"])
    async with world.uows() as uow:
        assert await uow.try_lease(str(expired), "dead-worker", -1)
        assert await uow.try_lease(str(live), "live-worker", 3600)
    assert await take_over_execution(world.uows, expired, world.later())
    assert not await take_over_execution(world.uows, live, world.later())
    assert (await world.execution(expired))["lease_expiries"] == 1
    assert (await world.execution(live))["status"] == "RUNNING"


async def test_the_crashs_tail_is_discarded_and_the_interrupted_tool_not_run_again(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    parent, (eid,) = await delegating_parent(world.uows, ["c"])
    child = (await world.execution(eid))["child_session_id"]
    # The dead worker's round: two file writes, the first done, the second started and cut off.
    round_ = assistant(0, [write("w1", "a.txt"), write("w2", "b.txt")])
    await record(world.uows, child, lambda seq: [
        round_.model_copy(update={"seq": seq}),
        ev.ToolCallStarted(message_id=round_.message_id, tool_call_id="w1", name="write_file"),
        ev.MessageRecorded(message_id=uuid4(), seq=seq + 1, role="TOOL", content="{}", tool_call_id="w1"),
        ev.ToolCallStarted(message_id=round_.message_id, tool_call_id="w2", name="write_file"),
    ])  # fmt: skip
    model = Answers("recovered answer")
    await world.work(await taken_over(world, eid), model)

    (discarded,) = await world.events(child, "MessagesDiscarded")
    assert discarded.event.reason == "incomplete_tail"  # type: ignore[attr-defined]
    assert round_.message_id in discarded.event.message_ids  # type: ignore[attr-defined]
    assert not (tmp_path / str(parent) / "b.txt").exists()  # the cut-off write never ran again
    (request,) = model.requests
    assert [m["role"] for m in request.messages if m["role"] != "system"] == ["user"]  # the tail is gone
    row = await world.execution(eid)
    assert (row["status"], row["result"], row["delivery_status"]) == ("COMPLETED", "recovered answer", "DELIVERED")
    (tool,) = await world.tool_results(parent)
    assert json.loads(tool["content"])["result"] == "recovered answer"


async def test_a_final_answer_already_recorded_finishes_the_run_without_a_model_call(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    parent, (eid,) = await delegating_parent(world.uows, ["c"])
    child = (await world.execution(eid))["child_session_id"]
    answer = assistant(0, [], content="the original answer")
    # The worker recorded the answer and the child's end, then died before the execution's.
    await record(world.uows, child, lambda seq: [
        answer.model_copy(update={"seq": seq}), ev.SessionPhaseChanged(phase="COMPLETED"),
    ])  # fmt: skip
    await world.work(await taken_over(world, eid), NoModel())
    row = await world.execution(eid)
    assert (row["status"], row["result"], row["final_message_id"]) == (
        "COMPLETED", "the original answer", answer.message_id)  # fmt: skip
    assert row["delivery_status"] == "DELIVERED"  # the last child's worker settled the barrier
    assert len(world.sent("ResumeSession", session_id=parent)) == 1


async def test_a_turn_nobody_runs_is_resumed_once_and_a_waiting_parent_is_left_to_the_barrier(
    tmp_path: Path,
) -> None:
    world = RecoveryWorld(tmp_path)
    orphan = await running_session(world.uows)
    waiting, _ = await delegating_parent(world.uows, ["child"])
    await world.reconcile(world.later(0))  # within the grace: left alone
    assert world.sent("ProcessSession", session_id=orphan) == []
    await world.reconcile(world.later())
    await world.reconcile(world.later())
    assert [c.reason for c in world.sent("ProcessSession", session_id=orphan)] == ["recovery"] * 2  # type: ignore[attr-defined]
    assert len(await world.events(orphan, "SessionPhaseChanged")) == 2  # RUNNING, then RESUMING once
    assert world.sent("ProcessSession", session_id=waiting) == []  # its children's barrier resumes it
    async with world.uows() as uow:  # a harness took the turn again
        assert await uow.try_lease(str(orphan), "harness", 3600)
    assert not await take_over_session(world.uows, orphan, world.later())
