"""The append-only event store: per-stream optimistic concurrency, inline projections and
the outbox, all inside the caller's transaction (one transaction per decision)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from muster_contracts.events import DomainEvent, Phase
from muster_contracts.upcasting import load_event

from muster_runtime.messaging import dispatch, topics
from muster_runtime.process import tracing
from muster_runtime.process.db import Connection, UniqueViolation, json_bytes
from muster_runtime.store import lineage


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


@dataclass(frozen=True)
class EventBatch:
    """Events about to be appended, in the shapes the server-side functions take."""

    events: Sequence[DomainEvent]
    event_ids: list[UUID]
    payloads: list[dict[str, Any]]
    metadata: dict[str, Any]
    recorded_at: datetime
    claimed: bool

    @classmethod
    def of(cls, events: Sequence[DomainEvent], metadata: dict[str, Any] | None) -> EventBatch:
        event_ids = [uuid4() for _ in events]
        return cls(
            events,
            event_ids,
            [e.payload() for e in events],
            lineage.event_metadata(metadata, event_ids[0]) if event_ids else metadata or {},
            datetime.now(UTC),
            dispatch.claiming(),
        )

    def args(self) -> tuple[Any, ...]:
        return (
            self.event_ids,
            [e.type for e in self.events],
            [e.schema_version for e in self.events],
            self.payloads,
            self.metadata,
            self.recorded_at,
            topics.EVENTS,
            self.claimed,
        )

    def stored(self, stream_id: str, first_version: int, rows: Sequence[Any]) -> list[StoredEvent]:
        stored = [
            StoredEvent(
                row["event_position"],
                stream_id,
                first_version + i,
                event_id,
                self.recorded_at,
                self.metadata,
                event,
            )
            for i, (row, event_id, event) in enumerate(zip(rows, self.event_ids, self.events, strict=True))
        ]
        # Claimed: this process publishes the events itself right after commit (`dispatch`).
        dispatch.collect(
            dispatch.Outgoing(
                rows[0]["outbox_id"],
                topics.EVENTS,
                stream_id.encode(),
                tuple(map(published_value, stored, self.payloads)),
                tracing.headers(self.metadata.get(tracing.TRACEPARENT)),
            )
        )
        return stored


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
    batch = EventBatch.of(events, metadata)
    versions = list(range(expected_version + 1, expected_version + 1 + len(events)))
    try:
        # One round trip: the events, their projections and their outbox row (migration
        # 0007); positions come back in insertion order.
        rows = await conn.fetch(
            "SELECT * FROM muster_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            stream_id,
            versions,
            *batch.args(),
        )
    except UniqueViolation as exc:
        if "events_stream_version_key" in str(exc.constraint_name or exc):
            raise ConcurrencyError(f"stream {stream_id} moved past {expected_version}") from exc
        raise
    return batch.stored(stream_id, expected_version + 1, rows)


WRITE_STAGED = "SELECT * FROM muster_append_all(" + ", ".join(f"${n}" for n in range(1, 16)) + ")"


@dataclass(frozen=True)
class StagedAppend:
    """An append whose version the caller knows, written later with the decision's other
    writes (`write_staged`)."""

    stream_id: str
    first_version: int
    batch: EventBatch


@dataclass(frozen=True)
class StagedCommand:
    """A command for the outbox, written with the decision's other writes."""

    topic: str
    key: str
    body: dict[str, Any]
    claimed: bool
    trace_context: str | None


def stage(
    stream_id: str, events: Sequence[DomainEvent], expected_version: int, metadata: dict[str, Any] | None
) -> StagedAppend:
    """The append, its ids, payloads, lineage and time fixed now (as `append` would)."""
    return StagedAppend(stream_id, expected_version + 1, EventBatch.of(events, metadata))


