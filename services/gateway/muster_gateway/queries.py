"""REST reads: sessions, message pages (by rounds) and executions.

Every read that takes a session id from a client goes through `owned`, so an unknown id,
a malformed id and another user's session are the same `not_found`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar
from uuid import UUID

from muster_runtime.process.db import Connection, Pool

from muster_gateway.errors import GatewayError, not_found
from muster_gateway.file_change_merge import Change
from muster_gateway.file_changes import changes_by_message, turn_summary
from muster_gateway.frames import client_phase, client_status, iso, message_data
from muster_gateway.ids import parse_session_id as parse_session_id  # re-exported for the edges

_SESSION_COLUMNS = """session_id, title, session_type, parent_session_id, root_session_id,
    phase, last_error, agent_type, model_id, created_at, updated_at, permission_level,
    execution_mode, context_mode, archived, session_type <> 'SUBAGENT'
        AND coalesce(turn_ended_position, 0) > coalesce(read_position, 0) AS unread"""
SESSION_COLUMNS = _SESSION_COLUMNS


async def owned(conn: Connection | Pool, user_id: str, raw_id: str, columns: str = "1") -> Any:
    """The session's row (`columns`) when `user_id` owns it; else not_found. Reads only:
    a decision locks its session through the unit of work (`lock_owned_session`)."""
    row = await conn.fetchrow(
        # A deleted session is gone for every request, as if it never existed.
        f"SELECT {columns} FROM sessions WHERE session_id = $1 AND user_id = $2 AND NOT deleted",
        parse_session_id(raw_id),
        user_id,
    )
    if row is None:
        raise not_found()
    return row


def session_resource(row: Any) -> dict[str, Any]:
    def opt(value: Any) -> str | None:
        return None if value is None else str(value)

    body = {
        "sessionId": str(row["session_id"]),
        "title": row["title"],
        "sessionType": row["session_type"],
        "parentSessionId": opt(row["parent_session_id"]),
        "rootSessionId": str(row["root_session_id"]),
        "phase": client_phase(row["phase"]),
        "agentType": row["agent_type"],
        "modelId": row["model_id"],
        "permissionLevel": row["permission_level"],
        "executionMode": row["execution_mode"],
        "contextMode": row["context_mode"],
        "archived": row["archived"],
        "unread": row["unread"],
        "createdAt": iso(row["created_at"]),
        "updatedAt": iso(row["updated_at"]),
    }
    if row["last_error"] is not None and row["phase"] == "FAILED":
        body["error"] = row["last_error"]
    return body


async def get_session(pool: Pool, user_id: str, raw_id: str) -> dict[str, Any]:
    async with pool.acquire() as conn:
        row = await owned(conn, user_id, raw_id, _SESSION_COLUMNS)
        usage = await conn.fetchrow(SESSION_USAGE, row["session_id"])
    return {**session_resource(row), **usage_fields(usage)}


# The tokens the model calls of a session (`usage`) and of its tree, the session and every
# descendant (subagents and side tasks, deleted ones included: they were spent), reported:
# each ASSISTANT message's usage, a fork's copies left out (their original counts).
SESSION_USAGE = """
WITH RECURSIVE tree(session_id, depth) AS (
    SELECT $1::uuid, 0
    UNION ALL
    SELECT s.session_id, t.depth + 1 FROM tree t
    JOIN sessions s ON s.parent_session_id = t.session_id
    WHERE t.depth < 100)
SELECT
    coalesce(sum((m.usage->>'prompt_tokens')::bigint) FILTER (WHERE m.session_id = $1), 0) AS prompt,
    coalesce(sum((m.usage->>'completion_tokens')::bigint) FILTER (WHERE m.session_id = $1), 0)
        AS completion,
    coalesce(sum((m.usage->>'prompt_tokens')::bigint), 0) AS tree_prompt,
    coalesce(sum((m.usage->>'completion_tokens')::bigint), 0) AS tree_completion
