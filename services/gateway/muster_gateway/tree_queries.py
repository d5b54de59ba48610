"""Reads over a tree of sessions: side-task listings and full-text search. Each is one
statement: a tree is walked with `WITH RECURSIVE`, capped at `MAX_DEPTH` levels (a
defensive bound; a side task's depth is not otherwise limited), never one query per level."""

from __future__ import annotations

from typing import Any

from muster_runtime.process.db import Pool

from muster_gateway.frames import client_phase, iso
from muster_gateway.queries import owned

MAX_DEPTH = 10

# The SIDE_TASK descendants of $1 (direct children only unless $2), archived and deleted
# sessions cut off with everything below them.
SIDE_TASKS = f"""
WITH RECURSIVE below(session_id, depth) AS (
    SELECT session_id, 1 FROM sessions
    WHERE parent_session_id = $1 AND session_type = 'SIDE_TASK' AND NOT archived AND NOT deleted
    UNION ALL
    SELECT s.session_id, b.depth + 1 FROM below b
    JOIN sessions s ON s.parent_session_id = b.session_id
    WHERE $2 AND b.depth < {MAX_DEPTH} AND s.session_type = 'SIDE_TASK'
      AND NOT s.archived AND NOT s.deleted)
SELECT s.session_id, s.title, s.parent_session_id, s.root_session_id, s.model_id,
    s.permission_level, s.context_mode, s.phase, s.created_at, s.updated_at,
    coalesce(s.turn_ended_position, 0) > coalesce(s.read_position, 0) AS unread
FROM below JOIN sessions s USING (session_id)
ORDER BY s.updated_at DESC, s.session_id DESC
"""


async def list_side_tasks(pool: Pool, user_id: str, raw_id: str, recursive: bool) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        session_id = (await owned(conn, user_id, raw_id, "session_id"))["session_id"]
        rows = await conn.fetch(SIDE_TASKS, session_id, recursive)
    return [_side_task(row) for row in rows]


def _side_task(row: Any) -> dict[str, Any]:
    return {
        "sessionId": str(row["session_id"]),
        "title": row["title"],
        "parentSessionId": str(row["parent_session_id"]),
        "rootSessionId": str(row["root_session_id"]),
        "modelId": row["model_id"],
        "permissionLevel": row["permission_level"],
        "contextMode": row["context_mode"],
        "phase": client_phase(row["phase"]),
        "unread": row["unread"],
        "createdAt": iso(row["created_at"]),
        "updatedAt": iso(row["updated_at"]),
    }


# USER messages matching the query through the expression index `messages_user_text`
# (the same expression, the same predicate: a fork's copies are not searched, their
# originals are), then the hits whose session or an ancestor of it is deleted are
# dropped, walking up at most MAX_DEPTH levels.
SEARCH = f"""
WITH RECURSIVE hits AS (
    SELECT m.message_id, m.session_id, m.seq, m.content, s.session_type, s.title,
        s.parent_session_id, s.root_session_id, s.deleted, s.updated_at
    FROM messages m JOIN sessions s USING (session_id)
    WHERE to_tsvector('english', m.content) @@ websearch_to_tsquery('english', $2)
      AND m.role = 'USER' AND m.forked_from IS NULL AND NOT m.discarded
      AND s.user_id = $1 AND s.session_type IN ('NORMAL', 'SIDE_TASK')),
up(hit, session_id, depth) AS (
    SELECT DISTINCT session_id, parent_session_id, 1 FROM hits WHERE NOT deleted
    UNION ALL
    SELECT up.hit, s.parent_session_id, up.depth + 1 FROM up
    JOIN sessions s ON s.session_id = up.session_id
    WHERE NOT s.deleted AND up.depth <= {MAX_DEPTH})
SELECT h.*, ts_headline('english', h.content, websearch_to_tsquery('english', $2),
        'MaxFragments=1, MaxWords=24, MinWords=8, StartSel=**, StopSel=**') AS snippet
FROM hits h
WHERE NOT h.deleted AND NOT EXISTS (
    SELECT 1 FROM up JOIN sessions s ON s.session_id = up.session_id
    WHERE up.hit = h.session_id AND s.deleted)
ORDER BY h.updated_at DESC, h.session_id DESC, h.seq DESC
LIMIT $3
"""


async def search(pool: Pool, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
    rows = await pool.fetch(SEARCH, user_id, query, limit)
    return [
        {
            "sessionId": str(row["session_id"]),
            "sessionType": row["session_type"],
            "title": row["title"],
            "parentSessionId": None if row["parent_session_id"] is None else str(row["parent_session_id"]),
            "rootSessionId": str(row["root_session_id"]),
            "messageId": str(row["message_id"]),
            "seq": row["seq"],
            "snippet": row["snippet"],
        }
        for row in rows
    ]
