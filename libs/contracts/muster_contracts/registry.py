"""Every event type by its `type`: the union the event store's readers validate against and
the registry the upcasters look types up in. Apart from `events.py` so the modules of the
event families (`events`, `session_events`, `wait_events`) import none of each other's."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from muster_contracts.events import (
    CompactionRecorded,
    DomainEvent,
    ExecutionDelivered,
    ExecutionFinished,
    ExecutionRecovering,
    ExecutionStarted,
    ExecutionStatusChanged,
    FileChanged,
    MessageRecorded,
    MessagesDiscarded,
    QueuedMessagesDropped,
    SessionCreated,
    SessionPhaseChanged,
    SubagentSessionCreated,
    ToolCallStarted,
    UserMessageQueued,
)
from muster_contracts.session_events import (
    SESSION_EVENTS,
    SessionArchived,
    SessionDeleted,
    SessionForked,
    SessionPromoted,
    SessionRead,
    SessionSettingsChanged,
    SessionTreeStatusChanged,
    SessionUnarchived,
    SideSessionCreated,
)
from muster_contracts.wait_events import (
    WAIT_EVENTS,
    ApprovalRequested,
    ApprovalResolved,
    QuestionAsked,
    QuestionResolved,
    ToolRequested,
    ToolRequestResolved,
)

AnyEvent = Annotated[
    SessionCreated
    | UserMessageQueued
    | QueuedMessagesDropped
    | MessageRecorded
    | MessagesDiscarded
    | SessionPhaseChanged
    | ToolCallStarted
    | ExecutionStarted
    | ExecutionFinished
    | ExecutionRecovering
    | ExecutionDelivered
    | SubagentSessionCreated
    | ExecutionStatusChanged
    | FileChanged
    | CompactionRecorded
    | SideSessionCreated
    | SessionForked
    | SessionSettingsChanged
    | SessionArchived
    | SessionUnarchived
    | SessionDeleted
    | SessionPromoted
    | SessionRead
    | SessionTreeStatusChanged
    | ApprovalRequested
    | ApprovalResolved
    | QuestionAsked
    | QuestionResolved
    | ToolRequested
    | ToolRequestResolved,
    Field(discriminator="type"),
]
EVENTS: TypeAdapter[DomainEvent] = TypeAdapter(AnyEvent)
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
        ExecutionStarted,
        ExecutionFinished,
        ExecutionRecovering,
        ExecutionDelivered,
        SubagentSessionCreated,
        ExecutionStatusChanged,
        FileChanged,
        CompactionRecorded,
        *SESSION_EVENTS,
        *WAIT_EVENTS,
    )
}
