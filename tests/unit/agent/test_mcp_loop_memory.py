"""MCP tools in the real loop, on the in-memory unit of work, against the stdio test server:
offered to the model, called by a `#script` step and recorded like every tool
(`ToolCallStarted` before the call, the TOOL result after), schema errors without a call,
the server killed mid-call (a clear error, the turn goes on), `ask` (an approval, then the
call runs once), `read_only` (refused), and a crash mid-call (never run again)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from muster_agent import answers
from muster_agent.agents import AgentRegistry
from muster_agent.loop import LoopDeps, StepOutcome, run_until_idle
from muster_agent.mcp_tools.pool import McpTools
from muster_agent.models.base import ModelReply, ModelRequest
from muster_agent.models.scripted import ScriptedModel
from muster_agent.tool_round import INTERRUPTED
from muster_contracts import events as ev

from tests.mcp.support import agents_toml, calls_made, wait_for
from tests.unit.agent.memory_world import World


def script(*steps: dict[str, Any]) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@dataclass
class Recording:
    """The scripted model, keeping the tools each request offered."""

    inner: ScriptedModel = field(default_factory=ScriptedModel)
    offered: list[list[str]] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.offered.append([tool["function"]["name"] for tool in request.tools])
        return await self.inner.complete(request)


@dataclass
class McpWorld:
    world: World
    deps: LoopDeps
    model: Recording
    calls: Path
    started: Path

    async def session(self, content: str, permission_level: str = "auto") -> UUID:
        return await self.world.session(content, agent_type="mcp", permission_level=permission_level)

    async def run(self, sid: UUID) -> str:
        return await run_until_idle(self.deps, sid)

    async def tool_results(self, sid: UUID) -> list[dict[str, Any]]:
        state = await self.world.state(sid)
        return [json.loads(m.content) for m in state.messages if m.role == "TOOL"]

    async def event_types(self, sid: UUID) -> list[str]:
        async with self.world.store.uow() as uow:
            return [s.type for s in await uow.read_stream(str(sid))]


@pytest.fixture
async def mw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[McpWorld]:
    calls, started = tmp_path / "calls.log", tmp_path / "slow.pid"
    monkeypatch.setenv("MCP_TEST_CALLS", str(calls))
    monkeypatch.setenv("MCP_TEST_SLOW_STARTED", str(started))
    world = World(tmp_path / "workspaces")
    model = Recording()
    mcp = McpTools(start_timeout_s=30, call_timeout_s=30)
    agents = AgentRegistry.load(agents_toml(tmp_path / "agents.toml"))
    deps = LoopDeps(world.store.uow, model, agents, world.workspaces, mcp=mcp)
    yield McpWorld(world, deps, model, calls, started)
    await mcp.close()


async def test_mcp_tools_are_offered_called_and_recorded(mw: McpWorld) -> None:
    sid = await mw.session(script(call("tests__echo", text="hi", times=2), {"content": "said it"}))
    assert await mw.run(sid) == StepOutcome.IDLE
    assert mw.model.offered[0] == ["read_file", "tests__echo", "tests__slow"]
    state = await mw.world.state(sid)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "said it")
    assert await mw.tool_results(sid) == [{"success": True, "content": "hi hi", "structured_content": {"result": "hi hi"}}]
    types = await mw.event_types(sid)
    assert types.index("ToolCallStarted") < max(i for i, t in enumerate(types) if t == "MessageRecorded")
    assert calls_made(mw.calls) == ["echo hi"]


async def test_arguments_failing_the_schema_get_an_error_without_a_call(mw: McpWorld) -> None:
    sid = await mw.session(script(call("tests__echo", times="x"), {"content": "ok"}))
    await mw.run(sid)
    (result,) = await mw.tool_results(sid)
    assert result == {"success": False, "error": "invalid arguments for tests__echo: 'text' is a required property"}
    assert "ToolCallStarted" not in await mw.event_types(sid)  # refused before its start
    assert calls_made(mw.calls) == []
    assert (await mw.world.state(sid)).phase == "COMPLETED"


async def test_the_server_killed_mid_call_gives_a_clear_error_and_the_turn_goes_on(mw: McpWorld) -> None:
    sid = await mw.session(script(call("tests__slow", seconds=60), call("tests__echo", text="again"), {"content": "went on"}))
    run = asyncio.create_task(mw.run(sid))
    await wait_for(mw.started.exists)
    os.kill(int(mw.started.read_text()), signal.SIGKILL)
    assert await asyncio.wait_for(run, 60) == StepOutcome.IDLE
    killed, again = await mw.tool_results(sid)
    assert killed["success"] is False and "closed the connection during the call" in killed["error"]
    assert again == {"success": True, "content": "again", "structured_content": {"result": "again"}}  # restarted
    state = await mw.world.state(sid)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "went on")
    assert calls_made(mw.calls) == ["slow 60.0", "echo again"]


async def test_ask_waits_for_an_approval_then_the_call_runs_once(mw: McpWorld) -> None:
    sid = await mw.session(script(call("tests__echo", text="approved"), {"content": "done"}), "ask")
    assert await mw.run(sid) == StepOutcome.IDLE
    assert (await mw.world.state(sid)).phase == "WAITING_APPROVAL"
    async with mw.world.store.uow() as uow:
        (wait,) = await uow.pending_waits(sid)
    assert (wait["detail"]["tool"], json.loads(wait["detail"]["arguments"])) == ("tests__echo", {"text": "approved"})
    assert calls_made(mw.calls) == []
    await answers.answer_approval(mw.world.store.uow, "alice", sid, wait["wait_id"], "approve", None)
    await mw.run(sid)
    await mw.run(sid)  # a stray resume runs nothing again
    assert await mw.tool_results(sid) == [{"success": True, "content": "approved", "structured_content": {"result": "approved"}}]
    assert calls_made(mw.calls) == ["echo approved"]
    assert (await mw.world.state(sid)).phase == "COMPLETED"


async def test_read_only_refuses_mcp_tools(mw: McpWorld) -> None:
    sid = await mw.session(script(call("tests__echo", text="no"), {"content": "refused"}), "read_only")
    await mw.run(sid)
    (result,) = await mw.tool_results(sid)
    assert result["success"] is False and "read_only" in result["error"] and "tests__echo" in result["error"]
    assert calls_made(mw.calls) == []


async def test_a_call_cut_off_by_a_crash_is_never_run_again(mw: McpWorld) -> None:
    """The runner dies (its task cancelled, as a lost lease does) while the server works;
    the next runner discards the round, and the call the model repeats gets "interrupted"."""
    sid = await mw.session(script(call("tests__slow", seconds=60), {"content": "after the crash"}))
    run = asyncio.create_task(mw.run(sid))
    await wait_for(mw.started.exists)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await mw.world.append(sid, ev.SessionPhaseChanged(phase="RESUMING"))
    assert await mw.run(sid) == StepOutcome.IDLE
    state = await mw.world.state(sid)
    assert (state.phase, state.messages[-1].content) == ("COMPLETED", "after the crash")
    assert await mw.tool_results(sid) == [{"success": False, "error": INTERRUPTED}]
    assert "MessagesDiscarded" in await mw.event_types(sid)
    assert calls_made(mw.calls) == ["slow 60.0"]  # started once, never again
