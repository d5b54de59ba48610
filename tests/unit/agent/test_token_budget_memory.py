"""The per-session token budget (MUSTER_SESSION_TOKEN_BUDGET) on the in-memory unit of
work: a turn that finds the session's reported tokens spent ends FAILED, saying so, without
calling the model again; no budget (0) never stops a turn."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from muster_agent.loop import run_until_idle, spent_tokens
from muster_contracts import events as ev

from tests.unit.agent.memory_world import World

TWO_STEPS = "#script " + json.dumps(
    {"steps": [{"tool_calls": [{"name": "list_files", "arguments": {}}]}, {"content": "finished"}]}
)


async def test_a_spent_budget_ends_the_turn_failed_before_the_next_model_call(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(TWO_STEPS)
    await run_until_idle(replace(world.harness, token_budget=1), sid)
    state = await world.state(sid)
    assert state.phase == "FAILED"
    assert [m.role for m in state.messages] == ["USER", "ASSISTANT", "TOOL"]  # one model call only
    spent = spent_tokens(state)
    assert spent > 0
    failed = [e for e in world.store.state.streams[str(sid)] if isinstance(e.event, ev.SessionPhaseChanged)]
    assert failed[-1].event.error == f"token budget spent: the session used {spent} of its 1 tokens"


async def test_without_a_budget_the_same_turn_completes(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session(TWO_STEPS)
    await run_until_idle(world.harness, sid)
    state = await world.state(sid)
    assert state.phase == "COMPLETED" and state.messages[-1].content == "finished"
    big = await world.session(TWO_STEPS)
    await run_until_idle(replace(world.harness, token_budget=10**9), big)
    assert (await world.state(big)).phase == "COMPLETED"
