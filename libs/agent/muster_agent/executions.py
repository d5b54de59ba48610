"""The worker's side of an execution: record its terminal status, atomically with the
child's final answer (the loop's close hook)."""

from __future__ import annotations

import logging
from typing import Any, Literal
from uuid import UUID

from muster_contracts import events as ev
from muster_runtime.uow.aggregates import Execution, Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, RunClose

from muster_agent.barrier import BARRIER_CHECKED, settle_locked
from muster_agent.history import StoredMessage, turn_finished
from muster_agent.results import account
from muster_agent.session_store import SessionState

log = logging.getLogger("muster.executions")


async def finish_execution(
    uow: AbstractUnitOfWork, state: SessionState, final: list[ev.DomainEvent], phase: ev.SessionPhaseChanged
) -> None:
    row = await uow.open_execution_of(state.session_id)
    if row is None:
        return
    execution = Execution.of(row)
    finished, notice = finish_events(execution, state, final, phase)
    # Lock order everywhere: child session, parent session, then the execution. Whether
    # this is the round's last open child is read before anything is written, so the
    # parent's lock is held for as few statements as possible.
    locked = await uow.lock_session(execution.parent_session_id)
    parent = Session.of(locked) if locked is not None else None
    last = parent is not None and not [
        e
        for e in map(Execution.of, await uow.executions_of(parent.session_id, open_only=True))
        if e.execution_id != execution.execution_id
    ]
    await uow.append(
        str(execution.execution_id),
        [finished],
        expected_version=execution.version,
        metadata=BARRIER_CHECKED,  # the round's barrier is settled below if this completes it
    )
    await announce(uow, parent, notice)
    log_recovered(execution, state, finished)
    if parent is not None and last:
        # The last open child of the round: settle the barrier in this very transaction
        # (ADR 0011). Recovery still reacts to the finished execution and finds it done.
        await settle_locked(uow, parent)


async def finish_quietly(
    execution: Execution,
    uow: AbstractUnitOfWork,
    state: SessionState,
    final: list[ev.DomainEvent],
    phase: ev.SessionPhaseChanged,
) -> bool:
    """The close of a run that is not its round's last, in one statement (ADR 0025): what
    `finish_execution` would write, from the execution as the worker claimed it. False:
    something differs (not running, moved on, the run changed, the round's last), nothing
    was written, and the close goes the long way."""
    finished, notice = finish_events(execution, state, final, phase)
    run = RunClose(
        execution_id=execution.execution_id,
        execution_version=execution.version,
        parent_session_id=execution.parent_session_id,
        finished=[finished],
        notice=[notice],
        finished_metadata=BARRIER_CHECKED,  # not the round's last: no barrier to settle
    )
    outcome = await uow.close_quietly(state.session_id, state.message_count, [*final, phase], run=run)
    if outcome != "closed":
        return False
    log_recovered(execution, state, finished)
    return True


def finish_events(
    execution: Execution, state: SessionState, final: list[ev.DomainEvent], phase: ev.SessionPhaseChanged
) -> tuple[ev.ExecutionFinished, ev.ExecutionStatusChanged]:
    """The run's end on its own stream and the notice of it on the parent's, from the
    child's history and the turn's final events."""
    messages = list(state.messages)
    recorded = next((e for e in final if isinstance(e, ev.MessageRecorded)), None)
    pending_usage: dict[UUID, dict[str, int]] = {}
    if recorded is not None:
        messages.append(
            StoredMessage(recorded.message_id, recorded.seq, recorded.role, recorded.content, None, None)
        )
        if recorded.usage is not None:
            pending_usage[recorded.message_id] = recorded.usage.model_dump()
    # A final answer recorded before a crash closes the run as it is: no new model call.
    started = any(m.message_id == execution.start_message_id for m in messages)
    answer = messages[-1] if started and turn_finished(messages) else None
    rounds, tool_calls, usage = run_totals(execution, messages, pending_usage)
    status: Literal["COMPLETED", "FAILED"] = "COMPLETED" if phase.phase == "COMPLETED" else "FAILED"
    finished = ev.ExecutionFinished(
        status=status,
        result=answer.content if answer is not None else None,
        error=None if status == "COMPLETED" else (phase.error or "the subagent failed"),
        final_message_id=answer.message_id if answer is not None else None,
        end_message_id=messages[-1].message_id if messages else None,
        rounds=rounds,
        tool_calls=tool_calls,
        usage=usage,
    )
    notice = ev.ExecutionStatusChanged(
        execution_id=execution.execution_id, status=status, delivery_status="PENDING"
    )
    return finished, notice


def log_recovered(execution: Execution, state: SessionState, finished: ev.ExecutionFinished) -> None:
    if execution.status == "RECOVERING":
        log.info(
            "subagent_recovery_complete execution=%s child=%s status=%s",
            execution.execution_id,
            state.session_id,
            finished.status,
        )


def run_totals(
    execution: Execution,
    messages: list[StoredMessage],
    pending_usage: dict[UUID, dict[str, int]] | None = None,
) -> tuple[int, int, ev.TokenUsage]:
    """Rounds, tool calls and token usage of this execution's run of the child session:
    the messages after its start message (their usage is part of the loaded or carried
    history); `pending_usage` covers messages not stored yet."""
    usages: dict[Any, Any] = {m.message_id: m.usage for m in messages if m.usage is not None}
    usages.update(pending_usage or {})
    start_seq = next((m.seq for m in messages if m.message_id == execution.start_message_id), 0)
    return account(messages, usages, start_seq)


async def announce(uow: AbstractUnitOfWork, parent: Session | None, event: ev.DomainEvent) -> None:
    """Append a notice to the parent's stream; the caller holds the parent's row lock."""
    if parent is not None:
        await uow.append(str(parent.session_id), [event], expected_version=parent.version)
