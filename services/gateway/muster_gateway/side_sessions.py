"""`create_side_session`: branch a NORMAL or SIDE_TASK session, in one transaction.

The side task's events (creation, its fork or summary, its first input) and the source's
`SideSessionCreated` are appended together with the `ProcessSession` that starts its turn.
The source's row is locked first, so a running source can be forked: its writers wait, and
everything they recorded before is in the copy (ADR 0014).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from muster_contracts.commands import ProcessSession
from muster_contracts.events import (
    BackgroundMessage,
    CompactionRecorded,
    DomainEvent,
    SessionCreated,
    UserMessageQueued,
)
from muster_contracts.session_events import SessionForked, SideSessionCreated
from muster_runtime.messaging import topics
from muster_runtime.process.db import Connection, Pool
from muster_runtime.store import lineage
from muster_runtime.store.fork_ids import copied_id
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from muster_gateway.commands import _retrying
from muster_gateway.errors import GatewayError
from muster_gateway.fork_cut import complete_prefix
from muster_gateway.protocol import CreateSideSessionData
from muster_gateway.queries import owned

SUMMARY_MESSAGES = 10
SUMMARY_CHARS = 300
_SOURCE = """session_id, session_type, root_session_id, agent_type, model_id, permission_level,
    execution_mode, workspace_id, message_count, version"""


async def create_side_session(
    pool: Pool, user_id: str, raw_source: str, data: CreateSideSessionData
) -> dict[str, Any]:
    return await _retrying(lambda: _create(pool, user_id, raw_source, data))


async def _create(pool: Pool, user_id: str, raw_source: str, data: CreateSideSessionData) -> dict[str, Any]:
    side_id, message_id = uuid4(), uuid4()
    async with PostgresUnitOfWork(pool) as uow:
        conn = await uow.connection()
        source = await owned(conn, user_id, raw_source, _SOURCE, for_update=True)
        if source["session_type"] == "SUBAGENT":
            raise GatewayError("conflict", "a subagent session cannot have side tasks; use its parent")
        if data.forkFromMessageId is not None and data.contextMode != "fork":
            raise GatewayError("bad_request", "data.forkFromMessageId: only with contextMode 'fork'")
        background = await _summary(conn, source["session_id"]) if data.contextMode == "summary" else None
        events: list[DomainEvent] = [
            SessionCreated(
                session_id=side_id,
                user_id=user_id,
                session_type="SIDE_TASK",
                parent_session_id=source["session_id"],
                root_session_id=source["root_session_id"],
                title=data.title,
                agent_type=source["agent_type"],
                model_id=data.modelId or source["model_id"],
                permission_level=data.permissionLevel or source["permission_level"],
                execution_mode=source["execution_mode"],
                context_mode=data.contextMode,
                background=background,
                workspace_id=source["workspace_id"] or source["root_session_id"],
            )
        ]
        if data.contextMode == "fork":
            fork = await _fork(conn, source, data.forkFromMessageId)
            events.append(fork)
            events += await _forked_compaction(conn, side_id, source["session_id"], fork.up_to_seq)
        events.append(
            UserMessageQueued(
                message_id=message_id, client_message_id=data.clientMessageId, content=data.content
            )
        )
        meta = {
            "user_id": user_id,
            "root_session_id": str(source["root_session_id"]),
            **lineage.origin_metadata(message_id),
        }
        await uow.append(str(side_id), events, expected_version=0, metadata=meta)
        notice = SideSessionCreated(
            session_id=side_id, root_session_id=source["root_session_id"], context_mode=data.contextMode
        )
        await uow.append(
            str(source["session_id"]), [notice], expected_version=source["version"], metadata=meta
        )
        start = ProcessSession(session_id=side_id, correlation_id=message_id, causation_id=message_id)
        await uow.send(topics.COMMANDS, str(side_id), start)
    return {"sessionId": str(side_id), "messageId": str(message_id)}


async def _summary(conn: Connection, source_id: UUID) -> list[BackgroundMessage]:
    rows = await conn.fetch(
        """SELECT role, content FROM messages WHERE session_id = $1 AND NOT discarded
           ORDER BY seq DESC LIMIT $2""",
        source_id,
        SUMMARY_MESSAGES,
    )
    return [BackgroundMessage(role=r["role"], content=r["content"][:SUMMARY_CHARS]) for r in reversed(rows)]


async def _forked_compaction(
    conn: Connection, side_id: UUID, source_id: UUID, up_to: int
) -> list[DomainEvent]:
    """The source's compaction state, when its boundary is inside the copy: the side task's
    model then sees the same summary and what follows it, with the copies' ids."""
    row = await conn.fetchrow(
        "SELECT * FROM compactions WHERE session_id = $1 AND boundary_seq <= $2", source_id, up_to
    )
    if row is None:
        return []
    return [
        CompactionRecorded(
            boundary_message_id=copied_id(side_id, row["boundary_message_id"]),
            boundary_seq=row["boundary_seq"],
            summary=row["summary"],
            messages_compacted=row["messages_compacted"],
            tokens_before=row["tokens_before"],
            tokens_after=row["tokens_after"],
            at_seq=min(row["at_seq"], up_to),
        )
    ]


async def _fork(conn: Connection, source: Any, raw_message_id: str | None) -> SessionForked:
    """The copy's extent: up to the named message (or everything), moved back before a tool
    round whose results are not all recorded. Reads only the turn holding the cut."""
    source_id: UUID = source["session_id"]
    up_to = int(source["message_count"])
    if raw_message_id is not None:
        seq = None
        try:
            message_id = UUID(raw_message_id)
        except ValueError:
            message_id = None
        if message_id is not None:
            seq = await conn.fetchval(
                "SELECT seq FROM messages WHERE session_id = $1 AND message_id = $2 AND NOT discarded",
                source_id,
                message_id,
            )
        if seq is None:
            raise GatewayError("bad_request", "data.forkFromMessageId: not a message of the source session")
        up_to = int(seq)
    turn = await conn.fetch(
        """SELECT seq, role, tool_calls, tool_call_id FROM messages
           WHERE session_id = $1 AND NOT discarded AND seq <= $2
             AND seq >= (SELECT coalesce(max(seq), 0) FROM messages
                         WHERE session_id = $1 AND NOT discarded AND role = 'USER' AND seq <= $2)
           ORDER BY seq""",
        source_id,
        up_to,
    )
    cut = complete_prefix(turn, up_to)
    skipped = await conn.fetch(
        "SELECT message_id FROM messages WHERE session_id = $1 AND discarded AND seq <= $2 ORDER BY seq",
        source_id,
        cut,
    )
    return SessionForked(
        source_session_id=source_id, up_to_seq=cut, skipped_message_ids=[r["message_id"] for r in skipped]
    )
