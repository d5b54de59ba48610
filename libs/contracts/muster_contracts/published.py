"""The message on `muster.events`: one stored event with its position in the log."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from muster_contracts.envelope import Message


class RecordedEvent(Message):
    """Published by the outbox relay for every appended event, keyed by `stream_id`."""

    kind: Literal["event"] = "event"
    event_id: UUID
    position: int
    stream_id: str
    stream_version: int
    type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: datetime