FROM tree JOIN messages m USING (session_id)
WHERE m.usage IS NOT NULL AND m.forked_from IS NULL
"""


def usage_fields(row: Any) -> dict[str, Any]:
    def usage(prompt: int, completion: int) -> dict[str, int]:
        return {"promptTokens": prompt, "completionTokens": completion, "totalTokens": prompt + completion}

    return {
        "usage": usage(row["prompt"], row["completion"]),
        "treeUsage": usage(row["tree_prompt"], row["tree_completion"]),
    }


async def list_sessions(pool: Pool, user_id: str, session_type: str, limit: int) -> list[dict[str, Any]]:
    # One statement: the page, and the tree signals of every session on it, computed by the
    # same function as the live `session_tree_status`, so the two always agree.
    rows = await pool.fetch(
        f"""WITH page AS (
                SELECT {_SESSION_COLUMNS} FROM sessions
                WHERE user_id = $1 AND session_type = $2 AND NOT deleted
                ORDER BY created_at DESC, session_id DESC LIMIT $3)
            SELECT page.*, t.tree_running, t.tree_unread, t.pending_approvals, t.pending_questions
            FROM page
            JOIN muster_tree_status(ARRAY(SELECT session_id FROM page)) t
                ON t.root_session_id = page.session_id
            ORDER BY created_at DESC, session_id DESC""",
        user_id,
        session_type,
        limit,
    )
    return [{**session_resource(row), **tree_fields(row)} for row in rows]


def tree_fields(row: Any) -> dict[str, Any]:
    return {
        "treeRunning": row["tree_running"],
        "treeUnread": row["tree_unread"],
        "pendingApprovals": row["pending_approvals"],
        "pendingQuestions": row["pending_questions"],
    }


class _Seq(Protocol):
    def __getitem__(self, key: str) -> Any: ...


M = TypeVar("M", bound=_Seq)


def paginate(rows: Sequence[M], rounds: int) -> tuple[list[M], int | None]:
    """The newest `rounds` rounds of `rows` (ascending seq; a round starts at a USER message)
    and the `nextBeforeSeq` to ask for the older ones (None: nothing older)."""
    starts = [i for i, row in enumerate(rows) if row["role"] == "USER"]
    if len(starts) < rounds:
        return list(rows), None  # fewer rounds than asked: the page reaches the beginning
    first = starts[-rounds]
    page = list(rows[first:])
    return page, (page[0]["seq"] if first > 0 else None)


async def list_messages(
    pool: Pool,
    user_id: str,
    raw_id: str,
    *,
    rounds: int,
    before_seq: int | None,
    include_discarded: bool,
) -> dict[str, Any]:
    before = before_seq if before_seq is not None else 2**31 - 1
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        session_id = (await owned(conn, user_id, raw_id, "session_id"))["session_id"]
        visible = "session_id = $1 AND seq < $2 AND ($3 OR NOT discarded)"
        # Start of the rounds-th newest round; the page holds it, everything after it, and
        # one older row so `paginate` can tell whether anything is older.
        start = await conn.fetchval(
            f"""SELECT seq FROM messages WHERE {visible} AND role = 'USER'
                ORDER BY seq DESC OFFSET $4 LIMIT 1""",
            session_id,
            before,
            include_discarded,
            rounds - 1,
        )
        low = -1
        if start is not None:
            low = await conn.fetchval(
                f"SELECT coalesce(max(seq), $4) FROM messages WHERE {visible} AND seq < $4",
                session_id,
                before,
                include_discarded,
                start,
            )
        rows = await conn.fetch(
            f"""SELECT message_id, seq, role, content, tool_calls, tool_call_id, discarded,
                       created_at,
                       (SELECT e.child_session_id FROM executions e
                        WHERE e.parent_session_id = $1 AND e.tool_message_id = m.message_id)
                       AS source_session_id
                FROM messages m WHERE {visible} AND seq >= $4 ORDER BY seq""",
            session_id,
            before,
            include_discarded,
            low,
        )
        page, next_before = paginate(rows, rounds)
        # Only the page's messages, and the executions of their tool calls, are read.
        changes = await changes_by_message(conn, session_id, page)
    items = [_message_item(row, changes.get(row["message_id"], [])) for row in page]
    return {"items": items, "nextBeforeSeq": next_before}


def _message_item(row: Any, changes: list[Change]) -> dict[str, Any]:
    item = message_data(
        row["message_id"],
        row["seq"],
        row["role"],
        row["content"],
        row["tool_calls"],
        row["tool_call_id"],
        row["source_session_id"],
    )
    item["createdAt"] = iso(row["created_at"])
    item["discarded"] = row["discarded"]
    if row["role"] == "ASSISTANT":
        item["fileChanges"] = [change.api() for change in changes]
    return item


async def round_file_changes(pool: Pool, user_id: str, raw_id: str, raw_message_id: str) -> dict[str, Any]:
    """The file changes of the turn holding the message, merged by path."""
    try:
        message_id: UUID | None = UUID(raw_message_id)
    except ValueError:
        message_id = None  # a malformed id is simply not found (after the session check)
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        session_id = (await owned(conn, user_id, raw_id, "session_id"))["session_id"]
        items = None if message_id is None else await turn_summary(conn, session_id, message_id)
    if items is None:
        raise GatewayError("not_found", "message not found")
    return {"items": items}


async def list_executions(pool: Pool, user_id: str, raw_id: str, role: str) -> list[dict[str, Any]]:
    """`parent`: the executions this session delegated; `child`: the runs it served."""
    async with pool.acquire() as conn:
        session_id = (await owned(conn, user_id, raw_id, "session_id"))["session_id"]
        column, order = (
            ("parent_session_id", "started_at, execution_id")
            if role == "parent"
            else ("child_session_id", "round, started_at")
        )
        rows = await conn.fetch(f"SELECT * FROM executions WHERE {column} = $1 ORDER BY {order}", session_id)
    return [_execution_item(row) for row in rows]


def _execution_item(row: Any) -> dict[str, Any]:
    def opt_id(value: Any) -> str | None:
        return None if value is None else str(value)

    usage = row["usage"] or {}
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    item = {
        "executionId": str(row["execution_id"]),
        "parentSessionId": str(row["parent_session_id"]),
        "childSessionId": str(row["child_session_id"]),
        "parentToolCallId": row["parent_tool_call_id"],
        "agentType": row["agent_type"],
        "invocationType": row["invocation_type"],
        "round": row["round"],
        "task": row["task"],
        "status": client_status(row["status"]),
        "deliveryStatus": row["delivery_status"],
        "startedAt": iso(row["started_at"]),
        "endedAt": None if row["ended_at"] is None else iso(row["ended_at"]),
        "deadlineAt": iso(row["deadline_at"]),
        "deliveredAt": None if row["delivered_at"] is None else iso(row["delivered_at"]),
        "parentMessageId": opt_id(row["parent_message_id"]),
        "toolMessageId": opt_id(row["tool_message_id"]),
        "rounds": row["rounds"],
        "toolCalls": row["tool_calls"],
        "usage": {"promptTokens": prompt, "completionTokens": completion, "totalTokens": prompt + completion},
        "startMessageId": opt_id(row["start_message_id"]),
        "endMessageId": opt_id(row["end_message_id"]),
        "finalMessageId": opt_id(row["final_message_id"]),
    }
    if row["error"] is not None:
        item["error"] = row["error"]
    return item
