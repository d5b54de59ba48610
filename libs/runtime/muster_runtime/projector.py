"""Inline projections: the read models, updated from events in the appending transaction.

The same functions rebuild every table from the events alone, so a projection may only use
what the event and its stored envelope carry (never `now()`, never another table's state
that is not itself a projection of earlier events).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from muster_contracts import events as ev

from muster_runtime import projector_executions as executions
from muster_runtime.db import Connection

if TYPE_CHECKING:
    from muster_runtime.eventstore import StoredEvent

Projection = Callable[[Connection, "StoredEvent", Any], Awaitable[None]]

PROJECTION_TABLES = ("sessions", "messages", "session_inputs", "tool_runs", "executions", "file_changes")


async def _session_created(conn: Connection, s: StoredEvent, e: ev.SessionCreated) -> None:
    await conn.execute(
        """INSERT INTO sessions (session_id, user_id, session_type, parent_session_id,
               root_session_id, title, agent_type, model_id, version, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)""",
        e.session_id,
        e.user_id,
        e.session_type,
        e.parent_session_id,
        e.root_session_id,
        e.title,
        e.agent_type,
        e.model_id,
        s.stream_version,
        s.recorded_at,
    )


async def _input_queued(conn: Connection, s: StoredEvent, e: ev.UserMessageQueued) -> None:
    await conn.execute(
        """INSERT INTO session_inputs (message_id, session_id, client_message_id, content,
               state, position, queued_at)
           VALUES ($1, $2, $3, $4, 'QUEUED', $5, $6)""",
        e.message_id,
        _sid(s),
        e.client_message_id,
        e.content,
        s.position,
        s.recorded_at,
    )


async def _inputs_dropped(conn: Connection, s: StoredEvent, e: ev.QueuedMessagesDropped) -> None:
    await conn.execute(
        "UPDATE session_inputs SET state = 'DROPPED' WHERE message_id = ANY($1::uuid[])",
        e.message_ids,
    )


async def _message_recorded(conn: Connection, s: StoredEvent, e: ev.MessageRecorded) -> None:
    calls = [call.model_dump(mode="json") for call in e.tool_calls] if e.tool_calls else None
    usage = e.usage.model_dump() if e.usage else None
    await conn.execute(
        """INSERT INTO messages (message_id, session_id, seq, role, content, tool_calls,
               tool_call_id, usage, position, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)""",
        e.message_id,
        _sid(s),
        e.seq,
        e.role,
        e.content,
        calls,
        e.tool_call_id,
        usage,
        s.position,
        s.recorded_at,
    )
    await conn.execute(
        "UPDATE sessions SET message_count = greatest(message_count, $2) WHERE session_id = $1",
        _sid(s),
        e.seq,
    )
    if e.role == "USER":
        # A queued input becomes this USER message: same id, so the queue entry is consumed.
        await conn.execute("UPDATE session_inputs SET state = 'CONSUMED' WHERE message_id = $1", e.message_id)


async def _messages_discarded(conn: Connection, s: StoredEvent, e: ev.MessagesDiscarded) -> None:
    await conn.execute(
        "UPDATE messages SET discarded = true WHERE message_id = ANY($1::uuid[])", e.message_ids
    )


async def _phase_changed(conn: Connection, s: StoredEvent, e: ev.SessionPhaseChanged) -> None:
    await conn.execute(
        """UPDATE sessions SET phase = $2, last_error = $3,
               recoveries = recoveries + ($2 = 'RESUMING')::int
           WHERE session_id = $1""",
        _sid(s),
        e.phase,
        e.error,
    )


async def _tool_started(conn: Connection, s: StoredEvent, e: ev.ToolCallStarted) -> None:
    await conn.execute(
        """INSERT INTO tool_runs (session_id, tool_call_id, message_id, name, started_at)
           VALUES ($1, $2, $3, $4, $5)""",
        _sid(s),
        e.tool_call_id,
        e.message_id,
        e.name,
        s.recorded_at,
    )


async def _file_changed(conn: Connection, s: StoredEvent, e: ev.FileChanged) -> None:
    # The blobs it references were written by the recording transaction (not a projection).
    await conn.execute(
        """INSERT INTO file_changes (change_id, session_id, message_id, message_seq,
               tool_call_id, path, change_type, lines_added, lines_deleted, diff_sha256,
               before_sha256, after_sha256, before_size, after_size, session_type, agent_type,
               note, position, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
               $17, $18, $19)""",
        e.change_id,
        _sid(s),
        e.message_id,
        e.message_seq,
        e.tool_call_id,
        e.path,
        e.change_type,
        e.lines_added,
        e.lines_deleted,
        e.diff_sha256,
        e.before_sha256,
        e.after_sha256,
        e.before_size,
        e.after_size,
        e.session_type,
        e.agent_type,
        e.note,
        s.position,
        s.recorded_at,
    )


PROJECTIONS: dict[str, Projection] = {
    "SessionCreated": _session_created,
    "UserMessageQueued": _input_queued,
    "QueuedMessagesDropped": _inputs_dropped,
    "MessageRecorded": _message_recorded,
    "MessagesDiscarded": _messages_discarded,
    "SessionPhaseChanged": _phase_changed,
    "ToolCallStarted": _tool_started,
    "FileChanged": _file_changed,
    "ExecutionStarted": executions.execution_started,
    "ExecutionFinished": executions.execution_finished,
    "ExecutionDelivered": executions.execution_delivered,
    "ExecutionRecovering": executions.execution_recovering,
}

# Events whose stream is an execution, not a session: they do not touch `sessions`.
EXECUTION_EVENTS = frozenset(
    {"ExecutionStarted", "ExecutionFinished", "ExecutionDelivered", "ExecutionRecovering"}
)


def _sid(stored: StoredEvent) -> UUID:
    return UUID(stored.stream_id)


async def project_all(conn: Connection, events: list[StoredEvent]) -> None:
    """Apply events of one stream, in order; the session row's version and time are set
    once, from the last of them."""
    for stored in events:
        handler = PROJECTIONS.get(stored.type)
        if handler is not None:
            await handler(conn, stored, stored.event)
    touching = [s for s in events if s.type != "SessionCreated" and s.type not in EXECUTION_EVENTS]
    if touching:
        last = touching[-1]
        await conn.execute(
            "UPDATE sessions SET version = $2, updated_at = $3 WHERE session_id = $1",
            UUID(last.stream_id),
            last.stream_version,
            last.recorded_at,
        )
