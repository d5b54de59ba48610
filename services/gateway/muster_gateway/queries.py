"""Reads: REST resources, subscription starting points and the hub's event fetches.

Every read that takes a session id from a client goes through `owned`, so an unknown id,
a malformed id and another user's session are the same `not_found`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar
from uuid import UUID

from muster_runtime.db import Connection, Pool

from muster_gateway.errors import not_found
from muster_gateway.fanout import Cursor, EventRow, Fetch
from muster_gateway.frames import client_phase, iso, message_data

_SESSION_COLUMNS = """session_id, title, session_type, parent_session_id, root_session_id,
    phase, last_error, agent_type, model_id, created_at, updated_at"""


def parse_session_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except (ValueError, TypeError, AttributeError):
        raise not_found() from None


async def owned(conn: Connection | Pool, user_id: str, raw_id: str, columns: str = "1") -> Any:
    """The session's row (`columns`) when `user_id` owns it; else not_found."""
    row = await conn.fetchrow(
        f"SELECT {columns} FROM sessions WHERE session_id = $1 AND user_id = $2",
        parse_session_id(raw_id), user_id,
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
        "createdAt": iso(row["created_at"]),
        "updatedAt": iso(row["updated_at"]),
    }
    if row["last_error"] is not None and row["phase"] == "FAILED":
        body["error"] = row["last_error"]
    return body


async def get_session(pool: Pool, user_id: str, raw_id: str) -> dict[str, Any]:
    return session_resource(await owned(pool, user_id, raw_id, _SESSION_COLUMNS))


async def list_sessions(
    pool: Pool, user_id: str, session_type: str, limit: int
) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        f"""SELECT {_SESSION_COLUMNS} FROM sessions WHERE user_id = $1 AND session_type = $2
            ORDER BY created_at DESC, session_id DESC LIMIT $3""",
        user_id, session_type, limit,
    )
    return [session_resource(row) for row in rows]


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
    pool: Pool, user_id: str, raw_id: str, *, rounds: int, before_seq: int | None,
    include_discarded: bool,
) -> dict[str, Any]:
    before = before_seq if before_seq is not None else 2**31 - 1
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read",
                                                        readonly=True):
        session_id = (await owned(conn, user_id, raw_id, "session_id"))["session_id"]
        visible = "session_id = $1 AND seq < $2 AND ($3 OR NOT discarded)"
        # Start of the rounds-th newest round; the page holds it, everything after it, and
        # one older row so `paginate` can tell whether anything is older.
        start = await conn.fetchval(
            f"""SELECT seq FROM messages WHERE {visible} AND role = 'USER'
                ORDER BY seq DESC OFFSET $4 LIMIT 1""",
            session_id, before, include_discarded, rounds - 1,
        )
        low = -1
        if start is not None:
            low = await conn.fetchval(
                f"SELECT coalesce(max(seq), $4) FROM messages WHERE {visible} AND seq < $4",
                session_id, before, include_discarded, start,
            )
        rows = await conn.fetch(
            f"""SELECT message_id, seq, role, content, tool_calls, tool_call_id, discarded,
                       created_at
                FROM messages WHERE {visible} AND seq >= $4 ORDER BY seq""",
            session_id, before, include_discarded, low,
        )
    page, next_before = paginate(rows, rounds)
    return {"items": [_message_item(row) for row in page], "nextBeforeSeq": next_before}


def _message_item(row: Any) -> dict[str, Any]:
    item = message_data(
        row["message_id"], row["seq"], row["role"], row["content"], row["tool_calls"],
        row["tool_call_id"],
    )
    item["createdAt"] = iso(row["created_at"])
    item["discarded"] = row["discarded"]
    if row["role"] == "ASSISTANT":
        item["fileChanges"] = []  # placeholder until file changes are projected
    return item


async def subscription_cursor(
    pool: Pool, user_id: str, raw_id: str, after_position: int | None
) -> tuple[str, Cursor]:
    """Ownership check, then where a new subscription starts: after `after_position`, or
    after the stream's current head ("live from now")."""
    async with pool.acquire() as conn:
        session_id = str((await owned(conn, user_id, raw_id, "session_id"))["session_id"])
        if after_position is None:
            head = await conn.fetchrow(
                """SELECT position, stream_version FROM events WHERE stream_id = $1
                   ORDER BY stream_version DESC LIMIT 1""",
                session_id,
            )
            if head is None:
                return session_id, Cursor(0, 0)
            return session_id, Cursor(head["position"], head["stream_version"])
        version = await conn.fetchval(
            """SELECT coalesce(max(stream_version), 0) FROM events
               WHERE stream_id = $1 AND position <= $2""",
            session_id, after_position,
        )
        return session_id, Cursor(after_position, version)


def event_fetcher(pool: Pool) -> Fetch:
    async def fetch(session_id: str, after_version: int, limit: int) -> list[EventRow]:
        rows = await pool.fetch(
            """SELECT position, stream_version, recorded_at, type, schema_version, payload
               FROM events WHERE stream_id = $1 AND stream_version > $2
               ORDER BY stream_version LIMIT $3""",
            session_id, after_version, limit,
        )
        return [EventRow(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    return fetch


async def healthy(pool: Pool) -> bool:
    try:
        return bool(await pool.fetchval("SELECT 1", timeout=2.0) == 1)
    except Exception:
        return False
