"""A turn's close in one statement on PostgreSQL (`muster_close_quietly`, migration 0017).

The caller decided its close on what it saw; the function checks, under the same locks and
in the same order as the long way (the child, then its parent), that nothing it would have
read there differs, and writes the close's events or nothing (ADR 0025).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from muster_contracts.events import DomainEvent

from muster_runtime.messaging import topics
from muster_runtime.process.db import Connection, UniqueViolation
from muster_runtime.store.eventstore import ConcurrencyError, EventBatch
from muster_runtime.uow.phases import OPEN_STATUSES
from muster_runtime.uow.unit_of_work import RunClose

CLOSE_QUIETLY = "SELECT * FROM muster_close_quietly(" + ", ".join(f"${n}" for n in range(1, 17)) + ")"


async def close_quietly(
    conn: Connection,
    session_id: UUID,
    expected_count: int,
    events: Sequence[DomainEvent],
    run: RunClose | None,
) -> str:
    """The close's outcome: "closed" (written, its events collected for publication after
    commit) or why not (nothing written)."""
    appends = [(str(session_id), EventBatch.of(events, None))]
    if run is not None:
        appends.append((str(run.execution_id), EventBatch.of(run.finished, run.finished_metadata)))
        appends.append((str(run.parent_session_id), EventBatch.of(run.notice, None)))
    appends = [(stream, batch) for stream, batch in appends if batch.events]
    try:
        rows = await _close(conn, session_id, expected_count, run, appends)
    except UniqueViolation as exc:
        # A version taken after the function's checks (by a writer that does not take these
        # locks): what the long way's staged write would raise too.
        if "events_stream_version_key" in str(exc.constraint_name or exc):
            raise ConcurrencyError(f"session {session_id}'s close lost a version race") from exc
        raise
    outcome: str = rows[0]["outcome"]
    if outcome != "closed":
        return outcome
    by_append: dict[int, list[Any]] = {}
    for row in rows:
        by_append.setdefault(row["append_index"], []).append(row)
    for i, (stream, batch) in enumerate(appends):
        written = by_append[i]
        batch.stored(stream, written[0]["stream_version"], written)
    return outcome


async def _close(
    conn: Connection,
    session_id: UUID,
    expected_count: int,
    run: RunClose | None,
    appends: list[tuple[str, EventBatch]],
) -> list[Any]:
    flat = [(i, s, batch, k) for i, (s, batch) in enumerate(appends) for k in range(len(batch.events))]
    rows: list[Any] = await conn.fetch(
        CLOSE_QUIETLY,
        session_id,
        expected_count,
        list(OPEN_STATUSES),
        run.execution_id if run else None,
        run.execution_version if run else None,
        run.parent_session_id if run else None,
        [i for i, _, _, _ in flat],
        [stream for _, stream, _, _ in flat],
        [batch.event_ids[k] for _, _, batch, k in flat],
        [batch.events[k].type for _, _, batch, k in flat],
        [batch.events[k].schema_version for _, _, batch, k in flat],
        [batch.payloads[k] for _, _, batch, k in flat],
        [batch.metadata for _, _, batch, _ in flat],
        [batch.recorded_at for _, _, batch, _ in flat],
        topics.EVENTS,
        appends[0][1].claimed,
    )
    return rows
