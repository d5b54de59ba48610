"""Harness command handlers: small functions taking a typed command and their deps."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from muster_agent import session_store as store
from muster_agent.agents import UnknownAgentType
from muster_agent.compaction import compact
from muster_agent.loop import LoopDeps, StepOutcome, run_until_idle
from muster_agent.runners import Runners
from muster_contracts.commands import CancelSession, CompactSession, ProcessSession, ResumeSession
from muster_runtime.unit_of_work import AbstractUnitOfWork

log = logging.getLogger("muster.harness")

CONSUMER = "harness"


@dataclass
class HarnessDeps:
    loop: LoopDeps
    runners: Runners
    lease_ttl_s: float


async def process_session(cmd: ProcessSession | ResumeSession, deps: HarnessDeps) -> None:
    """Drive a session: start its next queued turn if idle, or take over a running turn
    nobody holds. Safe to receive any number of times. Claiming the command and the lease
    and starting the turn are one transaction."""
    sid = cmd.session_id
    if deps.runners.is_running(sid):
        deps.runners.start(sid, lambda: drive(deps, sid))  # marks it to look again
        return
    async with deps.loop.uows() as uow:
        if not await uow.first_delivery(CONSUMER, str(cmd.message_id)):
            return
        row = await uow.lock_session(sid)
        if row is None:
            log.warning("command_for_unknown_session type=%s session=%s", cmd.type, sid)
            return
        if row["session_type"] == "SUBAGENT":
            return  # executions are the workers' job
        if not await uow.try_lease(str(sid), deps.runners.owner, deps.lease_ttl_s):
            return  # another live instance runs this session
        begun = await _begin_locked(uow, row)
    if begun:
        first = [True]

        async def body() -> None:
            # The first run starts from the turn begun above; a re-run (another command came
            # while this one ran) looks at the session afresh.
            await drive(deps, sid, begun=first.pop() if first else None)

        deps.runners.start(sid, body)


async def drive(deps: HarnessDeps, session_id: UUID, *, begun: bool | None = None) -> None:
    """Run the session's turn until it ends (the next queued turn starts in the transaction
    that ends one) or waits for children."""
    if begun is None:
        async with deps.loop.uows() as uow:
            row = await uow.lock_session(session_id)
            begun = row is not None and await _begin_locked(uow, row)
    if begun and await run_until_idle(deps.loop, session_id) == StepOutcome.WAITING:
        log.info("session_waiting_for_children session=%s", session_id)


async def _begin_locked(uow: AbstractUnitOfWork, row: Mapping[str, Any]) -> bool:
    """With the session locked: True when a turn runs (already, or started now from the
    oldest queued input)."""
    if row["phase"] in store.RUNNING_PHASES:
        log.info("session_loop_start session=%s phase=%s", row["session_id"], row["phase"])
        return True
    if row["phase"] in store.WAITING_PHASES:
        return False  # its answer resumes it; queued input waits for the turn's end
    return await store.start_next_turn(uow, row)


async def compact_session(cmd: CompactSession, deps: HarnessDeps) -> None:
    """Compact an idle session on request: every turn but the latest is summarised. A turn
    that started meanwhile wins (it compacts itself when it needs to)."""
    sid = cmd.session_id
    if deps.runners.is_running(sid):
        return
    state = await store.read_state(deps.loop.uows, sid)
    if state is None or state.running:
        return
    try:
        agent = deps.loop.agents.get(state.agent_type)
    except UnknownAgentType:
        return
    tried, after = await compact(deps.loop.model, deps.loop.uows, state, agent, keep_tokens=None, idle=True)
    log.info("session_compaction_requested session=%s compacted=%s", sid, tried and after is not None)


async def cancel_session(cmd: CancelSession, deps: HarnessDeps) -> None:
    """The cancel itself is already recorded by the gateway; interrupt the local loop so an
    in-flight model call stops now rather than being dropped when it returns."""
    if deps.runners.cancel(cmd.session_id):
        log.info("session_loop_interrupted session=%s", cmd.session_id)
