"""Stopping an execution from outside its loop's own decisions: a cancelled parent's
child is cancelled (recovery), a run past its absolute deadline is failed (its worker at
the deadline; recovery after the grace, whatever the worker is doing)."""

from __future__ import annotations

import logging
from typing import Literal
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts.commands import CancelExecution
from muster_runtime.messaging import topics
from muster_runtime.uow.aggregates import Execution, Session
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from muster_agent import session_store as store
from muster_agent.answers import dropped_waits
from muster_agent.barrier import BARRIER_CHECKED, settle_locked
from muster_agent.executions import announce, run_totals

log = logging.getLogger("muster.executions")

DEADLINE_PASSED = "timed out: the execution passed its deadline"
# A LOCAL child that waited for its user's client until its deadline.
LOCAL_CLIENT_MISSING = "the LOCAL client did not connect in time"


async def stop_execution(
    uows: UnitOfWorkFactory, execution_id: UUID, *, status: Literal["FAILED", "CANCELLED"], error: str
) -> bool:
    """End an open execution with `status`: the child session is cancelled, the execution
    finished, the worker told to stop. Returns False if it had already ended."""
    async with uows() as uow:
        seen = await uow.execution(execution_id)
        if seen is None:
            return False
        locked = await uow.lock_session(Execution.of(seen).child_session_id)
        # Re-read under the child's lock: the worker may have won.
        row = await uow.execution(execution_id)
        if locked is None or row is None:
            return False
        child, execution = Session.of(locked), Execution.of(row)
        if not execution.open:
            return False
        if error == DEADLINE_PASSED and child.phase == "WAITING_CLIENT":
            error = LOCAL_CLIENT_MISSING
        if child.active:
            # What the child waited for is dropped with its end: nothing stays pending.
            dropped = await dropped_waits(uow, child.session_id)
            await uow.append(
                str(child.session_id),
                [*dropped, ev.SessionPhaseChanged(phase="CANCELLED", error=error)],
                expected_version=child.version,
            )
        state = await store.load_state(uow, child.session_id)
        assert state is not None
        rounds, tool_calls, usage = run_totals(execution, state.messages)
        # Lock order everywhere: child session, parent session, then the execution.
        locked = await uow.lock_session(execution.parent_session_id)
        parent = Session.of(locked) if locked is not None else None
        await uow.append(
            str(execution_id),
            [
                ev.ExecutionFinished(
                    status=status,
                    error=error,
                    rounds=rounds,
                    tool_calls=tool_calls,
                    usage=usage,
                    end_message_id=state.messages[-1].message_id if state.messages else None,
                )
            ],
            expected_version=execution.version,
            metadata=BARRIER_CHECKED,  # settled below if this completes the round
        )
        await announce(
            uow,
            parent,
            ev.ExecutionStatusChanged(
                execution_id=execution_id,
                status=status,
                delivery_status="PENDING",
            ),
        )
        await uow.send(
            topics.DELEGATIONS,
            str(child.session_id),
            CancelExecution(
                execution_id=execution_id,
                child_session_id=child.session_id,
            ),
        )
        if parent is not None and not await uow.executions_of(parent.session_id, open_only=True):
            # The round's last open child: settle the barrier here too (ADR 0011).
            await settle_locked(uow, parent)
    log.info("execution_stopped execution=%s status=%s", execution_id, status)
    return True
