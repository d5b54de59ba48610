"""Subagent worker handlers: run or interrupt one execution's child loop."""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from uuid import UUID

from muster_agent.command_stops import answer_stopped_commands
from muster_agent.executions import finish_quietly
from muster_agent.loop import LoopDeps, run_until_idle
from muster_agent.runners import Runners
from muster_agent.session_state import snapshot_state
from muster_agent.stopping import DEADLINE_PASSED, stop_execution
from muster_contracts import events as ev
from muster_contracts.commands import CancelExecution, RunExecution
from muster_runtime.uow.aggregates import Execution, Session
from muster_runtime.uow.phases import NOT_REVIVED_PHASES
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

log = logging.getLogger("muster.worker")

CONSUMER = "subagent-worker"


@dataclass
class WorkerDeps:
    loop: LoopDeps
    runners: Runners
    lease_ttl_s: float


async def run_execution(cmd: RunExecution, deps: WorkerDeps) -> None:
    """Run the execution under a lease; a duplicate command for a running or finished
    execution does nothing."""
    key = cmd.execution_id
    if deps.runners.is_running(key):
        return
    # The message recorded, the execution read and its lease taken in one statement.
    async with deps.loop.uows() as uow:
        claim = await uow.claim_execution(
            CONSUMER, str(cmd.message_id), key, deps.runners.owner, deps.lease_ttl_s
        )
    if not claim.first:
        return
    if claim.execution is None:
        log.warning("run_for_unknown_execution execution=%s", key)
        return
    if not claim.leased:
        return  # ended, or another live worker runs it
    execution = Execution.of(claim.execution)
    child = execution.child_session_id
    # The first step starts from the state the claim read, unless the child is revived
    # first (then it reads its own); a state gone stale meanwhile fails its first record
    # and is read again, like any lost race.
    state = snapshot_state(claim.child_state)
    if claim.child_phase not in NOT_REVIVED_PHASES:
        state = None
        async with deps.loop.uows() as uow:
            await revive_child(uow, key, child)
    log.info(
        "execution_run_start execution=%s child=%s status=%s recoveries=%d",
        key,
        child,
        execution.status,
        execution.recoveries,
    )

    deadline = execution.deadline_at
    # A close that is not its round's last is one statement, checked against this claim.
    loop = replace(deps.loop, quiet_close=functools.partial(finish_quietly, execution))

    async def body() -> None:
        # The deadline is absolute: the run is interrupted there, so no model call and no
        # tool starts after it, and the execution fails at once rather than after the grace
        # (recovery's scan still fails it then, whatever this worker is doing).
        budget = max(0.0, (deadline - datetime.now(UTC)).total_seconds())
        try:
            async with asyncio.timeout(budget) as limit:
                outcome = await run_until_idle(loop, child, state)
        except TimeoutError:
            if not limit.expired():
                raise
            stopped = await stop_execution(deps.loop.uows, key, status="FAILED", error=DEADLINE_PASSED)
            log.info("execution_deadline_passed execution=%s child=%s stopped=%s", key, child, stopped)
            return
        log.info("execution_run_end execution=%s outcome=%s", key, outcome)

    deps.runners.start(key, body)


async def revive_child(uow: AbstractUnitOfWork, execution_id: UUID, child_id: UUID) -> None:
    """An open execution whose child session does not run — its phase never set (a crash
    right after creation) or already ended (its final answer recorded but not the
    execution's end) — runs again: the loop then finishes a recorded answer without calling
    the model, or carries on from the last complete round. A cancelled child stays so, and
    a waiting one waits (its answer resumes it)."""
    row = await uow.lock_session(child_id)
    child = Session.of(row) if row is not None else None
    if child is None or child.phase in NOT_REVIVED_PHASES:
        return
    await uow.append(str(child_id), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=child.version)
    log.info("subagent_child_revived execution=%s child=%s phase=%s", execution_id, child_id, child.phase)


async def cancel_execution(cmd: CancelExecution, deps: WorkerDeps) -> None:
    if deps.runners.cancel(cmd.execution_id):
        log.info("execution_interrupted execution=%s", cmd.execution_id)
    else:
        # No run here: a command a crash cut off in the child is never resumed now.
        await answer_stopped_commands(deps.loop, cmd.child_session_id)
