"""The barrier: once every tool call of a parent's round has a result or a terminal
execution, record the executions' TOOL results in tool-call order, mark them DELIVERED and
resume the parent — one transaction, so it happens exactly once. A parent that no longer
runs (cancelled, ended) gets SUPPRESSED instead and is not resumed.

Two callers settle it (ADR 0011): the worker, in the transaction that finishes the last
open child of a round (the fast path), and the recovery service, which reacts to every
finished execution whose writer did not settle it (`BARRIER_CHECKED`, ADR 0021) and
reconciles what a crash left behind. Both lock the parent's row first, so whichever comes
second finds nothing left to do."""

from __future__ import annotations

import logging
from typing import Literal
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts.commands import ResumeSession
from muster_runtime.messaging import topics
from muster_runtime.process import tracing
from muster_runtime.uow.aggregates import Execution, Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_agent import session_store as store
from muster_agent.history import pending_tool_calls
from muster_agent.results import execution_result

log = logging.getLogger("muster.barrier")

# Metadata of an `ExecutionFinished` whose writer held the parent's lock and settled the
# barrier if that finish completed the round: recovery need not look at it again.
BARRIER_CHECKED = {"barrier": "checked"}


def barrier_checked(metadata: dict[str, object]) -> bool:
    return metadata.get("barrier") == BARRIER_CHECKED["barrier"]


async def has_undelivered(uows: UnitOfWorkFactory, parent_session_id: UUID) -> bool:
    """Cheap filter before taking the parent's row lock (the decision re-reads under it)."""
    async with uows() as uow:
        return bool(await uow.undelivered_executions(parent_session_id, lock=False))


async def settle(uows: UnitOfWorkFactory, parent_session_id: UUID) -> int:
    """Deliver or suppress what is due for this parent; returns how many were settled."""
    async with uows() as uow:
        parent = await uow.lock_session(parent_session_id)
        if parent is None:
            return 0
        return await settle_locked(uow, Session.of(parent))


async def settle_locked(uow: AbstractUnitOfWork, parent: Session) -> int:
    """`settle` inside the caller's transaction, the parent's row locked by the caller."""
    parent_session_id = parent.session_id
    undelivered = [Execution.of(row) for row in await uow.undelivered_executions(parent_session_id)]
    if not undelivered:
        return 0
    if not parent.cancellable:
        # A parent waiting for an approval of a later call of the round still runs its turn.
        return await _suppress(uow, parent, [e for e in undelivered if e.terminal])
    state = await store.load_state(uow, parent_session_id)
    assert state is not None
    pending = pending_tool_calls(state.messages)
    by_call = {e.parent_tool_call_id: e for e in undelivered}
    # Executions of an earlier round whose calls were answered otherwise (interrupted):
    # their result can no longer reach the model.
    stale = [e for e in undelivered if e.parent_tool_call_id not in {c["id"] for c in pending}]
    settled = await _suppress(uow, parent, [e for e in stale if e.terminal])
    if not pending or any(call["id"] not in by_call for call in pending):
        return settled  # a local tool of this round is still running
    waiting = [by_call[c["id"]] for c in pending if not by_call[c["id"]].terminal]
    if waiting:
        log.info("parent_recovery_wait parent=%s open_executions=%d", parent_session_id, len(waiting))
        return settled
    with tracing.span("barrier delivery", {"muster.session_id": str(parent_session_id)}):
        return settled + await _deliver(uow, parent, [by_call[c["id"]] for c in pending])


async def _deliver(uow: AbstractUnitOfWork, parent: Session, executions: list[Execution]) -> int:
    parent_id = parent.session_id
    seq = parent.message_count
    parent_events: list[ev.DomainEvent] = []
    for execution in executions:
        seq += 1
        tool_message_id = uuid4()
        parent_events.append(
            ev.MessageRecorded(
                message_id=tool_message_id,
                seq=seq,
                role="TOOL",
                content=execution_result(execution, await _completed_rounds(uow, execution)),
                tool_call_id=execution.parent_tool_call_id,
                source_session_id=execution.child_session_id,
            )
        )
        parent_events.append(await _settle_one(uow, execution, "DELIVERED", tool_message_id))
    # Under the parent's row lock every writer of its stream is serialised, so the current
    # version is the one to extend (a suppression may have moved it in this transaction).
    current = await uow.current_version(str(parent_id))
    await uow.append(str(parent_id), parent_events, expected_version=current)
    await uow.send(topics.COMMANDS, str(parent_id), ResumeSession(session_id=parent_id))
    for execution in executions:
        log.info(
            "subagent_result_delivered execution=%s parent=%s status=%s",
            execution.execution_id,
            parent_id,
            execution.status,
        )
    log.info("parent_recovery_start parent=%s results=%d", parent_id, len(executions))
    return len(executions)


async def _completed_rounds(uow: AbstractUnitOfWork, execution: Execution) -> int | None:
    """For a follow-up: how many of the child's runs completed, this one included."""
    if not execution.follow_up:
        return None
    runs = [Execution.of(row) for row in await uow.runs_of(execution.child_session_id)]
    return sum(run.status == "COMPLETED" for run in runs if run.round <= execution.round)


async def _suppress(uow: AbstractUnitOfWork, parent: Session, executions: list[Execution]) -> int:
    if not executions:
        return 0
    notices: list[ev.DomainEvent] = []
    for execution in executions:
        notices.append(await _settle_one(uow, execution, "SUPPRESSED"))
        log.info(
            "subagent_result_delivery_skipped execution=%s parent=%s reason=parent_%s",
            execution.execution_id,
            parent.session_id,
            (parent.phase or "idle").lower(),
        )
    current = await uow.current_version(str(parent.session_id))
    await uow.append(str(parent.session_id), notices, expected_version=current)
    return len(executions)


async def _settle_one(
    uow: AbstractUnitOfWork,
    execution: Execution,
    delivery: Literal["DELIVERED", "SUPPRESSED"],
    tool_message_id: UUID | None = None,
) -> ev.ExecutionStatusChanged:
    """Record the delivery on the execution's stream; returns the notice for the parent's."""
    await uow.append(
        str(execution.execution_id),
        [ev.ExecutionDelivered(delivery_status=delivery, tool_message_id=tool_message_id)],
        expected_version=execution.version,
    )
    return ev.ExecutionStatusChanged(
        execution_id=execution.execution_id, status=execution.status, delivery_status=delivery
    )
