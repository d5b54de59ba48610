"""Delegation and the barrier on the in-memory unit of work: a parent's round creates its
children in one decision, each child's end finishes its execution, the last one settles
the barrier, and refusals become error results. No database, no broker."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID, uuid4

from muster_agent.barrier import settle
from muster_agent.delegation import STILL_RUNNING, execution_id_for
from muster_agent.loop import StepOutcome, run_until_idle
from muster_contracts import events as ev

from tests.unit.agent.memory_world import World


def delegating(*tasks: str, then: str = "all done") -> str:
    calls = [{"name": "delegate", "arguments": {"agent_type": "coder", "task": t}} for t in tasks]
    return "#script " + json.dumps({"steps": [{"tool_calls": calls}, {"content": then}]})


async def test_a_delegated_turn_waits_for_every_child_then_reads_their_results_in_call_order(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    parent = await world.session(delegating("one", "two", "three"))
    assert await world.run(parent) == StepOutcome.WAITING
    executions = await world.executions(parent)
    assert sorted(e["task"] for e in executions) == ["one", "three", "two"]
    assert len(world.sent("RunExecution")) == 3
    # Children finish in the opposite order of their calls; only the last settles the barrier.
    by_task = {e["task"]: e for e in executions}
    for task in ("three", "two"):
        assert await run_until_idle(world.worker, by_task[task]["child_session_id"]) == StepOutcome.IDLE
        assert world.sent("ResumeSession") == []
    await run_until_idle(world.worker, by_task["one"]["child_session_id"])
    assert len(world.sent("ResumeSession")) == 1
    assert await settle(world.store.uow, parent) == 0  # recovery, coming second, finds it done
    assert await world.run(parent) == StepOutcome.IDLE
    state = await world.state(parent)
    assert [m.role for m in state.messages] == ["USER", "ASSISTANT", "TOOL", "TOOL", "TOOL", "ASSISTANT"]
    results = [json.loads(m.content) for m in state.messages if m.role == "TOOL"]
    assert [r["child_session_id"] for r in results] == [
        str(by_task[t]["child_session_id"]) for t in ("one", "two", "three")
    ]
    assert all(r["success"] for r in results)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "all done")
    assert {e["delivery_status"] for e in await world.executions(parent)} == {"DELIVERED"}


async def test_a_parent_cancelled_meanwhile_gets_its_results_suppressed_and_is_not_resumed(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    parent = await world.session(delegating("only"))
    await world.run(parent)
    (execution,) = await world.executions(parent)
    await world.append(parent, ev.SessionPhaseChanged(phase="CANCELLED"))
    await run_until_idle(world.worker, execution["child_session_id"])
    (execution,) = await world.executions(parent)
    assert (execution["status"], execution["delivery_status"]) == ("COMPLETED", "SUPPRESSED")
    assert world.sent("ResumeSession") == []
    assert [m.role for m in (await world.state(parent)).messages] == ["USER", "ASSISTANT"]


async def test_a_replayed_round_creates_no_second_execution(tmp_path: Path) -> None:
    world = World(tmp_path)
    parent = await world.session(delegating("once"))
    await world.run(parent)
    state = await world.state(parent)
    round_ = state.messages[-1]
    assert round_.tool_calls is not None
    expected = execution_id_for(parent, round_.tool_calls[0]["id"])
    # The harness dies and the step is replayed: the call is started, so nothing is created.
    assert await world.run(parent) == StepOutcome.WAITING
    assert [e["execution_id"] for e in await world.executions(parent)] == [expected]
    assert len(world.sent("RunExecution")) == 1


async def test_refused_delegations_become_error_results_and_create_nothing(tmp_path: Path) -> None:
    world = World(tmp_path)
    calls = [
        {"name": "delegate", "arguments": {"agent_type": "nobody", "task": "x"}},
        {"name": "delegate", "arguments": {"agent_type": "coder", "task": "  "}},
        {"name": "delegate_followup", "arguments": {"child_session_id": "not-a-session", "task": "x"}},
    ]
    parent = await world.session(
        "#script " + json.dumps({"steps": [{"tool_calls": calls}, {"content": "fine"}]})
    )
    assert await world.run(parent) == StepOutcome.IDLE
    state = await world.state(parent)
    errors = [json.loads(m.content)["error"] for m in state.messages if m.role == "TOOL"]
    assert errors[0].startswith("unknown agent type 'nobody'; available:")
    assert "non-empty 'agent_type' and 'task'" in errors[1]
    assert errors[2] == "session not-a-session not found"
    assert await world.executions(parent) == []
    assert state.phase == "COMPLETED"


async def test_a_followup_to_another_sessions_child_is_refused(tmp_path: Path) -> None:
    world = World(tmp_path)
    parent = await world.session(delegating("first"))
    await world.run(parent)
    (execution,) = await world.executions(parent)
    child: UUID = execution["child_session_id"]
    followup = {"name": "delegate_followup", "arguments": {"child_session_id": str(child), "task": "more"}}
    other = await world.session("#script " + json.dumps({"steps": [{"tool_calls": [followup]}]}))
    await world.run(other)
    (result,) = [m for m in (await world.state(other)).messages if m.role == "TOOL"]
    assert json.loads(result.content)["error"] == f"session {child} was not delegated by this session"


async def test_a_followup_to_a_child_still_running_is_refused(tmp_path: Path) -> None:
    world = World(tmp_path)
    parent = await world.session(delegating("slow"))
    await world.run(parent)
    (execution,) = await world.executions(parent)
    child: UUID = execution["child_session_id"]
    call = {
        "id": "again",
        "name": "delegate_followup",
        "arguments": {"child_session_id": str(child), "task": "more"},
    }

    def follow_up_round(seq: int) -> ev.MessageRecorded:
        spec = ev.ToolCallSpec(id="again", name="delegate_followup", arguments=json.dumps(call["arguments"]))
        return ev.MessageRecorded(
            message_id=uuid4(), seq=seq, role="ASSISTANT", content="", tool_calls=[spec]
        )

    assert world.harness.delegation is not None
    recorded = await world.harness.delegation(await world.state(parent), [call], [follow_up_round])
    assert recorded.keep_going
    (refusal,) = [m for m in (await world.state(parent)).messages if m.tool_call_id == "again"]
    assert json.loads(refusal.content)["error"] == STILL_RUNNING.format(child)
    assert await world.executions(parent) == [execution]
