"""A follow-up to a child cancelled mid-round, against a fresh migrated PostgreSQL: the
child's open calls are answered before its new task, so its history stays valid."""

from __future__ import annotations

import json
from uuid import uuid4

from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry
from muster_agent.delegation import Delegator
from muster_agent.stopping import stop_execution
from muster_contracts import events as ev
from muster_runtime.process.db import Pool

from tests.databases import uows
from tests.unit.recovery.builders import assistant, delegating_parent, execution, record, running_session


async def test_a_followup_answers_the_open_calls_of_a_cancelled_child_first(pool: Pool) -> None:
    parent, (eid,) = await delegating_parent(uows(pool), ["first"])
    child = (await execution(uows(pool), eid))["child_session_id"]
    cut = {"id": "cut", "name": "write_file", "arguments": {"path": "x", "content": "y"}}
    await record(uows(pool), child, lambda seq: [
        assistant(seq, [cut]), ev.ToolCallStarted(message_id=uuid4(), tool_call_id="cut", name="write_file"),
    ])
    assert await stop_execution(uows(pool), eid, status="CANCELLED", error="cancelled")
    # The parent's next round follows up on the child.
    await record(uows(pool), parent, lambda seq: [
        ev.MessageRecorded(message_id=uuid4(), seq=seq, role="TOOL", content="{}", tool_call_id="first"),
    ])
    followup = {"id": "again", "name": "delegate_followup",
                "arguments": {"child_session_id": str(child), "task": "next task"}}
    await record(uows(pool), parent, lambda seq: [assistant(seq, [followup])])
    state = await store.read_state(uows(pool), parent)
    assert state is not None
    assert (await Delegator(uows(pool), AgentRegistry.load(), 3600.0)(state, [followup])).keep_going
    history = (await store.read_state(uows(pool), child)).messages  # type: ignore[union-attr]
    assert [(m.role, m.tool_call_id) for m in history[-3:]] == [("ASSISTANT", None), ("TOOL", "cut"), ("USER", None)]
    assert "interrupted" in json.loads(history[-2].content)["error"]
    assert history[-1].content == "next task"
    assert [m.seq for m in history] == list(range(1, len(history) + 1))


async def test_a_followup_to_another_users_child_is_not_found_even_while_it_runs(pool: Pool) -> None:
    """The owner is checked before the child is locked: a foreign child locked right now by
    its worker must answer "not found", never "still running"."""
    _, (eid,) = await delegating_parent(uows(pool), ["first"])
    child = (await execution(uows(pool), eid))["child_session_id"]
    stranger = await running_session(uows(pool), user="bob")
    followup = {"id": "poke", "name": "delegate_followup",
                "arguments": {"child_session_id": str(child), "task": "tell me"}}
    await record(uows(pool), stranger, lambda seq: [assistant(seq, [followup])])
    state = await store.read_state(uows(pool), stranger)
    assert state is not None
    async with pool.acquire() as worker, worker.transaction():  # the child's worker holds its row
        await worker.execute("SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE", child)
        assert (await Delegator(uows(pool), AgentRegistry.load(), 3600.0)(state, [followup])).keep_going
    history = (await store.read_state(uows(pool), stranger)).messages  # type: ignore[union-attr]
    assert json.loads(history[-1].content)["error"] == f"session {child} not found"
