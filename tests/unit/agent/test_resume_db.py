"""Safe resume of the shared loop after a crash, against a fresh migrated PostgreSQL: the
half-written round is discarded by an event, no tool call runs twice, a recorded final
answer closes the run without the model, RESUMING turns back into RUNNING."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_agent import loop, tool_round
from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry
from muster_agent.loop import LoopDeps, run_until_idle
from muster_agent.models.base import ModelReply, ModelRequest
from muster_agent.models.scripted import ScriptedModel
from muster_contracts import events as ev
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore

from tests.databases import uows
from tests.unit.recovery.builders import assistant, record

SCRIPT = "#script " + json.dumps({"steps": [
    {"tool_calls": [
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}},
        {"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}},
        {"name": "write_file", "arguments": {"path": "c.txt", "content": "c"}},
    ]},
    {"content": "finished"},
]})


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, nothing catches it."""


class CountingModel:
    def __init__(self) -> None:
        self.calls = 0
        self.inner = ScriptedModel()

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        return await self.inner.complete(request)


async def session_with(pool: Pool, content: str, agent_type: str = "general") -> UUID:
    sid = uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(sid), [
            ev.SessionCreated(session_id=sid, user_id="alice", root_session_id=sid, agent_type=agent_type),
            ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content=content),
            ev.SessionPhaseChanged(phase="RUNNING"),
        ])
    return sid


def deps(pool: Pool, tmp_path: Path, model: Any) -> LoopDeps:
    return LoopDeps(uows=uows(pool), model=model, agents=AgentRegistry.load(), workspaces=tmp_path)


async def history(pool: Pool, sid: UUID) -> list[Any]:
    return list(await pool.fetch(
        "SELECT message_id, role, content, tool_call_id, discarded FROM messages WHERE session_id = $1 ORDER BY seq",
        sid,
    ))


async def test_a_round_cut_by_a_crash_is_discarded_and_no_tool_runs_twice(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance 4: the process dies while the second of three file tools runs."""
    sid = await session_with(pool, SCRIPT)
    real = tool_round.local_tool_call
    ran: list[str] = []

    def dies_on_b(workspace: Any, name: str, arguments: str) -> Callable[[], dict[str, Any]]:
        path = json.loads(arguments)["path"]
        ran.append(path)
        if path == "b.txt" and ran.count("b.txt") == 1:
            raise Crash
        return real(workspace, name, arguments)

    monkeypatch.setattr(tool_round, "local_tool_call", dies_on_b)
    model = CountingModel()
    with pytest.raises(Crash):
        await run_until_idle(deps(pool, tmp_path, model), sid)
    before = await history(pool, sid)
    assert [m["role"] for m in before] == ["USER", "ASSISTANT", "TOOL"]

    outcome = await run_until_idle(deps(pool, tmp_path, model), sid)  # the restarted runner

    assert outcome == loop.StepOutcome.IDLE
    (discard,) = await pool.fetch("SELECT payload FROM events WHERE stream_id = $1 AND type = 'MessagesDiscarded'",
                                  str(sid))
    assert discard["payload"]["message_ids"] == [str(before[1]["message_id"]), str(before[2]["message_id"])]
    after = await history(pool, sid)
    assert [(m["role"], m["discarded"]) for m in after] == [
        ("USER", False), ("ASSISTANT", True), ("TOOL", True),
        ("ASSISTANT", False), ("TOOL", False), ("TOOL", False), ("TOOL", False), ("ASSISTANT", False),
    ]
    assert ran == ["a.txt", "b.txt", "c.txt"]  # each tool ran (or was cut off) once
    results = [json.loads(m["content"]) for m in after[4:7]]
    assert results[0] == json.loads(before[2]["content"])  # a's recorded result, not a re-run
    assert results[1]["success"] is False and "interrupted" in results[1]["error"]
    assert results[2]["success"] is True
    starts = await pool.fetch("SELECT tool_call_id, count(*) AS n FROM tool_runs WHERE session_id = $1 "
                              "GROUP BY tool_call_id", sid)
    assert sorted(r["n"] for r in starts) == [1, 1, 1]
    assert not (tmp_path / str(sid) / "b.txt").exists()
    assert after[-1]["content"] == "finished"
    assert model.calls == 3  # the round, its repeat after the discard, the answer
    assert await pool.fetchval("SELECT phase FROM sessions WHERE session_id = $1", sid) == "COMPLETED"


async def test_a_round_with_a_delegation_is_never_discarded(pool: Pool, tmp_path: Path) -> None:
    sid = await session_with(pool, "go")
    calls = [
        {"id": "local", "name": "list_files", "arguments": {}},
        {"id": "child", "name": "delegate", "arguments": {"agent_type": "coder", "task": "t"}},
    ]
    await record(uows(pool), sid, lambda seq: [
        assistant(seq, calls), ev.ToolCallStarted(message_id=uuid4(), tool_call_id="local", name="list_files"),
    ])
    await loop.step(deps(pool, tmp_path, CountingModel()), await store.read_state(uows(pool), sid))
    after = await history(pool, sid)
    assert not any(m["discarded"] for m in after)
    (local,) = [m for m in after if m["tool_call_id"] == "local"]
    assert "interrupted" in json.loads(local["content"])["error"]


async def test_an_orphan_tool_message_is_discarded(pool: Pool, tmp_path: Path) -> None:
    sid = await session_with(pool, "hello")
    await record(uows(pool), sid, lambda seq: [
        ev.MessageRecorded(message_id=uuid4(), seq=seq, role="TOOL", content="{}", tool_call_id="nobody")
    ])
    model = CountingModel()
    await run_until_idle(deps(pool, tmp_path, model), sid)
    after = await history(pool, sid)
    assert [(m["role"], m["discarded"]) for m in after] == [("USER", False), ("TOOL", True), ("ASSISTANT", False)]
    assert model.calls == 1


async def test_resuming_turns_back_into_running_before_anything_else(pool: Pool, tmp_path: Path) -> None:
    sid = await session_with(pool, "hello")
    await record(uows(pool), sid, lambda seq: [ev.SessionPhaseChanged(phase="RESUMING")])
    await loop.step(deps(pool, tmp_path, CountingModel()), await store.read_state(uows(pool), sid))
    phases = await pool.fetch("SELECT payload->>'phase' AS phase FROM events WHERE stream_id = $1 "
                              "AND type = 'SessionPhaseChanged' ORDER BY position", str(sid))
    assert [p["phase"] for p in phases] == ["RUNNING", "RESUMING", "RUNNING"]
