"""The worker taking over an execution, against a fresh migrated PostgreSQL: a recorded
final answer is finished without calling the model (acceptance 7), a child whose phase
was never set is still run (acceptance 9)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_agent.agents import AgentRegistry
from muster_agent.barrier import settle
from muster_agent.delegation import execution_id_for
from muster_agent.executions import finish_execution
from muster_agent.loop import LoopDeps
from muster_agent.models.base import ModelReply, ModelRequest, Usage
from muster_agent.models.scripted import ScriptedModel
from muster_agent.runners import Runners
from muster_agent.stopping import DEADLINE_PASSED
from muster_contracts import events as ev
from muster_contracts.commands import RunExecution
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_subagent_worker.handlers import WorkerDeps, run_execution

from tests.databases import uows
from tests.unit.recovery.builders import (
    assistant,
    delegate_call,
    delegating_parent,
    execution,
    outbox_commands,
    record,
    running_session,
)


class NoModel:
    async def complete(self, request: ModelRequest) -> ModelReply:
        raise AssertionError("the model must not be called again")


async def run(pool: Pool, tmp_path: Path, eid: UUID, model: Any) -> None:
    row = await execution(uows(pool), eid)
    loop = LoopDeps(uows=uows(pool), model=model, agents=AgentRegistry.load(), workspaces=tmp_path, on_close=finish_execution)
    runners = Runners(pool, f"worker-{uuid4()}", 10.0)
    command = RunExecution(execution_id=eid, child_session_id=row["child_session_id"],
                           parent_session_id=row["parent_session_id"])
    await run_execution(command, WorkerDeps(loop=loop, runners=runners, lease_ttl_s=10.0))
    assert runners.is_running(eid)
    await runners.join(eid)  # the run is a background task of the runner


@pytest.mark.parametrize("phase_recorded", [False, True], ids=["answer-only", "answer-and-phase"])
async def test_a_recorded_final_answer_is_delivered_without_a_new_model_call(
    pool: Pool, tmp_path: Path, phase_recorded: bool
) -> None:
    parent, (eid,) = await delegating_parent(uows(pool), ["c"])
    child = (await execution(uows(pool), eid))["child_session_id"]
    answer = assistant(0, [], content="the original answer")
    await record(uows(pool), child, lambda seq: [
        answer.model_copy(update={"seq": seq}),
        *([ev.SessionPhaseChanged(phase="COMPLETED")] if phase_recorded else []),
    ])
    await run(pool, tmp_path, eid, NoModel())
    row = await execution(uows(pool), eid)
    assert (row["status"], row["result"], row["final_message_id"]) == (
        "COMPLETED", "the original answer", answer.message_id)
    # The worker settled the barrier in the transaction that finished the last child:
    # delivered and resumed already, so recovery finds nothing left to do.
    assert row["delivery_status"] == "DELIVERED"
    assert len(await outbox_commands(pool, "ResumeSession", "session_id", parent)) == 1
    assert await settle(uows(pool), parent) == 0
    (tool,) = await pool.fetch("SELECT content FROM messages WHERE session_id = $1 AND role = 'TOOL'", parent)
    assert json.loads(tool["content"])["result"] == "the original answer"


async def test_an_execution_whose_child_phase_was_never_set_still_runs(pool: Pool, tmp_path: Path) -> None:
    parent = await running_session(uows(pool))
    await record(uows(pool), parent, lambda seq: [assistant(seq, [delegate_call("c")])])
    eid = execution_id_for(parent, "c")
    child, task = uuid4(), uuid4()
    async with pool.acquire() as conn, conn.transaction():  # created, then killed: no phase
        await eventstore.append(conn, str(child), [
            ev.SessionCreated(session_id=child, user_id="alice", session_type="SUBAGENT", parent_session_id=parent,
                              root_session_id=parent, agent_type="coder"),
            ev.MessageRecorded(message_id=task, seq=1, role="USER", content="#script {\"steps\": [{\"content\": \"ok\"}]}"),
        ])
        await eventstore.append(conn, str(eid), [ev.ExecutionStarted(
            execution_id=eid, parent_session_id=parent, parent_tool_call_id="c", parent_message_id=uuid4(),
            child_session_id=child, user_id="alice", agent_type="coder", invocation_type="DELEGATE", task="t",
            round=1, start_message_id=task, deadline_at=datetime.now(UTC) + timedelta(hours=1),
        )])
    assert await pool.fetchval("SELECT phase FROM sessions WHERE session_id = $1", child) is None
    await run(pool, tmp_path, eid, ScriptedModel())
    row = await execution(uows(pool), eid)
    assert (row["status"], row["result"]) == ("COMPLETED", "ok")
    assert await pool.fetchval("SELECT phase FROM sessions WHERE session_id = $1", child) == "COMPLETED"


class Answers:
    """A model that answers at once, without tool calls."""

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(content="child answer", tool_calls=(), usage=Usage())


async def test_the_last_child_to_finish_settles_the_barrier_in_its_own_transaction(
    pool: Pool, tmp_path: Path
) -> None:
    parent, (first, second) = await delegating_parent(uows(pool), ["a", "b"])
    await run(pool, tmp_path, first, Answers())
    assert (await execution(uows(pool), first))["delivery_status"] == "PENDING"  # a sibling still runs
    assert await outbox_commands(pool, "ResumeSession", "session_id", parent) == []
    await run(pool, tmp_path, second, Answers())
    rows = [await execution(uows(pool), eid) for eid in (first, second)]
    assert [(r["status"], r["delivery_status"]) for r in rows] == [("COMPLETED", "DELIVERED")] * 2
    tools = await pool.fetch(
        "SELECT tool_call_id FROM messages WHERE session_id = $1 AND role = 'TOOL' ORDER BY seq", parent
    )
    assert [t["tool_call_id"] for t in tools] == ["a", "b"]  # in tool-call order
    assert len(await outbox_commands(pool, "ResumeSession", "session_id", parent)) == 1
    assert await settle(uows(pool), parent) == 0  # recovery, reacting afterwards, finds it done


async def test_a_child_that_is_not_the_last_closes_in_one_statement_and_the_last_settles(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[str] = []
    quiet = PostgresUnitOfWork.close_quietly

    async def spied(self: PostgresUnitOfWork, *args: Any, **kwargs: Any) -> str:
        outcomes.append(await quiet(self, *args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(PostgresUnitOfWork, "close_quietly", spied)
    parent, (first, second) = await delegating_parent(uows(pool), ["a", "b"])
    await run(pool, tmp_path, first, Answers())
    await run(pool, tmp_path, second, Answers())
    assert outcomes == ["closed", "last"]  # the last one went the long way, under the locks
    finished = await pool.fetch(
        """SELECT stream_id, metadata FROM events
           WHERE type = 'ExecutionFinished' AND stream_id = ANY($1::text[]) ORDER BY position""",
        [str(first), str(second)],
    )
    assert [(r["stream_id"], r["metadata"]["barrier"]) for r in finished] == [
        (str(first), "checked"),
        (str(second), "checked"),
    ]
    notices = await pool.fetch(
        """SELECT payload->>'execution_id' AS eid FROM events WHERE stream_id = $1
           AND type = 'ExecutionStatusChanged' AND payload->>'status' = 'COMPLETED'
           AND payload->>'delivery_status' = 'PENDING' ORDER BY position""",
        str(parent),
    )
    assert [r["eid"] for r in notices] == [str(first), str(second)]  # the parent told of each finish
    assert len(await outbox_commands(pool, "ResumeSession", "session_id", parent)) == 1


class Thinking:
    """A model still thinking when the deadline passes: its answer must never be recorded."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_the_worker_stops_a_run_at_its_deadline_and_fails_it_at_once(pool: Pool, tmp_path: Path) -> None:
    # The delegator's clock is an hour behind: the deadline falls a moment from now.
    def behind() -> datetime:
        return datetime.now(UTC) - timedelta(seconds=3600 - 0.5)

    parent, (eid,) = await delegating_parent(uows(pool), ["late"], clock=behind)
    model = Thinking()
    await run(pool, tmp_path, eid, model)  # returns once the run ended: at the deadline
    row = await execution(uows(pool), eid)
    assert (row["status"], row["error"]) == ("FAILED", DEADLINE_PASSED)
    assert row["ended_at"] >= row["deadline_at"]
    assert model.calls == 1
    child = row["child_session_id"]
    assert await pool.fetchval("SELECT phase FROM sessions WHERE session_id = $1", child) == "CANCELLED"
    roles = [r["role"] for r in await pool.fetch("SELECT role FROM messages WHERE session_id = $1", child)]
    assert roles == ["USER"]  # the answer of the interrupted call was never recorded
    # The last child ended, so the parent has its failure result already.
    (tool,) = await pool.fetch("SELECT content FROM messages WHERE session_id = $1 AND role = 'TOOL'", parent)
    assert json.loads(tool["content"])["result"] == DEADLINE_PASSED
