"""The envelope every message crossing a process boundary carries."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    return datetime.now(UTC)


class Message(BaseModel):
    """Base of all contracts: frozen, strict about unknown fields, JSON on the wire."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Envelope(Message):
    """Identity and lineage of a message. Subclasses fix `type` with a Literal."""

    message_id: UUID = Field(default_factory=uuid4)
    type: str
    schema_version: int = 1
    occurred_at: datetime = Field(default_factory=utcnow)
    correlation_id: UUID | None = None
    causation_id: UUID | None = None
