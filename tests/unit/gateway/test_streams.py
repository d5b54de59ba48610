"""A `muster.events` record, read back as the stored row it carries (`published_row`)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from muster_contracts import events as ev
from muster_gateway.frames import event_frame
from muster_gateway.streams import published_row
from muster_runtime.process.db import json_bytes
from muster_runtime.store.eventstore import recorded_event

AT = datetime(2026, 12, 3, 20, 1, 2, 345678, tzinfo=UTC)


def test_a_published_record_renders_the_frame_the_stored_row_renders() -> None:
    event = ev.MessageRecorded(
        message_id=uuid4(), seq=3, role="ASSISTANT", content="héllo", tool_calls=None
    )
    stream = str(uuid4())
    value = json_bytes(
        recorded_event(
            event_id=uuid4(),
            position=41,
            stream_id=stream,
            stream_version=7,
            type=event.type,
            schema_version=event.schema_version,
            payload=event.payload(),
            metadata={"correlation_id": "c"},
            recorded_at=AT,
        )
    )
    row = published_row(value)
    assert row is not None
    assert (row.position, row.version, row.recorded_at) == (41, 7, AT)
    frame = event_frame(stream, row.position, row.recorded_at, row.type, row.schema_version, row.payload)
    stored = event_frame(stream, 41, AT, event.type, event.schema_version, event.payload())
    assert frame == stored and frame is not None and frame["time"] == "2026-12-03T20:01:02.345678Z"


def test_a_record_that_carries_no_stored_event_is_none() -> None:
    assert published_row(None) is None
    assert published_row(b"not json") is None
    assert published_row(b'{"kind": "event"}') is None  # no position, no version
    assert published_row(b"[1, 2]") is None
    bad_time = b'{"position": 1, "stream_version": 1, "recorded_at": "noon", "type": "T", '
    assert published_row(bad_time + b'"schema_version": 1, "payload": {}}') is None
    text_version = b'{"position": 1, "stream_version": "1", "recorded_at": "2026-12-03T20:01:02+00:00", '
    assert published_row(text_version + b'"type": "T", "schema_version": 1, "payload": {}}') is None
