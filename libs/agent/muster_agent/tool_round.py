"""Running the open local tool calls of a round, in order.

Each tool's start is recorded before it runs, in the same transaction as whatever had to be
recorded just before (the ASSISTANT message, or the previous tool's result), so a round of
n tools costs n + 1 transactions. A call found started was cut off by a crash or already ran:
it is never run again (a crash's half-written round is discarded first, see
`history.incomplete_tail`; one next to a delegation gets an "interrupted" result). A file
tool's change (see `file_changes`) travels with its result, blobs included, in that same
transaction.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from uuid import UUID

from muster_contracts import events as ev

from muster_agent import session_store as store
from muster_agent.command_calls import forget, interrupted_command, run_command_call
from muster_agent.file_changes import ChangeRecorder, record_unanswered
from muster_agent.mcp_tools import calls as mcp_calls
from muster_agent.session_store import Item, SessionState
from muster_agent.tools.registry import is_local_tool, local_tool_call
from muster_agent.tools.schemas import COMMAND_TOOL_NAMES, DELEGATION_TOOL_NAMES, USER_TOOL_NAMES
from muster_agent.tools.workspace import Workspace
from muster_agent.waits import Gate, Passed, needs_gate, pass_gate

log = logging.getLogger("muster.loop")

INTERRUPTED = "interrupted: this tool call was cut off by a crash and was not retried"


async def run_local_calls(
    deps: Any,
    state: SessionState,
    round_message_id: UUID,
    round_seq: int,
    calls: list[dict[str, Any]],
    lead: list[Item],
) -> SessionState | None:
    """Record `lead`, then run `calls` up to the first delegation (which the caller hands
    to the delegation hook). Returns the state after the last record; None when the session
    no longer runs here."""
    current: SessionState | None = state
    carry = list(lead)
    workspace = Workspace(deps.workspaces / str(state.workspace_id or state.root_session_id))
    changes = ChangeRecorder(workspace, state, round_message_id, round_seq)
    allowed = _allowed_tools(deps, state)
    for call in calls:
        if call["name"] in DELEGATION_TOOL_NAMES and deps.delegation is not None:
            break
        if call["id"] in state.started_tool_calls:
            # Never run twice. A model asked again after a discarded round may repeat a call
            # id (the scripted model does): one that finished gets its recorded result back.
            earlier = await _recorded_result(deps, state, call["id"])
            if earlier is None and call["name"] in COMMAND_TOOL_NAMES:
                # A command cut off by a crash: its output so far, and what it changed.
                result, made = await interrupted_command(deps, state, workspace, changes, call)
                carry += [store.tool_message(call["id"], result), *made]
                continue
            carry.append(store.tool_message(call["id"], earlier or store.error_result(INTERRUPTED)))
            continue
        mcp = mcp_calls.is_mcp_name(call["name"])
        refusal = await mcp_calls.refusal(deps, state, call) if mcp else _refusal(call["name"], allowed)
        if refusal is not None:
            carry.append(store.tool_message(call["id"], store.error_result(refusal)))
            continue
        assert current is not None
        if needs_gate(call["name"], current):
            passed = await pass_gate(deps.uows, current, call, carry, round_message_id, changes.blobs)
            current = await _after_gate(deps, current, passed, carry, changes)
            carry = []
            if current is None or passed.gate == Gate.WAITING:
                return None  # the session waits (or no longer runs here): this run ends
            if passed.gate == Gate.REFUSED:
                continue
        else:
            carry.append(
                ev.ToolCallStarted(message_id=round_message_id, tool_call_id=call["id"], name=call["name"])
            )
            current = await _record(deps, current, carry, changes)
            if current is None:
                return None
        if mcp:
            outcome, made = await mcp_calls.run(deps, state, call), []
        elif call["name"] in COMMAND_TOOL_NAMES:
            outcome, made = await run_command_call(deps, state, workspace, changes, call)
        else:
            outcome, change = await changes.run(
                call, local_tool_call(workspace, call["name"], call["arguments"])
            )
            made = [change] if change is not None else []
        log.info(
            "tool_call_finished session=%s tool=%s success=%s",
            state.session_id,
            call["name"],
            outcome.get("success"),
        )
        carry = [store.tool_message(call["id"], json.dumps(outcome)), *made]
    if carry and current is not None:
        current = await _record(deps, current, carry, changes)
    return current


async def _record(
    deps: Any, state: SessionState | None, carry: list[Item], changes: ChangeRecorder
) -> SessionState | None:
    """Record `carry` with the blobs of the file changes in it."""
    assert state is not None
    recorded = await store.record_items(deps.uows, state, carry, blobs=dict(changes.blobs))
    await _changes_recorded(deps, state, carry, changes, kept=recorded is not None)
    return recorded


async def _changes_recorded(
    deps: Any, state: SessionState, carry: list[Item], changes: ChangeRecorder, *, kept: bool
) -> None:
    """After `carry` was recorded (`kept`) or refused because the session no longer runs
    here: the file changes in it are recorded all the same (the files did change)."""
    if not kept:
        unanswered = [item for item in carry if isinstance(item, ev.FileChanged)]
        await record_unanswered(deps.uows, state.session_id, unanswered, changes.blobs)
    changes.blobs.clear()
    if kept and changes.spent:
        # The commands' results are recorded: their logs have served.
        await asyncio.to_thread(forget, changes.spent)
        changes.spent.clear()


async def _after_gate(
    deps: Any, state: SessionState, passed: Passed, carry: list[Item], changes: ChangeRecorder
) -> SessionState | None:
    await _changes_recorded(deps, state, carry, changes, kept=passed.gate != Gate.GONE)
    if passed.gate == Gate.WAITING:
        log.info(
            "tool_call_waiting session=%s phase=%s", state.session_id, passed.state and passed.state.phase
        )
    return passed.state


async def _recorded_result(deps: Any, state: SessionState, tool_call_id: str) -> str | None:
    async with deps.uows() as uow:
        result: str | None = await uow.tool_result(state.session_id, tool_call_id)
    return result


def _allowed_tools(deps: Any, state: SessionState) -> frozenset[str]:
    try:
        return frozenset(deps.agents.get(state.agent_type).tools_for(state.session_type))
    except KeyError:
        return frozenset()


def _refusal(name: str, allowed: frozenset[str]) -> str | None:
    """Why a call the model made may not run here, or None. Checked before recording a
    start, so a refused call never counts as interrupted."""
    if name in DELEGATION_TOOL_NAMES:
        return "subagents cannot delegate" if name not in allowed else None
    if not is_local_tool(name) and name not in USER_TOOL_NAMES and name not in COMMAND_TOOL_NAMES:
        return f"unknown tool {name!r}"
    if name not in allowed:
        return f"tool {name!r} is not available to this agent"
    return None
