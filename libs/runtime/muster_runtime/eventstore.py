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
from muster_runtime.projector import project


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
    meta = metadata or {}
    now = datetime.now(UTC)
    stored: list[StoredEvent] = []
    try:
        async with conn.transaction():  # savepoint: a conflict leaves the caller's tx usable
            for offset, event in enumerate(events, start=1):
                event_id = uuid4()
                position = await conn.fetchval(
                    """INSERT INTO events (stream_id, stream_version, event_id, type,
                           schema_version, payload, metadata, recorded_at)
                       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING position""",
                    stream_id, expected_version + offset, event_id, event.type,
                    event.schema_version, event.payload(), meta, now,
                )
                stored.append(StoredEvent(
                    position, stream_id, expected_version + offset, event_id, now, meta, event
                ))
    except UniqueViolation as exc:
        if "events_stream_version_key" in str(exc.constraint_name or exc):
            raise ConcurrencyError(f"stream {stream_id} moved past {expected_version}") from exc
        raise
    for item in stored:
        await project(conn, item)
    await conn.executemany(
        "INSERT INTO outbox (topic, key, event_position) VALUES ($1, $2, $3)",
        [(topics.EVENTS, stream_id, item.position) for item in stored],
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
        stream_id, after_position, limit,
    )
    return [_row_to_stored(row) for row in rows]


async def read_all(
    conn: Connection, *, after_position: int = 0, limit: int = 5000
) -> list[StoredEvent]:
    rows = await conn.fetch(
        "SELECT * FROM events WHERE position > $1 ORDER BY position LIMIT $2",
        after_position, limit,
    )
    return [_row_to_stored(row) for row in rows]
