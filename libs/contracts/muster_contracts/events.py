"""Domain events: facts, past tense, appended to the event store and never edited.

A stored event is `(type, schema_version, payload)`; `payload` is the model minus those two
fields. To change an event, add a new `schema_version` and an upcaster in `upcasting.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, TypeAdapter

from muster_contracts.envelope import Message

SessionType = Literal["NORMAL", "SIDE_TASK", "SUBAGENT"]
Phase = Literal["RUNNING", "RESUMING", "COMPLETED", "FAILED", "CANCELLING", "CANCELLED"]
Role = Literal["USER", "ASSISTANT", "TOOL"]


class DomainEvent(Message):
    type: str
    schema_version: int = 1

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"type", "schema_version"})


class ToolCallSpec(Message):
    """A tool call as the model asked for it; `arguments` is the parsed JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]


class SessionCreated(DomainEvent):
    type: Literal["SessionCreated"] = "SessionCreated"
    session_id: UUID
    user_id: str
    session_type: SessionType = "NORMAL"
    parent_session_id: UUID | None = None
    root_session_id: UUID
    title: str | None = None
    agent_type: str = "general"
    model_id: str | None = None


class UserMessageQueued(DomainEvent):
    """A client's message was accepted; it becomes a USER message when its turn starts."""

    type: Literal["UserMessageQueued"] = "UserMessageQueued"
    message_id: UUID
    client_message_id: str | None = None
    content: str


class QueuedMessagesDropped(DomainEvent):
    type: Literal["QueuedMessagesDropped"] = "QueuedMessagesDropped"
    message_ids: list[UUID]
    reason: str


class MessageRecorded(DomainEvent):
    type: Literal["MessageRecorded"] = "MessageRecorded"
    message_id: UUID
    seq: int
    role: Role
    content: str
    tool_calls: list[ToolCallSpec] | None = None
    tool_call_id: str | None = None


class MessagesDiscarded(DomainEvent):
    type: Literal["MessagesDiscarded"] = "MessagesDiscarded"
    message_ids: list[UUID]
    reason: str


class SessionPhaseChanged(DomainEvent):
    type: Literal["SessionPhaseChanged"] = "SessionPhaseChanged"
    phase: Phase
    error: str | None = None


class ToolCallStarted(DomainEvent):
    """Recorded before a side-effecting tool runs, so a crash never makes it run twice."""

    type: Literal["ToolCallStarted"] = "ToolCallStarted"
    message_id: UUID
    tool_call_id: str
    name: str


AnyEvent = Annotated[
    SessionCreated
    | UserMessageQueued
    | QueuedMessagesDropped
    | MessageRecorded
    | MessagesDiscarded
    | SessionPhaseChanged
    | ToolCallStarted,
    Field(discriminator="type"),
]
EVENTS: TypeAdapter[DomainEvent] = TypeAdapter(AnyEvent)  # type: ignore[arg-type]
EVENT_TYPES: dict[str, type[DomainEvent]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        SessionCreated,
        UserMessageQueued,
        QueuedMessagesDropped,
        MessageRecorded,
        MessagesDiscarded,
        SessionPhaseChanged,
        ToolCallStarted,
    )
}
