"""Compaction on the in-memory unit of work: a session with a small budget runs many
turns, the model's context stays under the budget, boundaries fall between turns (never
inside a tool round), every message stays stored, and a crash during compaction leaves
none or one whole compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_agent.compaction import Budget
from muster_agent.loop import StepOutcome, run_until_idle
from muster_agent.models.base import ModelReply, ModelRequest
from muster_agent.models.scripted import ScriptedModel
from muster_agent.tokens import chat_tokens
from muster_contracts import events as ev

from tests.unit.agent.memory_world import World

BUDGET = 2000


class Recording:
    """The scripted model, keeping every request it was sent."""

    def __init__(self) -> None:
        self.inner = ScriptedModel()
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return await self.inner.complete(request)


def turn(i: int) -> str:
    if i % 3 == 0:  # every third turn has a tool round, which a boundary must never split
        step = {"tool_calls": [{"name": "write_file", "arguments": {"path": f"t{i}.txt", "content": "x" * 200}}]}
        return "#script " + json.dumps({"steps": [step, {"content": f"wrote t{i}.txt " + "y" * 150}]})
    return f"turn {i}: " + "lorem ipsum " * 25


async def queue(world: World, sid: UUID, contents: list[str]) -> None:
    await world.append(sid, *(ev.UserMessageQueued(message_id=uuid4(), content=c) for c in contents))


async def compactions(world: World, sid: UUID) -> list[ev.CompactionRecorded]:
    async with world.store.uow() as uow:
        stream = await uow.read_stream(str(sid))
    return [s.event for s in stream if isinstance(s.event, ev.CompactionRecorded)]


def assert_valid_chat(messages: list[dict[str, Any]]) -> None:
    """Every TOOL message answers a call of the assistant message before it."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls", [])}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, message
            open_calls.discard(message["tool_call_id"])


async def test_thirty_turns_on_a_small_budget_stay_under_it_and_keep_every_message(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.model = model = Recording()
    sid = await world.session(turn(0))
    await queue(world, sid, [turn(i) for i in range(1, 30)])
    deps = world.harness
    deps.budget = Budget(context_tokens=BUDGET)
    assert await run_until_idle(deps, sid) == StepOutcome.IDLE

    turns = [r for r in model.requests if r.purpose == "turn"]
    assert all(chat_tokens(r.messages) <= BUDGET for r in turns)
    for request in turns:
        assert_valid_chat(request.messages)
    done = await compactions(world, sid)
    assert len(done) >= 3
    state = await world.state(sid)
    assert [m.role for m in state.messages].count("USER") == 30  # nothing deleted
    by_seq = {m.seq: m for m in state.messages}
    for compaction in done:  # a boundary ends a turn: the next message starts one
        assert by_seq[compaction.boundary_seq + 1].role == "USER"
        assert compaction.tokens_after < compaction.tokens_before
        assert compaction.summary.startswith("summary of ")
    last = turns[-1].messages
    assert last[1]["content"].endswith(done[-1].summary)  # system prompt, summary, then the rest
    assert sum(m["role"] == "user" for m in last) < 30
    assert state.phase == "COMPLETED"


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, nothing catches it."""


class DiesSummarising(Recording):
    def __init__(self) -> None:
        super().__init__()
        self.died = False

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.purpose == "summary" and not self.died:
            self.died = True
            raise Crash()
        return await super().complete(request)


async def test_a_crash_during_compaction_leaves_none_then_one_whole_compaction(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.model = model = DiesSummarising()
    sid = await world.session(turn(1))
    await queue(world, sid, [turn(i) for i in range(2, 12)])
    deps = world.harness
    deps.budget = Budget(context_tokens=BUDGET)
    with pytest.raises(Crash):
        await run_until_idle(deps, sid)
    assert await compactions(world, sid) == []
    assert await run_until_idle(deps, sid) == StepOutcome.IDLE  # the runner that takes over
    first, *_ = await compactions(world, sid)
    following = next(r for r in model.requests if r.purpose == "turn" and len(r.messages) > 1
                     and r.messages[1]["content"].endswith(first.summary))
    assert_valid_chat(following.messages)
    assert (await world.state(sid)).phase == "COMPLETED"


async def test_a_crash_tail_after_the_boundary_is_discarded_and_the_turn_goes_on(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(turn(1))
    await queue(world, sid, [turn(i) for i in range(2, 16)])
    deps = world.harness
    deps.budget = Budget(context_tokens=BUDGET)
    await run_until_idle(deps, sid)
    (*_, compaction) = await compactions(world, sid)
    # A new turn whose tool round was cut by a crash.
    state = await world.state(sid)
    user = ev.MessageRecorded(message_id=uuid4(), seq=state.message_count + 1, role="USER", content="#script " + json.dumps(
        {"steps": [{"tool_calls": [{"name": "write_file", "arguments": {"path": "cut.txt", "content": "c"}}]},
                   {"content": "finished after the crash"}]}))
    call = ev.ToolCallSpec(id="cut", name="write_file", arguments=json.dumps({"path": "cut.txt", "content": "c"}))
    cut = ev.MessageRecorded(message_id=uuid4(), seq=user.seq + 1, role="ASSISTANT", content="", tool_calls=[call])
    await world.append(sid, user, ev.SessionPhaseChanged(phase="RESUMING"), cut,
                       ev.ToolCallStarted(message_id=cut.message_id, tool_call_id="cut", name="write_file"))
    assert await run_until_idle(deps, sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert cut.message_id not in {m.message_id for m in state.messages}
    assert user.message_id in {m.message_id for m in state.messages}
    assert (await compactions(world, sid))[-1].boundary_seq >= compaction.boundary_seq
    assert state.messages[-1].content == "finished after the crash" and state.phase == "COMPLETED"


async def test_turns_that_delegate_keep_delegating_after_compactions(tmp_path: Path) -> None:
    """After a compaction the request is shorter; a replayed-looking tool call must not be
    mistaken for one already started (the step would wait for children forever)."""
    world = World(tmp_path)
    deps = world.harness
    deps.budget = Budget(context_tokens=BUDGET)
    task = "#script " + json.dumps({"steps": [{"content": "child answer " * 20}]})
    delegate = {"tool_calls": [{"name": "delegate", "arguments": {"agent_type": "coder", "task": task}}]}
    content = "#script " + json.dumps({"steps": [delegate, {"content": "parent answer " * 10}]})
    sid = await world.session(content)
    for done in range(1, 13):
        assert await run_until_idle(deps, sid) == StepOutcome.WAITING
        executions = await world.executions(sid)
        assert len(executions) == done  # a new child every turn
        await run_until_idle(world.worker, executions[-1]["child_session_id"])
        assert await run_until_idle(deps, sid) == StepOutcome.IDLE
        await queue(world, sid, [content])
        await world.append(sid, ev.SessionPhaseChanged(phase="RUNNING"))  # as the harness starts a turn
        state = await world.state(sid)
        async with world.store.uow() as uow:
            queued = await uow.next_queued_input(sid)
            assert queued is not None
            await uow.append(str(sid), [ev.MessageRecorded(
                message_id=queued["message_id"], seq=state.message_count + 1, role="USER", content=content)],
                expected_version=None)  # fmt: skip
    assert len(await compactions(world, sid)) >= 2
