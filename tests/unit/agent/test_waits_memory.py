"""Waits on the in-memory unit of work: an `ask` session's gated call waits for an
approval (approve runs it once, deny records the reason), `read_only` refuses at once,
`ask_user` waits for the answer, a LOCAL session's file tools wait for the client's result,
and every answer counts once. No database, no broker."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from muster_agent import answers
from muster_agent.barrier import settle
from muster_agent.loop import StepOutcome, run_until_idle
from muster_agent.waits import READ_ONLY
from muster_contracts import wait_events as we
from muster_runtime.uow.unit_of_work import Row

from tests.unit.agent.memory_world import World


def script(*steps: dict) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def call(name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


WRITE = call("write_file", path="notes.md", content="hello")


async def waits(world: World, sid: UUID) -> list[Row]:
    async with world.store.uow() as uow:
        return await uow.pending_waits(sid)


async def events_of(world: World, sid: UUID, kind: type) -> list:
    async with world.store.uow() as uow:
        return [s.event for s in await uow.read_stream(str(sid)) if isinstance(s.event, kind)]


async def test_ask_waits_for_approval_then_runs_the_tool_once(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(script(WRITE, {"content": "written"}), permission_level="ask")
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert state.phase == "WAITING_APPROVAL"
    (wait,) = await waits(world, sid)
    assert (wait["kind"], wait["detail"]["tool"], json.loads(wait["detail"]["arguments"])["path"]) == ("approval", "write_file", "notes.md")
    assert not (tmp_path / str(sid) / "notes.md").exists()
    assert await world.run(sid) == StepOutcome.IDLE  # a stray resume changes nothing
    assert len(await waits(world, sid)) == 1
    ack = await answers.answer_approval(world.store.uow, "alice", sid, wait["wait_id"], "approve", None)
    assert ack["decision"] == "approve"
    assert [m.reason for m in world.sent("ProcessSession")] == ["answered"]
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "written")
    assert (tmp_path / str(sid) / "notes.md").read_text() == "hello"
    assert json.loads(state.messages[2].content)["success"] is True
    assert await waits(world, sid) == []
    with pytest.raises(answers.AnswerRefused) as again:
        await answers.answer_approval(world.store.uow, "alice", sid, wait["wait_id"], "deny", None)
    assert again.value.code == "conflict"


async def test_a_denied_call_gets_the_reason_as_its_error_and_the_turn_goes_on(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(script(WRITE, {"content": "ok, not written"}), permission_level="ask")
    await world.run(sid)
    (wait,) = await waits(world, sid)
    await answers.answer_approval(world.store.uow, "alice", sid, wait["wait_id"], "deny", "wrong file")
    await world.run(sid)
    state = await world.state(sid)
    result = json.loads(next(m.content for m in state.messages if m.role == "TOOL"))
    assert result == {"success": False, "error": "denied by the user: wrong file"}
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "ok, not written")
    assert not (tmp_path / str(sid) / "notes.md").exists()
    (resolved,) = await events_of(world, sid, we.ApprovalResolved)
    assert (resolved.decision, resolved.reason) == ("deny", "wrong file")


async def test_unknown_and_foreign_answers_are_not_found(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(script(WRITE), permission_level="ask")
    await world.run(sid)
    (wait,) = await waits(world, sid)
    for user, approval in (("mallory", wait["wait_id"]), ("alice", uuid4())):
        with pytest.raises(answers.AnswerRefused) as refused:
            await answers.answer_approval(world.store.uow, user, sid, approval, "approve", None)
        assert refused.value.code == "not_found"
    with pytest.raises(answers.AnswerRefused) as wrong_kind:  # an approval is not a question
        await answers.answer_question(world.store.uow, "alice", sid, wait["wait_id"], "yes")
    assert wrong_kind.value.code == "not_found"
    assert len(await waits(world, sid)) == 1


async def test_read_only_refuses_changes_at_once_and_lets_reads_run(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(
        script({"tool_calls": [{"name": "write_file", "arguments": {"path": "a", "content": "x"}},
                               {"name": "list_files", "arguments": {}}]}, {"content": "fine"}),
        permission_level="read_only",
    )
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    write, listing = (json.loads(m.content) for m in state.messages if m.role == "TOOL")
    assert write == {"success": False, "error": READ_ONLY.format(tool="write_file")}
    assert listing["success"] is True
    assert state.phase == "COMPLETED" and await waits(world, sid) == []


async def test_a_permission_change_applies_from_the_next_tool_call(tmp_path: Path) -> None:
    from muster_contracts.session_events import SessionSettingsChanged

    world = World(tmp_path)
    sid = await world.session(script(WRITE, {"content": "done"}))
    await world.append(sid, SessionSettingsChanged(permission_level="ask"))  # after the state was made
    await world.run(sid)
    assert (await world.state(sid)).phase == "WAITING_APPROVAL"


async def test_ask_user_waits_for_the_answer_which_becomes_the_result(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(script(call("ask_user", question="Which?", options=["a", "b"]), {"content": "thanks"}))
    assert await world.run(sid) == StepOutcome.IDLE
    assert (await world.state(sid)).phase == "WAITING_INPUT"
    (asked,) = await events_of(world, sid, we.QuestionAsked)
    assert (asked.question, asked.options) == ("Which?", ["a", "b"])
    await answers.answer_question(world.store.uow, "alice", sid, asked.question_id, "b")
    await world.run(sid)
    state = await world.state(sid)
    tool = next(m for m in state.messages if m.role == "TOOL")
    assert (tool.tool_call_id, json.loads(tool.content)) == (asked.tool_call_id, {"success": True, "answer": "b"})
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "thanks")


async def test_subagents_do_not_get_ask_user(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(script(call("ask_user", question="?"), {"content": "ok"}), session_type="SUBAGENT")
    await run_until_idle(world.harness, sid)
    state = await world.state(sid)
    assert "not available" in json.loads(state.messages[2].content)["error"]
    assert await waits(world, sid) == []


async def test_local_file_tools_wait_for_the_client_and_its_first_result_counts(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(script(WRITE, {"content": "done"}), execution_mode="LOCAL")
    await world.run(sid)
    state = await world.state(sid)
    assert state.phase == "WAITING_CLIENT"
    (request,) = await events_of(world, sid, we.ToolRequested)
    assert (request.name, json.loads(request.arguments)["content"]) == ("write_file", "hello")
    assert request.tool_call_id in state.started_tool_calls  # never run twice
    result = json.dumps({"success": True, "path": "notes.md"})
    assert "duplicate" not in await answers.answer_tool_request(world.store.uow, "alice", sid, request.request_id, result)
    repeat = await answers.answer_tool_request(world.store.uow, "alice", sid, request.request_id, result)
    assert repeat["duplicate"] is True
    await world.run(sid)
    state = await world.state(sid)
    assert [m.content for m in state.messages if m.role == "TOOL"] == [result]
    assert state.phase == "COMPLETED"
    assert not (tmp_path / str(sid) / "notes.md").exists()  # it ran on the client, not here


async def test_a_delegation_in_an_ask_session_waits_and_the_parent_keeps_its_barrier(tmp_path: Path) -> None:
    world = World(tmp_path)
    calls = [{"name": "delegate", "arguments": {"agent_type": "coder", "task": t}} for t in ("one", "two")]
    sid = await world.session(script({"tool_calls": calls}, {"content": "all done"}), permission_level="ask")
    await world.run(sid)
    (first,) = await waits(world, sid)
    assert first["detail"]["tool"] == "delegate" and await world.executions(sid) == []
    await answers.answer_approval(world.store.uow, "alice", sid, first["wait_id"], "approve", None)
    await world.run(sid)
    (execution,) = await world.executions(sid)  # the first runs; the second waits for approval
    (second,) = await waits(world, sid)
    assert (await world.state(sid)).phase == "WAITING_APPROVAL"
    assert await run_until_idle(world.worker, execution["child_session_id"]) == StepOutcome.IDLE
    assert await settle(world.store.uow, sid) == 0  # not suppressed, not delivered: the round is open
    assert (await world.executions(sid))[0]["delivery_status"] == "PENDING"
    await answers.answer_approval(world.store.uow, "alice", sid, second["wait_id"], "approve", None)
    assert await world.run(sid) == StepOutcome.WAITING
    (_, later) = await world.executions(sid)
    await run_until_idle(world.worker, later["child_session_id"])
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "all done")
    assert {e["delivery_status"] for e in await world.executions(sid)} == {"DELIVERED"}


async def test_a_childs_approval_resumes_the_child_through_its_worker_then_the_parent(tmp_path: Path) -> None:
    world = World(tmp_path)
    task = script(WRITE, {"content": "child wrote"})
    delegate = {"tool_calls": [{"name": "delegate", "arguments": {"agent_type": "coder", "task": task}}]}
    sid = await world.session(script(delegate, {"content": "parent done"}), permission_level="ask")
    await world.run(sid)
    (approve_delegate,) = await waits(world, sid)
    await answers.answer_approval(world.store.uow, "alice", sid, approve_delegate["wait_id"], "approve", None)
    await world.run(sid)
    (execution,) = await world.executions(sid)
    child = execution["child_session_id"]
    assert (await world.state(child)).permission_level == "ask"  # inherited
    await run_until_idle(world.worker, child)
    assert (await world.state(child)).phase == "WAITING_APPROVAL"
    (child_wait,) = await waits(world, child)
    await answers.answer_approval(world.store.uow, "alice", child, child_wait["wait_id"], "approve", None)
    (run,) = [m for m in world.sent("RunExecution") if m.child_session_id == child][-1:]
    assert run.execution_id == execution["execution_id"]
    await run_until_idle(world.worker, child)
    assert (await world.state(child)).phase == "COMPLETED"
    assert len(world.sent("ResumeSession")) == 1
    await world.run(sid)
    state = await world.state(sid)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "parent done")
    assert (tmp_path / str(sid) / "notes.md").read_text() == "hello"
