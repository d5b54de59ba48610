"""Taking over work whose owner died: one small transaction per session or execution,
re-checked under its row lock, so two recovery instances racing on the same item record
one takeover between them (the loser finds it leased, running again or already taken)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

from muster_agent.executions import announce
from muster_contracts import events as ev
from muster_contracts.commands import ProcessSession, RunExecution
from muster_runtime.messaging import topics
from muster_runtime.uow.aggregates import Execution, Session
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

log = logging.getLogger("muster.recovery")


async def take_over_session(uows: UnitOfWorkFactory, session_id: UUID, now: datetime) -> bool:
    """A turn nobody runs: mark it RESUMING (clients keep seeing RUNNING) and re-issue its
    ProcessSession. False when a runner holds it again or the turn ended meanwhile."""
    async with uows() as uow:
        row = await uow.lock_session(session_id)
        session = Session.of(row) if row is not None else None
        if session is None or not session.running:
            return False
        lease = await uow.lease_live(str(session_id), now)
        if lease:
            return False
        first = session.phase == "RUNNING"
        if first:
            await uow.append(
                str(session_id),
                [ev.SessionPhaseChanged(phase="RESUMING")],
                expected_version=session.version,
            )
        await uow.send(
            topics.COMMANDS, str(session_id), ProcessSession(session_id=session_id, reason="recovery")
        )
    kind = "start" if first else "reissue"
    log.info("session_recovery_%s session=%s reason=%s", kind, session_id, _reason(lease))
    return True


async def take_over_execution(uows: UnitOfWorkFactory, execution_id: UUID, now: datetime) -> bool:
    """A run nobody holds: mark it RECOVERING (once; a takeover that is itself lost is just
    re-issued) and send RunExecution for the same execution and child session."""
    async with uows() as uow:
        # Lock order everywhere: child session, parent session, then the execution.
        row = await uow.execution(execution_id)
        seen = Execution.of(row) if row is not None else None
        if seen is None or not seen.open:
            return False
        locked = await uow.lock_session(seen.parent_session_id)
        parent = Session.of(locked) if locked is not None else None
        row = await uow.execution(execution_id, lock=True)
        execution = Execution.of(row) if row is not None else None
        if execution is None or not execution.open:
            return False
        lease = await uow.lease_live(str(execution_id), now)
        if lease:
            return False
        reason = _reason(lease)
        first = execution.status == "RUNNING"
        if first:
            await uow.append(
                str(execution_id),
                [ev.ExecutionRecovering(reason=reason)],
                expected_version=execution.version,
            )
            await announce(
                uow,
                parent,
                ev.ExecutionStatusChanged(
                    execution_id=execution_id, status="RECOVERING", delivery_status="PENDING"
                ),
            )
        await uow.send(
            topics.DELEGATIONS,
            str(execution.child_session_id),
            RunExecution(
                execution_id=execution_id,
                child_session_id=execution.child_session_id,
                parent_session_id=execution.parent_session_id,
            ),
        )
    log.info(
        # A takeover whose own command was lost is re-issued, not started again.
        "subagent_recovery_%s execution=%s child=%s parent=%s reason=%s",
        "start" if first else "reissue",
        execution_id,
        execution.child_session_id,
        execution.parent_session_id,
        reason,
    )
    return True


async def start_queued_input(uows: UnitOfWorkFactory, session_ids: Iterable[UUID]) -> None:
    """Input the gateway accepted for idle sessions whose `ProcessSession` was lost (broker
    restart) or arrived while the session's loop was winding down: send it again, in one
    transaction. The harness claims each command once and starts a turn only under the
    session's lock, so a command that turns out not to be needed changes nothing."""
    async with uows() as uow:
        for session_id in session_ids:
            await uow.send(
                topics.COMMANDS, str(session_id), ProcessSession(session_id=session_id, reason="stale_input")
            )


def _reason(lease: bool | None) -> ev.RecoveryReason:
    """Why nobody holds it: an owner's lease ran out, or no owner ever claimed it."""
    return "unclaimed" if lease is None else "lease_expired"
