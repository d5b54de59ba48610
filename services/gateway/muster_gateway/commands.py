"""The gateway's decisions. Each is one transaction: events appended (with their inline
projections) and commands written to the outbox together, so an acknowledged request can
never be half-applied (invariant 4).

Convention shared with every writer of a session stream: lock the `sessions` row
(`FOR UPDATE`) before appending, so writers queue on the row instead of deadlocking on
`events_stream_version_key` against each other's projection update.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID, uuid4

import asyncpg
from muster_agent.answers import dropped_waits
from muster_contracts.commands import CancelSession, CompactSession, ProcessSession
from muster_contracts.events import (
    DomainEvent,
    QueuedMessagesDropped,
    SessionCreated,
    SessionPhaseChanged,
    UserMessageQueued,
)
from muster_runtime.messaging import topics
from muster_runtime.process import retrying
from muster_runtime.process.db import Connection, Pool
from muster_runtime.store import eventstore, lineage
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import WAITING_PHASES as WAITING

from muster_gateway.errors import GatewayError
from muster_gateway.protocol import CreateSessionData, SendMessageData
from muster_gateway.queries import owned, parse_session_id

log = logging.getLogger("muster.gateway.commands")

# A turn waiting for an approval, an answer or its LOCAL client is still the running turn:
# messages queue behind it and a cancel ends it (dropping what it waited for).
WAITING_PHASES = frozenset(WAITING)
ACTIVE_PHASES = frozenset({"RUNNING", "RESUMING", "CANCELLING"}) | WAITING_PHASES
CANCELLABLE_PHASES = frozenset({"RUNNING", "RESUMING"}) | WAITING_PHASES
CLIENT_KEY = "session_inputs_client_key"
ATTEMPTS = 6
T = TypeVar("T")


async def _retrying(decide: Callable[[], Awaitable[T]]) -> T:
    """Re-run a decision that lost a race on its stream (it re-reads everything); a small
    random pause, growing with each try, spreads the competitors out."""
    races = (eventstore.ConcurrencyError, asyncpg.DeadlockDetectedError)
    try:
        return await retrying.call(retrying.lost_race(races, attempts=ATTEMPTS, jitter_step_s=0.005), decide)
    except races as exc:
        raise GatewayError("conflict", "session is busy, retry") from exc


async def _lock(conn: Connection, user_id: str, raw_id: str) -> Any:
    return await owned(
        conn,
        user_id,
        raw_id,
        "session_id, session_type, root_session_id, phase, version",
        for_update=True,
    )


def _meta(user_id: str, root_session_id: UUID, origin: UUID | None = None) -> dict[str, Any]:
    """Event metadata; `origin`, the input that starts a turn, is its correlation and cause."""
    meta = {"user_id": user_id, "root_session_id": str(root_session_id)}
    return meta if origin is None else {**meta, **lineage.origin_metadata(origin)}


def _writable(row: Any, action: str) -> None:
    # A subagent session is driven by its execution (worker, barrier, recovery); input or
    # a cancel from outside would race them. Its parent is the handle.
    if row["session_type"] == "SUBAGENT":
        raise GatewayError("conflict", f"cannot {action} a subagent session; use its parent")


async def create_session(
    pool: Pool, user_id: str, data: CreateSessionData, workspaces_dir: Path
) -> dict[str, Any]:
    session_id = uuid4()
    stream = str(session_id)
    events: list[DomainEvent] = [
        SessionCreated(
            session_id=session_id,
            user_id=user_id,
            session_type="NORMAL",
            root_session_id=session_id,
            title=data.title,
            agent_type=data.agentType or "general",
            model_id=data.modelId,
            permission_level=data.permissionLevel or "auto",
            execution_mode=data.executionMode or "CLOUD",
        )
    ]
    message_id = uuid4() if data.content is not None else None
    if message_id is not None and data.content is not None:
        events.append(
            UserMessageQueued(
                message_id=message_id,
                client_message_id=data.clientMessageId,
                content=data.content,
            )
        )
    # Before the commit: the harness may start the turn the instant ProcessSession is out.
    (workspaces_dir / stream).mkdir(parents=True, exist_ok=True)
    async with PostgresUnitOfWork(pool) as uow:
        await uow.append(stream, events, expected_version=0, metadata=_meta(user_id, session_id, message_id))
        if message_id is not None:
            await uow.send(
                topics.COMMANDS,
                stream,
                ProcessSession(
                    session_id=session_id,
                    correlation_id=message_id,
                    causation_id=message_id,
                ),
            )
    ack: dict[str, Any] = {"sessionId": stream}
    if message_id is not None:
        ack["messageId"] = str(message_id)
    return ack


async def send_message(pool: Pool, user_id: str, raw_id: str, data: SendMessageData) -> dict[str, Any]:
    async def decide() -> dict[str, Any]:
        message_id = uuid4()
        async with PostgresUnitOfWork(pool) as uow:
            conn = await uow.connection()
            row = await _lock(conn, user_id, raw_id)
            _writable(row, "post to")
            stream = str(row["session_id"])
            # Queued: it will wait for a running turn, or behind earlier input not yet started.
            waits_behind = await conn.fetchval(
                "SELECT true FROM session_inputs WHERE session_id = $1 AND state = 'QUEUED' LIMIT 1",
                row["session_id"],
            )
            queued = row["phase"] in ACTIVE_PHASES or bool(waits_behind)
            await uow.append(
                stream,
                [
                    UserMessageQueued(
                        message_id=message_id, client_message_id=data.clientMessageId, content=data.content
                    )
                ],
                expected_version=row["version"],
                metadata=_meta(user_id, row["root_session_id"], message_id),
            )
            await uow.send(
                topics.COMMANDS,
                stream,
                ProcessSession(
                    session_id=row["session_id"],
                    correlation_id=message_id,
                    causation_id=message_id,
                ),
            )
        return {"messageId": str(message_id), "queued": queued}

    try:
        return await _retrying(decide)
    except asyncpg.UniqueViolationError as exc:
        # The unique constraint, not a prior read, decides that a retried clientMessageId
        # was already accepted; the whole transaction rolled back, so report the original.
        if exc.constraint_name != CLIENT_KEY or data.clientMessageId is None:
            raise
        return await _duplicate(pool, raw_id, data.clientMessageId)


async def _duplicate(pool: Pool, raw_id: str, client_message_id: str) -> dict[str, Any]:
    row = await pool.fetchrow(
        """SELECT i.message_id, i.state, s.phase FROM session_inputs i
           JOIN sessions s USING (session_id)
           WHERE i.session_id = $1 AND i.client_message_id = $2""",
        parse_session_id(raw_id),
        client_message_id,
    )
    if row is None:  # the original vanished (projection rebuild): nothing to point at
        raise GatewayError("conflict", "clientMessageId was already used, retry")
    queued = row["state"] == "QUEUED" and row["phase"] in ACTIVE_PHASES
    return {"messageId": str(row["message_id"]), "queued": queued, "duplicate": True}


async def cancel(pool: Pool, user_id: str, raw_id: str) -> dict[str, Any]:
    """Stop the running turn and drop what is queued behind it. Acknowledged in every
    phase: cancelling an idle session is a no-op, not an error."""

    async def decide() -> dict[str, Any]:
        async with PostgresUnitOfWork(pool) as uow:
            conn = await uow.connection()
            row = await _lock(conn, user_id, raw_id)
            _writable(row, "cancel")
            stream = str(row["session_id"])
            queued: list[UUID] = [
                r["message_id"]
                for r in await conn.fetch(
                    """SELECT message_id FROM session_inputs
                   WHERE session_id = $1 AND state = 'QUEUED' ORDER BY position""",
                    row["session_id"],
                )
            ]
            running = row["phase"] in CANCELLABLE_PHASES
            events: list[DomainEvent] = []
            if row["phase"] in WAITING_PHASES:
                events += await dropped_waits(uow, row["session_id"])
            if running:
                events.append(SessionPhaseChanged(phase="CANCELLED", error=None))
            if queued:
                # Also when idle: input accepted but not yet started would otherwise start
                # a turn right after the user asked to stop.
                events.append(QueuedMessagesDropped(message_ids=queued, reason="cancelled"))
            if events:
                await uow.append(
                    stream,
                    events,
                    expected_version=row["version"],
                    metadata=_meta(user_id, row["root_session_id"]),
                )
            if running:
                await uow.send(topics.COMMANDS, stream, CancelSession(session_id=row["session_id"]))
        return {}

    return await _retrying(decide)


async def request_compaction(pool: Pool, user_id: str, raw_id: str) -> dict[str, Any]:
    """Ask the harness to compact an idle session now (`conflict` while a turn runs: a
    running turn compacts itself when its context needs it)."""
    async with PostgresUnitOfWork(pool) as uow:
        row = await _lock(await uow.connection(), user_id, raw_id)
        if row["phase"] in ACTIVE_PHASES:
            raise GatewayError("conflict", "the session is running; compact it once its turn has ended")
        command = CompactSession(session_id=row["session_id"])
        await uow.send(topics.COMMANDS, str(row["session_id"]), command)
    return {"accepted": True, "commandId": str(command.message_id)}
