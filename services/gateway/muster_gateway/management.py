"""Managing sessions: settings, archive, delete, promote, read. Each is one decision in one
transaction on the session's locked row, retried when it loses a race on the stream; a
request that changes nothing appends nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from muster_agent.answers import drop_events
from muster_contracts.commands import CancelSession
from muster_contracts.events import DomainEvent, QueuedMessagesDropped, SessionPhaseChanged
from muster_contracts.session_events import (
    SessionArchived,
    SessionDeleted,
    SessionPromoted,
    SessionRead,
    SessionSettingsChanged,
    SessionUnarchived,
)
from muster_runtime.messaging import topics
from muster_runtime.process.db import Connection, Pool
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from muster_gateway.commands import CANCELLABLE_PHASES, _retrying
from muster_gateway.errors import GatewayError
from muster_gateway.queries import SESSION_COLUMNS, owned, session_resource

# A side task cannot be promoted while a turn of it is under way in any form.
BUSY_PHASES = frozenset({"RUNNING", "RESUMING", "CANCELLING", "WAITING_APPROVAL", "WAITING_INPUT"})
_LOCKED = f"{SESSION_COLUMNS}, version, turn_ended_position, read_position"

Decide = Callable[[Connection, Any], Awaitable[tuple[list[DomainEvent], bool]]]


async def _decide(pool: Pool, user_id: str, raw_id: str, decide: Decide) -> Any:
    """Lock the row, let `decide` name the events (and whether a running turn must stop),
    append them; returns the row as it was."""

    async def once() -> Any:
        async with PostgresUnitOfWork(pool) as uow:
            conn = await uow.connection()
            row = await owned(conn, user_id, raw_id, _LOCKED, for_update=True)
            events, cancel = await decide(conn, row)
            if events:
                meta = {"user_id": user_id, "root_session_id": str(row["root_session_id"])}
                await uow.append(
                    str(row["session_id"]), events, expected_version=row["version"], metadata=meta
                )
            if cancel:
                await uow.send(
                    topics.COMMANDS, str(row["session_id"]), CancelSession(session_id=row["session_id"])
                )
        return row

    return await _retrying(once)


def _not_subagent(row: Any, action: str) -> None:
    if row["session_type"] == "SUBAGENT":
        raise GatewayError("conflict", f"cannot {action} a subagent session; use its parent")


async def _fresh(pool: Pool, user_id: str, row: Any) -> dict[str, Any]:
    return session_resource(await owned(pool, user_id, str(row["session_id"]), SESSION_COLUMNS))


async def change_settings(pool: Pool, user_id: str, raw_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    async def decide(conn: Connection, row: Any) -> tuple[list[DomainEvent], bool]:
        _not_subagent(row, "change")
        wanted = {k: v for k, v in changes.items() if v is not None and row[k] != v}
        return ([SessionSettingsChanged(**wanted)] if wanted else []), False

    return await _fresh(pool, user_id, await _decide(pool, user_id, raw_id, decide))


async def set_archived(pool: Pool, user_id: str, raw_id: str, archived: bool) -> dict[str, Any]:
    async def decide(conn: Connection, row: Any) -> tuple[list[DomainEvent], bool]:
        if row["session_type"] != "SIDE_TASK":
            raise GatewayError("conflict", "only side tasks are archived")
        if row["archived"] == archived:
            return [], False
        return [SessionArchived() if archived else SessionUnarchived()], False

    return await _fresh(pool, user_id, await _decide(pool, user_id, raw_id, decide))


async def delete(pool: Pool, user_id: str, raw_id: str) -> None:
    """That session only, cancelling a running turn first (in the same transaction)."""

    async def decide(conn: Connection, row: Any) -> tuple[list[DomainEvent], bool]:
        _not_subagent(row, "delete")
        events: list[DomainEvent] = []
        running = row["phase"] in CANCELLABLE_PHASES
        pending = await conn.fetch(
            """SELECT wait_id, kind FROM session_waits
               WHERE session_id = $1 AND status = 'pending' ORDER BY position""",
            row["session_id"],
        )
        events += drop_events([dict(r) for r in pending])  # what it waited for ends with it
        if running:
            events.append(SessionPhaseChanged(phase="CANCELLED"))
        queued = await conn.fetch(
            """SELECT message_id FROM session_inputs WHERE session_id = $1 AND state = 'QUEUED'
               ORDER BY position""",
            row["session_id"],
        )
        if queued:
            events.append(
                QueuedMessagesDropped(message_ids=[r["message_id"] for r in queued], reason="deleted")
            )
        return [*events, SessionDeleted()], running

    await _decide(pool, user_id, raw_id, decide)


async def promote(pool: Pool, user_id: str, raw_id: str) -> dict[str, Any]:
    async def decide(conn: Connection, row: Any) -> tuple[list[DomainEvent], bool]:
        if row["session_type"] != "SIDE_TASK":
            raise GatewayError("conflict", "only a side task can be promoted")
        if row["phase"] in BUSY_PHASES:
            raise GatewayError("conflict", "the side task is running; promote it once its turn ends")
        has_subagent = await conn.fetchval(
            "SELECT true FROM sessions WHERE parent_session_id = $1 AND session_type = 'SUBAGENT' LIMIT 1",
            row["session_id"],
        )
        if has_subagent:
            raise GatewayError("conflict", "a side task that delegated to subagents cannot be promoted")
        promoted = SessionPromoted(
            previous_parent_session_id=row["parent_session_id"],
            previous_root_session_id=row["root_session_id"],
        )
        return [promoted], False

    return await _fresh(pool, user_id, await _decide(pool, user_id, raw_id, decide))


async def mark_read(pool: Pool, user_id: str, raw_id: str) -> dict[str, Any]:
    async def decide(conn: Connection, row: Any) -> tuple[list[DomainEvent], bool]:
        _not_subagent(row, "read")
        return ([SessionRead()] if row["unread"] else []), False

    return await _fresh(pool, user_id, await _decide(pool, user_id, raw_id, decide))
