"""Harness command handlers: small functions taking a typed command and their deps."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from uuid import UUID

from muster_agent import session_store as store
from muster_agent.loop import LoopDeps, StepOutcome, run_until_idle
from muster_agent.runners import Runners
from muster_contracts.commands import CancelSession, ProcessSession, ResumeSession
from muster_runtime import leases, tracking
from muster_runtime.unit_of_work import PostgresUnitOfWork

log = logging.getLogger("muster.harness")

CONSUMER = "harness"


@dataclass
class HarnessDeps:
    loop: LoopDeps
    runners: Runners
    lease_ttl_s: float


async def process_session(cmd: ProcessSession | ResumeSession, deps: HarnessDeps) -> None:
    """Drive a session: start its next queued turn if idle, or take over a running turn
    nobody holds. Safe to receive any number of times."""
    sid = cmd.session_id
    if deps.runners.is_running(sid):
        deps.runners.start(sid, lambda: drive(deps, sid))  # marks it to look again
        return
    async with PostgresUnitOfWork(deps.loop.pool) as uow:
        conn = uow.conn
        if not await tracking.first_delivery(conn, CONSUMER, str(cmd.message_id)):
            return
        row = await conn.fetchrow("SELECT session_type FROM sessions WHERE session_id = $1", sid)
        if row is None:
            log.warning("command_for_unknown_session type=%s session=%s", cmd.type, sid)
            return
        if row["session_type"] == "SUBAGENT":
            return  # executions are the workers' job
        if not await leases.try_acquire(conn, str(sid), deps.runners.owner, deps.lease_ttl_s):
            return  # another live instance runs this session
    deps.runners.start(sid, lambda: drive(deps, sid))


async def drive(deps: HarnessDeps, session_id: UUID) -> None:
    """Run turns until the session is idle with nothing queued, or waits for children."""
    while await _begin(deps, session_id):
        if await run_until_idle(deps.loop, session_id) == StepOutcome.WAITING:
            log.info("session_waiting_for_children session=%s", session_id)
            return


async def _begin(deps: HarnessDeps, session_id: UUID) -> bool:
    async with PostgresUnitOfWork(deps.loop.pool) as uow:
        conn = uow.conn
        row = await store.lock_session(conn, session_id)
        if row is None:
            return False
        if row["phase"] in store.RUNNING_PHASES:
            log.info("session_loop_start session=%s phase=%s", session_id, row["phase"])
            return True
        return await store.start_next_turn(conn, row)


async def cancel_session(cmd: CancelSession, deps: HarnessDeps) -> None:
    """The cancel itself is already recorded by the gateway; interrupt the local loop so an
    in-flight model call stops now rather than being dropped when it returns."""
    if deps.runners.cancel(cmd.session_id):
        log.info("session_loop_interrupted session=%s", cmd.session_id)
