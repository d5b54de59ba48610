"""Projection of execution streams into the `executions` table."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from muster_contracts import events as ev

from muster_runtime.db import Connection

if TYPE_CHECKING:
    from muster_runtime.eventstore import StoredEvent


async def execution_started(conn: Connection, s: StoredEvent, e: ev.ExecutionStarted) -> None:
    await conn.execute(
        """INSERT INTO executions (execution_id, parent_session_id, parent_tool_call_id,
               parent_message_id, child_session_id, user_id, agent_type, invocation_type, task,
               round, status, delivery_status, start_message_id, started_at, deadline_at, version)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'RUNNING', 'PENDING', $11, $12, $13, $14)""",
        e.execution_id,
        e.parent_session_id,
        e.parent_tool_call_id,
        e.parent_message_id,
        e.child_session_id,
        e.user_id,
        e.agent_type,
        e.invocation_type,
        e.task,
        e.round,
        e.start_message_id,
        s.recorded_at,
        e.deadline_at,
        s.stream_version,
    )


async def execution_finished(conn: Connection, s: StoredEvent, e: ev.ExecutionFinished) -> None:
    await conn.execute(
        """UPDATE executions SET status = $2, result = $3, error = $4, final_message_id = $5,
               end_message_id = $6, rounds = $7, tool_calls = $8, usage = $9, ended_at = $10,
               version = $11
           WHERE execution_id = $1""",
        UUID(s.stream_id),
        e.status,
        e.result,
        e.error,
        e.final_message_id,
        e.end_message_id,
        e.rounds,
        e.tool_calls,
        e.usage.model_dump(),
        s.recorded_at,
        s.stream_version,
    )


async def execution_delivered(conn: Connection, s: StoredEvent, e: ev.ExecutionDelivered) -> None:
    await conn.execute(
        """UPDATE executions SET delivery_status = $2, tool_message_id = $3, version = $4
           WHERE execution_id = $1""",
        UUID(s.stream_id),
        e.delivery_status,
        e.tool_message_id,
        s.stream_version,
    )


async def execution_recovering(conn: Connection, s: StoredEvent, e: ev.ExecutionRecovering) -> None:
    await conn.execute(
        """UPDATE executions SET status = 'RECOVERING', recoveries = recoveries + 1,
               lease_expiries = lease_expiries + $2::int, version = $3
           WHERE execution_id = $1""",
        UUID(s.stream_id),
        e.reason == "lease_expired",
        s.stream_version,
    )
