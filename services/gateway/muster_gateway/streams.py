"""Reads that feed live delivery: where a subscription starts, the hub's event fetches,
and the health probe."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import orjson
from muster_runtime.process.db import Pool

from muster_gateway.fanout import Cursor, EventRow, Fetch
from muster_gateway.queries import owned


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
            session_id,
            after_position,
        )
        return session_id, Cursor(after_position, version)


def event_fetcher(pool: Pool) -> Fetch:
    async def fetch(session_id: str, after_version: int, limit: int) -> list[EventRow]:
        rows = await pool.fetch(
            """SELECT position, stream_version, recorded_at, type, schema_version, payload
               FROM events WHERE stream_id = $1 AND stream_version > $2
               ORDER BY stream_version LIMIT $3""",
            session_id,
            after_version,
            limit,
        )
        return [EventRow(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    return fetch


def version_reader(pool: Pool) -> Callable[[list[str]], Awaitable[dict[str, int]]]:
    """The latest version of each stream, one index probe each (the hub's poller)."""

    async def versions(stream_ids: list[str]) -> dict[str, int]:
        rows = await pool.fetch(
            """SELECT s.id, (SELECT max(e.stream_version) FROM events e WHERE e.stream_id = s.id)
               FROM unnest($1::text[]) AS s(id)""",
            stream_ids,
        )
        return {r[0]: r[1] for r in rows if r[1] is not None}

    return versions


def published_row(value: bytes | None) -> EventRow | None:
    """The stored event a `muster.events` record carries (`recorded_event`), or None when
    the record is not one (the hub then reads the store instead)."""
    try:
        record: Any = orjson.loads(value or b"")
        row = EventRow(
            record["position"],
            record["stream_version"],
            datetime.fromisoformat(record["recorded_at"]),
            record["type"],
            record["schema_version"],
            record["payload"],
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    well_formed = isinstance(row.position, int) and isinstance(row.version, int)
    return row if well_formed and isinstance(row.type, str) and isinstance(row.payload, dict) else None


async def healthy(pool: Pool) -> bool:
    try:
        return bool(await pool.fetchval("SELECT 1", timeout=2.0) == 1)
    except Exception:
        return False
