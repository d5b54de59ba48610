"""The agent loop shared by the harness (NORMAL/SIDE_TASK) and the worker (SUBAGENT).

A step: load the history → build the context → call the model → record the ASSISTANT
message (with its tool calls) before any tool runs → run each tool, recording its start and
its result. Every record is conditional on the session still running and on nobody else
having recorded since (see `session_store.record_if_current`), so a cancelled turn records
no further answer and a zombie runner records nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID, uuid4

import asyncpg
from muster_contracts import events as ev
from muster_runtime.process import retrying, tracing
from muster_runtime.store import eventstore
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry, UnknownAgentType
from muster_agent.compaction import Budget, compact, request_tokens
from muster_agent.context import model_messages
from muster_agent.history import StoredMessage, incomplete_tail, pending_tool_calls, turn_finished
from muster_agent.mcp_tools.pool import McpTools
from muster_agent.models.base import ModelError, ModelProvider, ModelReply, ModelRequest
from muster_agent.session_store import SessionState
from muster_agent.tool_round import run_local_calls
from muster_agent.tools.commands import CommandPolicy
from muster_agent.tools.schemas import COMMAND_TOOL_NAMES, DELEGATION_TOOL_NAMES, tool_schemas

log = logging.getLogger("muster.loop")

# The open delegation calls of a round are handed to this hook together, with what must be
# recorded first in the same transaction (the round's ASSISTANT message, when just produced).
ToolHook = Callable[[SessionState, list[dict[str, Any]], Sequence[store.Item]], Awaitable[store.Recorded]]
# Called inside the transaction that ends a turn (row locked), before it commits: the worker
# records the execution's terminal status here, atomically with the final answer.
CloseHook = Callable[
    [AbstractUnitOfWork, SessionState, list[ev.DomainEvent], ev.SessionPhaseChanged], Awaitable[None]
]

# The same close made in one statement when nothing needs deciding under its locks (ADR
# 0025): True when it closed; False when nothing was written and the close goes the long way.
QuietCloseHook = Callable[
    [AbstractUnitOfWork, SessionState, list[ev.DomainEvent], ev.SessionPhaseChanged], Awaitable[bool]
]


class Deltas(Protocol):
    """Where the pieces of a streamed answer go (`muster_runtime.messaging.deltas`): never
    blocks, may drop (ADR 0039)."""

    def offer(
        self, session_id: str, message_id: str, index: int, text: str, after_version: int = 0
    ) -> None:
        """Queue one piece; `index` counts the message's pieces from 0."""

    def end(self, message_id: str) -> None:
        """The model call is over: what waits of the message goes now (ADR 0044)."""


TRANSIENT = (eventstore.ConcurrencyError, asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


@dataclass
class LoopDeps:
    uows: UnitOfWorkFactory
    model: ModelProvider
    agents: AgentRegistry
    workspaces: Path
    delegation: ToolHook | None = None
    on_close: CloseHook | None = None
    # The hook locks the session's parent (a subagent's close): the close locks it right
    # after the session, in the same round trip.
    on_close_locks_parent: bool = False
    # What `on_close` would do, in one statement when nothing needs its locks; with
    # `on_close` and without this, every close goes the long way.
    quiet_close: QuietCloseHook | None = None
    budget: Budget = field(default_factory=Budget)
    # The MCP servers' tools (ADR 0038): offered beside the agent's own, run like local tools.
    mcp: McpTools | None = None
    commands: CommandPolicy = field(default_factory=CommandPolicy)
    # The tokens a session's model calls may spend in all (MUSTER_SESSION_TOKEN_BUDGET); 0: no limit.
    token_budget: int = 0
    # Answer previews, published as the model streams (None: nothing is published).
    deltas: Deltas | None = None


def command_policy(settings: Any) -> CommandPolicy:
    """How this process runs `run_command`, from its `Settings`."""
    return CommandPolicy(
        max_timeout_s=settings.command_max_timeout_s,
        unsafe=settings.unsafe_commands,
        logs_dir=settings.commands_dir,
    )


def spent_tokens(state: SessionState) -> int:
    """The tokens the session's model calls reported (prompt + completion), a fork's copies
    included (the messages it was given to start from)."""
    used = [m.usage for m in state.messages if m.usage]
    return sum(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) for u in used)


class StepOutcome:
    CONTINUE = "continue"
    WAITING = "waiting"  # every open tool call is a delegation: the barrier resumes us
    IDLE = "idle"  # the session no longer runs here: turn ended, cancelled or lost


Step = tuple[str, SessionState | None]  # the outcome, and the state to go on with (None: reload)


async def run_until_idle(deps: LoopDeps, session_id: UUID, state: SessionState | None = None) -> str:
    """Step until the turn ends or waits. The history is loaded once (or comes in `state`,
    as read by the caller's claim); each step carries the state forward from its own
    records and reloads only when another writer moved first."""
    with tracing.span("session loop", {"muster.session_id": str(session_id)}):
        return await _steps(deps, session_id, state)


