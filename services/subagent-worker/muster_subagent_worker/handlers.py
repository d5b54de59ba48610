"""Subagent worker handlers: run or interrupt one execution's child loop."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from muster_agent.loop import LoopDeps, run_until_idle
from muster_agent.runners import Runners
from muster_contracts.commands import CancelExecution, RunExecution
from muster_runtime import leases, tracking

log = logging.getLogger("muster.worker")

CONSUMER = "subagent-worker"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


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
    async with deps.loop.pool.acquire() as conn, conn.transaction():
        if not await tracking.first_delivery(conn, CONSUMER, str(cmd.message_id)):
            return
        execution = await conn.fetchrow(
            "SELECT status, child_session_id FROM executions WHERE execution_id = $1", key
        )
        if execution is None:
            log.warning("run_for_unknown_execution execution=%s", key)
            return
        if execution["status"] in TERMINAL:
            return
        if not await leases.try_acquire(conn, str(key), deps.runners.owner, deps.lease_ttl_s):
            return
    child = execution["child_session_id"]
    log.info("execution_run_start execution=%s child=%s", key, child)

    async def body() -> None:
        outcome = await run_until_idle(deps.loop, child)
        log.info("execution_run_end execution=%s outcome=%s", key, outcome)

    deps.runners.start(key, body)


async def cancel_execution(cmd: CancelExecution, deps: WorkerDeps) -> None:
    if deps.runners.cancel(cmd.execution_id):
        log.info("execution_interrupted execution=%s", cmd.execution_id)
