"""The agent loop on the in-memory unit of work: turns, local tool rounds, queued input,
cancellation and a crash's tail, with no database."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from muster_agent.loop import StepOutcome
from muster_agent.models.base import ModelReply, ModelRequest, Usage
from muster_contracts import events as ev

from tests.unit.agent.memory_world import World


def script(*steps: dict[str, object]) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def write(path: str, content: str) -> dict[str, object]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


async def test_a_turn_without_tools_records_the_answer_and_completes(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session("hello")
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert [m.role for m in state.messages] == ["USER", "ASSISTANT"]
    assert state.phase == "COMPLETED"


async def test_a_local_tool_round_runs_each_tool_once_then_answers(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(
        script({"tool_calls": [write("a.txt", "A"), write("b.txt", "B")]}, {"content": "ok"})
    )
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert [m.role for m in state.messages] == ["USER", "ASSISTANT", "TOOL", "TOOL", "ASSISTANT"]
    assert [m.content for m in state.messages][-1] == "ok"
    assert len(state.started_tool_calls) == 2
    assert (tmp_path / str(sid) / "a.txt").read_text() == "A"
    assert (tmp_path / str(sid) / "b.txt").read_text() == "B"


async def test_input_queued_while_running_starts_the_next_turn_when_one_ends(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session("first")
    queued = ev.UserMessageQueued(message_id=uuid4(), content="second")
    await world.append(sid, queued)
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert [(m.role, m.content) for m in state.messages if m.role == "USER"] == [
        ("USER", "first"),
        ("USER", "second"),
    ]
    assert [m.role for m in state.messages] == ["USER", "ASSISTANT", "USER", "ASSISTANT"]
    assert state.messages[2].message_id == queued.message_id
    assert state.phase == "COMPLETED"


class CancelledDuringCall:
    """The user cancels while the model is thinking: its answer must not be recorded."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def complete(self, request: ModelRequest) -> ModelReply:
        await self.world.append(UUID(request.session_id), ev.SessionPhaseChanged(phase="CANCELLED"))
        return ModelReply(
            content="too late", tool_calls=[], usage=Usage(prompt_tokens=1, completion_tokens=1)
        )


async def test_a_cancelled_turn_records_no_further_answer(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.model = CancelledDuringCall(world)
    sid = await world.session("hello")
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert [m.role for m in state.messages] == ["USER"]
    assert state.phase == "CANCELLED"


async def test_a_crash_tail_is_discarded_and_its_tool_is_not_run_again(tmp_path: Path) -> None:
    """The runner died after recording a tool's start but not its result."""
    world = World(tmp_path)
    sid = await world.session(script({"tool_calls": [write("x.txt", "X")]}, {"content": "after"}))
    cut = ev.ToolCallSpec(id="cut", name="write_file", arguments=json.dumps({"path": "x.txt", "content": "X"}))
    answer = ev.MessageRecorded(message_id=uuid4(), seq=2, role="ASSISTANT", content="", tool_calls=[cut])
    await world.append(
        sid,
        answer,
        ev.ToolCallStarted(message_id=answer.message_id, tool_call_id="cut", name="write_file"),
        ev.SessionPhaseChanged(phase="RESUMING"),
    )
    assert await world.run(sid) == StepOutcome.IDLE
    state = await world.state(sid)
    assert answer.message_id not in {m.message_id for m in state.messages}
    assert state.phase == "COMPLETED"
    async with world.store.uow() as uow:
        kinds = [s.type for s in await uow.read_stream(str(sid))]
    assert "MessagesDiscarded" in kinds and kinds.count("SessionPhaseChanged") >= 3


async def test_a_step_that_loses_a_race_reloads_the_state_and_decides_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from muster_agent import loop
    from muster_runtime.store.eventstore import ConcurrencyError

    world = World(tmp_path)
    sid = await world.session("hello")
    real_step, real_read = loop.step, loop.store.read_state
    steps: list[object] = []
    reads: list[UUID] = []

    async def racing_step(deps: loop.LoopDeps, state: loop.SessionState | None) -> loop.Step:
        steps.append(state)
        if len(steps) == 1:
            raise ConcurrencyError("another writer moved first")
        return await real_step(deps, state)

    async def counted_read(uows: object, session_id: UUID) -> loop.SessionState:
        reads.append(session_id)
        return await real_read(uows, session_id)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "step", racing_step)
    monkeypatch.setattr(loop.store, "read_state", counted_read)
    assert await world.run(sid) == StepOutcome.IDLE
    # Loaded once at the start and once more after the lost race; never a stale state again.
    assert reads[:2] == [sid, sid]
    assert steps[0] is not steps[1]
    assert (await world.state(sid)).phase == "COMPLETED"


class Previews:
    def __init__(self) -> None:
        self.offered: list[tuple[str, str, int, str]] = []
        self.after_versions: set[int] = set()
        self.ended: list[str] = []

    def offer(self, session_id: str, message_id: str, index: int, text: str, after_version: int = 0) -> None:
        self.offered.append((session_id, message_id, index, text))
        self.after_versions.add(after_version)

    def end(self, message_id: str) -> None:
        self.ended.append(message_id)


async def test_streamed_pieces_name_the_message_the_loop_then_records(tmp_path: Path) -> None:
    world = World(tmp_path)
    previews = Previews()
    sid = await world.session(script({"content": "Hello world", "stream": {"chunk": 3, "delay_ms": 0}}))
    deps = world.harness
    deps.deltas = previews
    from muster_agent.loop import run_until_idle

    assert await run_until_idle(deps, sid) == StepOutcome.IDLE
    answer = (await world.state(sid)).messages[-1]
    assert answer.role == "ASSISTANT"
    assert previews.offered == [
        (str(sid), str(answer.message_id), i, text) for i, text in enumerate(["Hel", "lo ", "wor", "ld"])
    ]
    assert previews.ended == [str(answer.message_id)]  # told once the model call was over
    # Each piece names the version the session was at when the model was called: past the
    # user's message and RUNNING, short of the answer (the gateway orders them by it).
    [after] = previews.after_versions
    assert 3 <= after < (await world.state(sid)).version
