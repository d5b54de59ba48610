"""Harness command handlers: small functions taking a typed command and their deps."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from muster_agent import session_store as store
from muster_agent import titles
from muster_agent.agents import UnknownAgentType
from muster_agent.command_stops import answer_stopped_commands
from muster_agent.compaction import compact
from muster_agent.loop import LoopDeps, StepOutcome, run_until_idle
from muster_agent.runners import Runners
from muster_agent.session_store import SessionState
from muster_contracts.commands import CancelSession, CompactSession, ProcessSession, ResumeSession
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

log = logging.getLogger("muster.harness")

CONSUMER = "harness"


@dataclass
class HarnessDeps:
    loop: LoopDeps
    runners: Runners
    lease_ttl_s: float


class Begun(NamedTuple):
    """Whether a claim leaves a turn running here, and the state to start its loop from
    when the claim read or started it (None: the loop loads it)."""

    running: bool
    state: SessionState | None = None
    # The USER message a title is made from: the turn started a session without a title.
    title_from: str | None = None


NOT_BEGUN = Begun(False)


async def process_session(cmd: ProcessSession | ResumeSession, deps: HarnessDeps) -> None:
    """Drive a session: start its next queued turn if idle, or take over a running turn
    nobody holds. Safe to receive any number of times. Claiming the command and the lease
    and starting the turn are one transaction, under the session's lock."""
    sid = cmd.session_id
    if deps.runners.is_running(sid):
        deps.runners.start(sid, lambda: drive(deps, sid))  # marks it to look again
        return
    async with deps.loop.uows() as uow:
        begun = await _claim_locked(uow, cmd, deps)
    if begun.running:
        first = [begun.state]

        async def body() -> None:
            # The first run starts from the turn begun or claimed above; a re-run (another
            # command came while this one ran) looks at the session afresh.
            if first:
                await drive(deps, sid, begun=True, state=first.pop(), title_from=begun.title_from)
            else:
                await drive(deps, sid)

        deps.runners.start(sid, body)


async def _claim_locked(
    uow: AbstractUnitOfWork, cmd: ProcessSession | ResumeSession, deps: HarnessDeps
) -> Begun:
    """The claim under the session's lock, starting its next turn if it is idle."""
    sid = cmd.session_id
    # The command recorded, the session locked and its lease taken in one round trip.
    claim = await uow.claim_session(CONSUMER, str(cmd.message_id), sid, deps.runners.owner, deps.lease_ttl_s)
    if not claim.first:
        return NOT_BEGUN
    if claim.row is None:
        log.warning("command_for_unknown_session type=%s session=%s", cmd.type, sid)
        return NOT_BEGUN
    session = Session.of(claim.row)
    if session.is_subagent:
        return NOT_BEGUN  # executions are the workers' job
    if not claim.leased:
        return NOT_BEGUN  # another live instance runs this session
    return await _begin_locked(uow, session)


async def drive(
    deps: HarnessDeps,
    session_id: UUID,
    *,
    begun: bool | None = None,
    state: SessionState | None = None,
    title_from: str | None = None,
) -> None:
    """Run the session's turn until it ends (the next queued turn starts in the transaction
    that ends one) or waits for children; from `state` when the claim read it. A turn that
    started an untitled session (`title_from`) names it meanwhile."""
    if begun is None:
        async with deps.loop.uows() as uow:
            row = await uow.lock_session(session_id)
            claimed = await _begin_locked(uow, Session.of(row)) if row is not None else NOT_BEGUN
            begun, title_from = claimed.running, claimed.title_from
            started = claimed.state
    else:
        started = state
    # The title is made alongside the turn but recorded only once the loop has stopped
    # (its turn ended or waits for children): an append to the session's stream while the
    # loop runs would move the version its one-statement decisions are guarded by, and
    # every such decision would fall back to its long way (ADR 0040).
    making = None
    if title_from is not None:
        making = asyncio.create_task(_title(deps, started, session_id, title_from))
    try:
        if begun and await run_until_idle(deps.loop, session_id, state) == StepOutcome.WAITING:
            log.info("session_waiting_for_children session=%s", session_id)
    except BaseException:
        if making is not None:
            making.cancel()
        raise
    if making is not None:
        await titles.record_made(deps.loop.uows, session_id, await making)


async def _title(deps: HarnessDeps, state: SessionState | None, session_id: UUID, first_message: str) -> str:
    model_name = "default"
    if state is not None:
        try:
            model_name = state.model_id or deps.loop.agents.get(state.agent_type).model
        except UnknownAgentType:
            model_name = state.model_id or model_name
    return await titles.make_title(deps.loop.model, session_id, model_name, first_message)


async def _begin_locked(uow: AbstractUnitOfWork, session: Session) -> Begun:
    """With the session locked: whether a turn runs (already, or started now from the
    oldest queued input), with the state of a turn started now."""
    if session.running:
        log.info("session_loop_start session=%s phase=%s", session.session_id, session.phase)
        return Begun(True)
    if session.waiting:
        return NOT_BEGUN  # its answer resumes it; queued input waits for the turn's end
    started = await store.start_next_turn(uow, session)
    if started is None:
        return NOT_BEGUN
    untitled = session.title is None and not session.is_subagent
    users = [m.content for m in started.messages if m.role == "USER"] if untitled else []
    return Begun(True, started, users[-1] if users else None)


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
    in-flight model call stops now rather than being dropped when it returns; a command a
    crash cut off meanwhile is answered (`command_stops`)."""
    if deps.runners.cancel(cmd.session_id):
        log.info("session_loop_interrupted session=%s", cmd.session_id)
    else:
        # No loop here: one killed with a command running is never resumed now.
        await answer_stopped_commands(deps.loop, cmd.session_id)