async def _steps(deps: LoopDeps, session_id: UUID, state: SessionState | None) -> str:
    while True:
        outcome, state = await _step_or_reload(deps, session_id, state)
        if outcome != StepOutcome.CONTINUE:
            return outcome


async def _step_or_reload(deps: LoopDeps, session_id: UUID, state: SessionState | None) -> Step:
    """One step. When another writer won a race on this session (TRANSIENT), the state
    is reloaded and the step decided again, at once and as often as it takes."""

    def before_sleep(retry: retrying.RetryCallState) -> None:
        log.info("step_retry session=%s reason=%s", session_id, retrying.error_name(retry))

    async for attempt in retrying.unlimited(TRANSIENT, before_sleep=before_sleep):
        with attempt:
            # A retry never trusts the carried state: the race means it is stale.
            current = state if attempt.retry_state.attempt_number == 1 else None
            if current is None:
                current = await store.read_state(deps.uows, session_id)
            return await step(deps, current)
    raise AssertionError("unreachable: the policy never gives up")


async def step(deps: LoopDeps, state: SessionState | None) -> Step:
    if state is None or not state.running:
        return StepOutcome.IDLE, None
    # Only a loaded history can hold a crash's tail: this runner's own records leave none.
    tail = (
        # A round with a command is kept too: its interrupted command gets a result (with its
        # output so far) instead of the model being asked again and running it again.
        incomplete_tail(state.messages, state.started_tool_calls, DELEGATION_TOOL_NAMES | COMMAND_TOOL_NAMES)
        if state.loaded
        else []
    )
    if tail or state.phase == "RESUMING":
        return await _resume(deps, state, tail)
    pending = pending_tool_calls(state.messages)
    actionable = [
        call
        for call in pending
        if not (call["name"] in DELEGATION_TOOL_NAMES and call["id"] in state.started_tool_calls)
    ]
    if actionable:
        return await _run_open_calls(deps, state, actionable)
    if pending:
        return StepOutcome.WAITING, None
    if turn_finished(state.messages):
        # The answer is recorded but the turn was never closed (crash): close it now.
        return await _close_turn(deps, state, [])
    try:
        agent = deps.agents.get(state.agent_type)
    except UnknownAgentType:
        failure = f"unknown agent type {state.agent_type!r}"
        return await _close_turn(deps, state, [], failure=failure)
    rounds = _rounds_this_turn(state)
    if rounds >= agent.max_rounds:
        return await _close_turn(deps, state, [], failure=f"max rounds ({agent.max_rounds}) exceeded")
    # Summed only under a budget: it reads the whole history, so a step would cost more
    # the longer the session (`make bench`'s step cost).
    if deps.token_budget and (spent := spent_tokens(state)) >= deps.token_budget:
        failure = f"token budget spent: the session used {spent} of its {deps.token_budget} tokens"
        return await _close_turn(deps, state, [], failure=failure)
    messages = model_messages(agent, state)
    limit = deps.budget.limit(agent)
    if request_tokens(state, messages) > limit:
        # Compaction is part of the turn: one conditional record, or nothing.
        tried, compacted = await compact(deps.model, deps.uows, state, agent, keep_tokens=limit // 2)
        if compacted is None:
            return StepOutcome.CONTINUE, None  # the session moved meanwhile: look again
        if tried:
            state, messages = compacted, model_messages(agent, compacted)
    tools = agent.tools_for(state.session_type)
    # Decided before the call: the streamed pieces name the message they preview.
    message_id = uuid4()
    request = ModelRequest(
        session_id=str(state.session_id),
        model=state.model_id or agent.model,
        messages=messages,
        tools=tool_schemas(tools, agent.delegate_types) + (await deps.mcp.schemas(agent) if deps.mcp else []),
        on_text=_previews(deps.deltas, str(state.session_id), str(message_id), state.version),
    )
    try:
        with tracing.span("model call", {"muster.model": request.model}):
            reply = await deps.model.complete(request)
    except ModelError as exc:
        return await _close_turn(deps, state, [], failure=str(exc))
    finally:
        if deps.deltas is not None:
            deps.deltas.end(str(message_id))
    return await _record_reply(deps, state, reply, message_id)


def _previews(
    deltas: Deltas | None, session_id: str, message_id: str, after_version: int
) -> Callable[[str], None] | None:
    """The model's text callback: each non-empty piece offered as the next delta, naming the
    version the session was at (the gateway shows it after the events up to there)."""
    if deltas is None:
        return None
    count = 0

    def on_text(text: str) -> None:
        nonlocal count
        if text:
            deltas.offer(session_id, message_id, count, text, after_version)
            count += 1

    return on_text


async def _resume(deps: LoopDeps, state: SessionState, tail: list[StoredMessage]) -> Step:
    """Before a session resumes after a crash: discard what the crash left half-written
    (the interrupted calls are never re-run) and leave RESUMING, in one transaction."""
    events: list[ev.DomainEvent] = []
    if tail:
        events.append(
            ev.MessagesDiscarded(message_ids=[m.message_id for m in tail], reason="incomplete_tail")
        )
    if state.phase == "RESUMING":
        events.append(ev.SessionPhaseChanged(phase="RUNNING"))
    resumed = await store.record_items(deps.uows, state, events)
    if resumed is not None:
        log.info(
            "session_resumed session=%s type=%s discarded=%d", state.session_id, state.session_type, len(tail)
        )
    return StepOutcome.CONTINUE, resumed  # recorded, or someone moved first: look again


def _rounds_this_turn(state: SessionState) -> int:
    count = 0
    for message in reversed(state.messages):
        if message.role == "USER":
            break
        count += message.role == "ASSISTANT"
    return count


async def _record_reply(deps: LoopDeps, state: SessionState, reply: ModelReply, message_id: UUID) -> Step:
    calls = [ev.ToolCallSpec(id=c.id, name=c.name, arguments=c.arguments) for c in reply.tool_calls]
    usage = ev.TokenUsage(
        prompt_tokens=reply.usage.prompt_tokens, completion_tokens=reply.usage.completion_tokens
    )

    def answer(seq: int) -> ev.MessageRecorded:
        return ev.MessageRecorded(
            message_id=message_id,
            seq=seq,
            role="ASSISTANT",
            content=reply.content,
            tool_calls=calls or None,
            usage=usage,
        )

    if not calls:
        return await _close_turn(deps, state, [answer(state.message_count + 1)])
    # The ASSISTANT message is recorded before any tool runs: with the first tool's start,
    # or in the transaction that creates the round's delegations.
    open_calls = [call.model_dump() for call in calls]
    if open_calls[0]["name"] in DELEGATION_TOOL_NAMES and deps.delegation is not None:
        return _continued(await deps.delegation(state, _delegations(state, open_calls), [answer]))
    round_seq = state.message_count + 1  # `answer` is the first message recorded
    after = await run_local_calls(deps, state, message_id, round_seq, open_calls, lead=[answer])
    return (StepOutcome.CONTINUE, after) if after is not None else (StepOutcome.IDLE, None)


def _delegations(state: SessionState, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All delegations still open in the round: created together, in one transaction."""
    started = state.started_tool_calls
    return [c for c in calls if c["name"] in DELEGATION_TOOL_NAMES and c["id"] not in started]


def _continued(recorded: store.Recorded) -> Step:
    return (StepOutcome.CONTINUE, recorded.state) if recorded.keep_going else (StepOutcome.IDLE, None)


async def _run_open_calls(deps: LoopDeps, state: SessionState, calls: list[dict[str, Any]]) -> Step:
    round_ = next(m for m in reversed(state.messages) if m.role == "ASSISTANT")
    if calls[0]["name"] in DELEGATION_TOOL_NAMES and deps.delegation is not None:
        return _continued(await deps.delegation(state, _delegations(state, calls), ()))
    after = await run_local_calls(deps, state, round_.message_id, round_.seq, calls, lead=[])
    return (StepOutcome.CONTINUE, after) if after is not None else (StepOutcome.IDLE, None)


async def _close_turn(
    deps: LoopDeps, state: SessionState, final: list[ev.DomainEvent], *, failure: str | None = None
) -> Step:
    """End the turn (COMPLETED, or FAILED with `failure`) and, in the same transaction,
    start the next one if a message was queued meanwhile."""
    phase = (
        ev.SessionPhaseChanged(phase="FAILED", error=failure)
        if failure
        else ev.SessionPhaseChanged(phase="COMPLETED")
    )
    parent = state.parent_session_id if deps.on_close_locks_parent else None
    async with deps.uows() as uow:
        if await _closed_quietly(deps, uow, state, final, phase):
            log.info("turn_finished session=%s phase=%s next_turn=False", state.session_id, phase.phase)
            return StepOutcome.IDLE, None
        session, found = await store.lock_if_current(uow, state.session_id, state.message_count, then=parent)
        if session is None or found != store.Lock.CURRENT:
            return (StepOutcome.CONTINUE if found == store.Lock.MOVED else StepOutcome.IDLE), None
        queued = await uow.next_queued_input(state.session_id)
        if deps.on_close is not None:
            await deps.on_close(uow, state, final, phase)
        next_turn = await store.start_turn_with(uow, session, queued, after=[*final, phase]) is not None
    log.info("turn_finished session=%s phase=%s next_turn=%s", state.session_id, phase.phase, next_turn)
    # A next turn starts from a reload: its USER message was written by the gateway's input.
    return (StepOutcome.CONTINUE if next_turn else StepOutcome.IDLE), None


async def _closed_quietly(
    deps: LoopDeps,
    uow: AbstractUnitOfWork,
    state: SessionState,
    final: list[ev.DomainEvent],
    phase: ev.SessionPhaseChanged,
) -> bool:
    """The usual close (the session still where the loop left it, nothing queued) in one
    statement; False: nothing written, decide under the locks."""
    if deps.on_close is not None:
        return deps.quiet_close is not None and await deps.quiet_close(uow, state, final, phase)
    outcome = await uow.close_quietly(state.session_id, state.message_count, [*final, phase], run=None)
    return outcome == "closed"
