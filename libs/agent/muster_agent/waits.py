"""The gate a tool call passes before it runs: the session's permission level (`ask` waits
for an approval, `read_only` refuses), its execution mode (a LOCAL session's file tools
wait for the user's client) and `ask_user` (waits for the user's answer).

The gate reads the session's row in the statement or transaction that records the call's
start (or its wait, or its refusal): a `PATCH` of the permission level applies from the
next tool call, and a wait is recorded exactly once. An `auto` CLOUD session's file change
starts in one round trip (`muster_record` with `p_ungated`); anything else decides under
the row's lock. A waiting session holds no task,
lease or slot: the loop stops, and the gateway records the answer and resumes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_runtime.uow.aggregates import Session, Wait
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_agent import session_store as store
from muster_agent.mcp_tools.config import is_mcp_name
from muster_agent.session_store import Item, SessionState
from muster_agent.tools.arguments import AskUser, parse
from muster_agent.tools.schemas import COMMAND_TOOL_NAMES, LOCAL_TOOL_NAMES, USER_TOOL_NAMES

# What `ask` holds for approval: the tools that change files or start work.
FILE_CHANGES = frozenset({"write_file", "edit_file", "delete_file"})
GATED_TOOLS = FILE_CHANGES | {"delegate", "delegate_followup"} | COMMAND_TOOL_NAMES
# What a LOCAL session's client runs: the file tools and commands.
CLIENT_TOOLS = LOCAL_TOOL_NAMES | COMMAND_TOOL_NAMES
READ_ONLY = "refused: the session is read_only, so {tool} (which changes files or starts work) may not run"
READ_ONLY_MCP = "refused: the session is read_only, so the MCP tool {tool} (outside effects) may not run"


class Gate:
    RUN = "run"  # its start is recorded: run it here
    REFUSED = "refused"  # its error result is recorded: go on with the next call
    WAITING = "waiting"  # its wait is recorded: the loop stops
    GONE = "gone"  # the session no longer runs here (or moved): nothing recorded


@dataclass(frozen=True)
class Passed:
    gate: str
    state: SessionState | None = None


def needs_gate(name: str, state: SessionState) -> bool:
    """Whether a call must pass the locked gate (the common case, a CLOUD `auto` session
    reading a file, records its start in one round trip without it)."""
    return gated(name) or name in USER_TOOL_NAMES or state.execution_mode == "LOCAL"


def gated(name: str) -> bool:
    """Whether `ask` holds the call for an approval and `read_only` refuses it: file
    changes, delegations and every MCP tool (an outside system: it may have side effects)."""
    return name in GATED_TOOLS or is_mcp_name(name)


@dataclass(frozen=True)
class Decision:
    gate: str
    wait: tuple[ev.DomainEvent, ...] = ()  # WAITING: the wait's events, its phase included
    reason: str = ""  # REFUSED: the error result's reason
    # The call's start is recorded: it runs here, or it may run (or be answered) any time
    # now elsewhere, so it is never run twice. An approval's wait is before the start.
    starts: bool = False


async def pass_gate(
    uows: UnitOfWorkFactory,
    state: SessionState,
    call: dict[str, Any],
    carry: Sequence[Item],
    round_message_id: UUID,
    blobs: Mapping[str, str],
) -> Passed:
    """Record `carry`, then the call's start, wait or refusal, in one transaction."""
    started = ev.ToolCallStarted(message_id=round_message_id, tool_call_id=call["id"], name=call["name"])
    if call["name"] in FILE_CHANGES and state.execution_mode == "CLOUD":
        fast = await _start_if_ungated(uows, state, [*carry, started], blobs)
        if fast is not None:
            return fast
    async with uows() as uow:
        session, found = await store.lock_if_current(uow, state.session_id, state.message_count)
        if session is None or found != store.Lock.CURRENT:
            return Passed(Gate.GONE)
        events = store.message_items(carry, session.message_count + 1)
        decision = await decide(uow, session, call)
        if decision.gate == Gate.REFUSED:
            seq = session.message_count + sum(isinstance(e, ev.MessageRecorded) for e in events) + 1
            events.append(store.tool_message(call["id"], store.error_result(decision.reason))(seq))
        if decision.starts:
            events.append(started)
        events += decision.wait
        await uow.store_blobs(blobs)
        await uow.append(str(state.session_id), events, expected_version=session.version)
    return Passed(decision.gate, store.advance(state, session.version, events))


async def _start_if_ungated(
    uows: UnitOfWorkFactory, state: SessionState, items: Sequence[Item], blobs: Mapping[str, str]
) -> Passed | None:
    """The common case in one round trip: an `auto` CLOUD session records the start of a
    file change as any other tool's. None: the session gates tools, decide under its lock."""
    events = store.message_items(items, state.message_count + 1)
    async with uows() as uow:
        recorded = await uow.append_if_current(
            state.session_id, state.message_count, events, blobs=blobs, ungated=True
        )
    if recorded.outcome == "gated":
        return None
    if recorded.outcome != "current" or recorded.base_version is None:
        return Passed(Gate.GONE)
    return Passed(
        Gate.RUN, store.advance(replace(state, phase=recorded.phase), recorded.base_version, events)
    )


async def decide(uow: AbstractUnitOfWork, session: Session, call: dict[str, Any]) -> Decision:
    """With the session locked: may `call` run here now?"""
    name = call["name"]
    if name in USER_TOOL_NAMES:
        question = _question(call)
        if isinstance(question, str):
            return Decision(Gate.REFUSED, reason=question)
        return Decision(Gate.WAITING, (question, _phase("WAITING_INPUT")), starts=True)
    if gated(name) and session.permission_level == "read_only":
        refused = READ_ONLY_MCP if is_mcp_name(name) else READ_ONLY
        return Decision(Gate.REFUSED, reason=refused.format(tool=name))
    if gated(name) and session.permission_level == "ask" and not await _approved(uow, session, call):
        request = we.ApprovalRequested(
            approval_id=uuid4(), tool_call_id=call["id"], tool=name, arguments=call["arguments"]
        )
        return Decision(Gate.WAITING, (request, _phase("WAITING_APPROVAL")))
    if session.execution_mode == "LOCAL" and name in CLIENT_TOOLS:
        request_ = we.ToolRequested(
            request_id=uuid4(), tool_call_id=call["id"], name=name, arguments=call["arguments"]
        )
        return Decision(Gate.WAITING, (request_, _phase("WAITING_CLIENT")), starts=True)
    return Decision(Gate.RUN, starts=True)


async def _approved(uow: AbstractUnitOfWork, session: Session, call: dict[str, Any]) -> bool:
    row = await uow.call_wait(session.session_id, call["id"])
    earlier = Wait.of(row) if row is not None else None
    return earlier is not None and earlier.kind == "approval" and earlier.status == "approved"


def _phase(phase: ev.Phase) -> ev.SessionPhaseChanged:
    return ev.SessionPhaseChanged(phase=phase)


def _question(call: dict[str, Any]) -> we.QuestionAsked | str:
    """The question to record, or why the arguments are not one (the model's error)."""
    given = parse(AskUser, call["arguments"])
    if isinstance(given, str):
        return given
    if not given.question.strip():
        return "ask_user requires a non-empty 'question'"
    return we.QuestionAsked(
        question_id=uuid4(), tool_call_id=call["id"], question=given.question, options=given.options
    )