async def write_staged(
    conn: Connection, appends: Sequence[StagedAppend], commands: Sequence[StagedCommand]
) -> None:
    """Every staged append and command in one round trip (migration 0014): the events, one
    outbox row per append and per command, one projector pass over all the new events.
    Raises ConcurrencyError when a version is taken; nothing is written then."""
    events = [(i, a, k) for i, a in enumerate(appends) for k in range(len(a.batch.events))]
    claimed = appends[0].batch.claimed if appends else commands[0].claimed
    try:
        rows = await conn.fetch(
            WRITE_STAGED,
            [i for i, _, _ in events],
            [a.stream_id for _, a, _ in events],
            [a.first_version + k for _, a, k in events],
            [a.batch.event_ids[k] for _, a, k in events],
            [a.batch.events[k].type for _, a, k in events],
            [a.batch.events[k].schema_version for _, a, k in events],
            [a.batch.payloads[k] for _, a, k in events],
            [a.batch.metadata for _, a, _ in events],
            [a.batch.recorded_at for _, a, _ in events],
            topics.EVENTS,
            claimed,
            [c.topic for c in commands],
            [c.key for c in commands],
            [c.body for c in commands],
            [c.trace_context for c in commands],
        )
    except UniqueViolation as exc:
        if "events_stream_version_key" in str(exc.constraint_name or exc):
            streams = ", ".join(sorted({a.stream_id for a in appends}))
            raise ConcurrencyError(f"a stream of {streams} moved past its expected version") from exc
        raise
    by_append: dict[int, list[Any]] = {}
    queued: dict[str, int] = {}
    for row in rows:
        if row["command_id"] is None:
            by_append.setdefault(row["append_index"], []).append(row)
        else:
            queued[row["command_id"]] = row["outbox_id"]
    for i, append in enumerate(appends):
        append.batch.stored(append.stream_id, append.first_version, by_append[i])
    for command in commands:
        dispatch.collect(
            dispatch.Outgoing(
                queued[str(command.body["message_id"])],
                command.topic,
                command.key.encode(),
                (json_bytes(command.body),),
                tracing.headers(command.trace_context),
            )
        )


@dataclass(frozen=True)
class Recorded:
    """What `record_if_current` found: `outcome` is "current" (appended after
    `base_version`), "moved" (someone recorded a message first), "gone" (not running) or
    "gated" (asked `ungated`, and the session's permission level or mode gates tools)."""

    outcome: str
    base_version: int | None
    phase: Phase | None
    stored: list[StoredEvent]


async def record_if_current(
    conn: Connection,
    session_id: UUID,
    expected_count: int,
    events: Sequence[DomainEvent],
    *,
    blobs: dict[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
    ungated: bool = False,
) -> Recorded:
    """Append to a session only if it still runs and still has `expected_count` messages:
    the lock, the check, the blobs and the append in one round trip (migration 0008). Run
    outside a transaction, it is a whole decision in one implicit transaction. With
    `ungated`, only if the session is `auto` and CLOUD too (else "gated", migration 0012)."""
    batch = EventBatch.of(events, metadata)
    digests = sorted(blobs or {})  # a fixed order: writers of shared blobs cannot deadlock
    rows = await conn.fetch(
        "SELECT * FROM muster_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        session_id,
        expected_count,
        *batch.args(),
        digests,
        [(blobs or {})[d] for d in digests],
        ungated,
    )
    head = rows[0]
    if head["outcome"] != "current":
        return Recorded(head["outcome"], head["base_version"], head["phase"], [])
    stored = batch.stored(str(session_id), head["base_version"] + 1, rows)
    return Recorded("current", head["base_version"], head["phase"], stored)


def recorded_event(
    *,
    event_id: UUID,
    position: int,
    stream_id: str,
    stream_version: int,
    type: str,
    schema_version: int,
    payload: dict[str, Any],
    metadata: dict[str, Any],
    recorded_at: datetime,
) -> dict[str, Any]:
    """The `muster.events` record of a stored event (`RecordedEvent`): what the writer
    publishes after commit and what the relay publishes from the store are the same."""
    return {
        "kind": "event",
        "event_id": str(event_id),
        "position": position,
        "stream_id": stream_id,
        "stream_version": stream_version,
        "type": type,
        "schema_version": schema_version,
        "payload": payload,
        "metadata": metadata,
        "recorded_at": recorded_at.isoformat(),
    }


def published_value(stored: StoredEvent, payload: dict[str, Any]) -> bytes:
    return json_bytes(
        recorded_event(
            event_id=stored.event_id,
            position=stored.position,
            stream_id=stored.stream_id,
            stream_version=stored.stream_version,
            type=stored.type,
            schema_version=stored.event.schema_version,
            payload=payload,
            metadata=stored.metadata,
            recorded_at=stored.recorded_at,
        )
    )


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
