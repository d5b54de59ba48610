"""The harness's claim of a session command, in memory: a turn that already runs is claimed
in one step and its loop starts from the state the claim read; an idle session with queued
input has its turn started under its lock, and its loop starts from the state the claim
carried forward; a command applied before starts nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from muster_agent.loop import LoopDeps, run_until_idle
from muster_agent.models.base import ModelReply, ModelRequest, Usage
from muster_agent.session_store import SessionState
from muster_contracts import events as ev
from muster_contracts.commands import ProcessSession, ResumeSession
from muster_harness import handlers
from muster_harness.handlers import HarnessDeps, process_session

from tests.unit.agent.memory_world import World


class Runners:
    """Records the bodies the handler starts instead of running them in the background."""

    owner = "harness-1"

    def __init__(self) -> None:
        self.started: list[tuple[UUID, Callable[[], Awaitable[None]]]] = []

    def is_running(self, key: UUID) -> bool:
        return False

    def start(self, key: UUID, body: Callable[[], Awaitable[None]]) -> None:
        self.started.append((key, body))


class Recorder:
    """A model that answers at once and keeps the histories it was asked about."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []
        self.titled: list[str] = []  # the first messages it was asked to title

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.purpose == "title":
            self.titled.append(request.messages[-1]["content"])
            return ModelReply(content="A title", tool_calls=(), usage=Usage())
        self.seen.append([m["content"] for m in request.messages if m["role"] == "user"])
        return ModelReply(content="done", tool_calls=(), usage=Usage())


def deps(world: World, runners: Runners) -> HarnessDeps:
    return HarnessDeps(loop=world.harness, runners=runners, lease_ttl_s=60)  # type: ignore[arg-type]


async def test_a_running_turn_is_claimed_once_under_its_lock_and_its_loop_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, runners = World(tmp_path, model=Recorder()), Runners()
    sid = await world.session("the task")  # RUNNING, its USER message recorded
    resume = ResumeSession(session_id=sid)
    await process_session(resume, deps(world, runners))
    await process_session(resume, deps(world, runners))  # a redelivery
    assert [key for key, _ in runners.started] == [sid]
    starts = await run_started(runners, monkeypatch)
    assert starts == [None]  # a turn that already ran: the loop reads where it stands
    assert world.model.seen == [["the task"]]
    assert (await world.state(sid)).phase == "COMPLETED"
    assert world.model.titled == []  # a resumed turn names nothing


async def test_an_idle_session_with_queued_input_starts_its_turn_under_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, runners = World(tmp_path, model=Recorder()), Runners()
    sid = await world.session("first")
    await world.append(sid, ev.SessionPhaseChanged(phase="COMPLETED"))
    queued = uuid4()
    await world.append(sid, ev.UserMessageQueued(message_id=queued, content="second"))
    await process_session(ProcessSession(session_id=sid), deps(world, runners))
    state = await world.state(sid)
    assert state.phase == "RUNNING" and state.messages[-1].message_id == queued
    assert [key for key, _ in runners.started] == [sid]
    starts = await run_started(runners, monkeypatch)
    assert starts == [state]  # the turn's state as the claim started it, not a load of its own
    assert world.model.seen == [["first", "second"]]
    # The session had no title: the turn started names it, recorded as a settings change.
    assert world.model.titled == ["second"]
    async with world.store.uow() as uow:
        assert (await uow.session(sid)).title == "A title"  # type: ignore[union-attr]


async def run_started(runners: Runners, monkeypatch: pytest.MonkeyPatch) -> list[SessionState | None]:
    """Run the body the handler started; returns the states its loop was started from."""
    starts: list[SessionState | None] = []

    async def loop(deps: LoopDeps, session_id: UUID, state: SessionState | None = None) -> str:
        starts.append(state)
        return await run_until_idle(deps, session_id, state)

    monkeypatch.setattr(handlers, "run_until_idle", loop)
    await runners.started[0][1]()
    return starts
