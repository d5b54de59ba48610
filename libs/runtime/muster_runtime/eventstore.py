"""The append-only event store: per-stream optimistic concurrency, inline projections and
the outbox, all inside the caller's transaction (one transaction per decision)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from muster_contracts.events import DomainEvent
from muster_contracts.upcasting import load_event

from muster_runtime import topics
from muster_runtime.db import Connection, UniqueViolation
from muster_runtime.projector import project_all


class ConcurrencyError(Exception):
    """Another writer appended to the stream first; reload and decide again."""


@dataclass(frozen=True)
class StoredEvent:
    position: int
    stream_id: str
    stream_version: int
    event_id: UUID
    recorded_at: datetime
    metadata: dict[str, Any]
    event: DomainEvent

    @property
    def type(self) -> str:
        return self.event.type


async def current_version(conn: Connection, stream_id: str) -> int:
    version = await conn.fetchval(
        "SELECT coalesce(max(stream_version), 0) FROM events WHERE stream_id = $1", stream_id
    )
    return int(version)


async def append(
    conn: Connection,
    stream_id: str,
    events: Sequence[DomainEvent],
    *,
    expected_version: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> list[StoredEvent]:
    """Append `events` after `expected_version` (None: after whatever is there now).

    Must run inside a transaction. Raises ConcurrencyError when the version is taken;
    the unique constraint decides, never a prior read.
    """
    if expected_version is None:
        expected_version = await current_version(conn, stream_id)
    if not events:
        return []
    meta = metadata or {}
    now = datetime.now(UTC)
    versions = list(range(expected_version + 1, expected_version + 1 + len(events)))
    event_ids = [uuid4() for _ in events]
    try:
        # One statement for the whole append; positions come back in insertion order.
        rows = await conn.fetch(
            """INSERT INTO events (stream_id, stream_version, event_id, type, schema_version,
                   payload, metadata, recorded_at)
               SELECT $1, v, id, t, sv, p, $7, $8
               FROM unnest($2::int[], $3::uuid[], $4::text[], $5::int[], $6::jsonb[])
                   AS x(v, id, t, sv, p)
               RETURNING position""",
            stream_id,
            versions,
            event_ids,
            [e.type for e in events],
            [e.schema_version for e in events],
            [e.payload() for e in events],
            meta,
            now,
        )
    except UniqueViolation as exc:
        if "events_stream_version_key" in str(exc.constraint_name or exc):
            raise ConcurrencyError(f"stream {stream_id} moved past {expected_version}") from exc
        raise
    stored = [
        StoredEvent(row["position"], stream_id, version, event_id, now, meta, event)
        for row, version, event_id, event in zip(rows, versions, event_ids, events, strict=True)
    ]
    await project_all(conn, stored)
    # One outbox row per append: the relay reads the events it covers from the store.
    await conn.execute(
        """INSERT INTO outbox (topic, key, event_position, event_last_position)
           VALUES ($1, $2, $3, $4)""",
        topics.EVENTS,
        stream_id,
        stored[0].position,
        stored[-1].position,
    )
    await conn.execute("SELECT pg_notify('muster_outbox', '')")
    return stored


def _row_to_stored(row: Any) -> StoredEvent:
    return StoredEvent(
        position=row["position"],
        stream_id=row["stream_id"],
        stream_version=row["stream_version"],
        event_id=row["event_id"],
        recorded_at=row["recorded_at"],
        metadata=row["metadata"],
        event=load_event(row["type"], row["schema_version"], row["payload"]),
    )


async def read_stream(
    conn: Connection, stream_id: str, *, after_position: int = 0, limit: int = 10_000
) -> list[StoredEvent]:
    rows = await conn.fetch(
        """SELECT * FROM events WHERE stream_id = $1 AND position > $2
           ORDER BY position LIMIT $3""",
        stream_id,
        after_position,
        limit,
    )
    return [_row_to_stored(row) for row in rows]


async def read_all(conn: Connection, *, after_position: int = 0, limit: int = 5000) -> list[StoredEvent]:
    rows = await conn.fetch(
        "SELECT * FROM events WHERE position > $1 ORDER BY position LIMIT $2",
        after_position,
        limit,
    )
    return [_row_to_stored(row) for row in rows]
