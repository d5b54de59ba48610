"""Domain events: facts, past tense, appended to the event store and never edited.

A stored event is `(type, schema_version, payload)`; `payload` is the model minus those two
fields. To change an event, add a new `schema_version` and an upcaster in `upcasting.py`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from muster_contracts.envelope import Message

SessionType = Literal["NORMAL", "SIDE_TASK", "SUBAGENT"]
Phase = Literal[
    "RUNNING",
    "RESUMING",
    "WAITING_APPROVAL",
    "WAITING_INPUT",
    "WAITING_CLIENT",
    "COMPLETED",
    "FAILED",
    "CANCELLING",
    "CANCELLED",
]
Role = Literal["USER", "ASSISTANT", "TOOL"]
PermissionLevel = Literal["auto", "ask", "read_only"]
ExecutionMode = Literal["CLOUD", "LOCAL"]
ContextMode = Literal["none", "summary", "fork"]


class DomainEvent(Message):
    type: str
    schema_version: int = 1

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"type", "schema_version"})


class ToolCallSpec(Message):
    """A tool call as the model asked for it; `arguments` is the exact text the model
    produced (`tool_arguments.py`), never re-serialised."""

    id: str
    name: str
    arguments: str


class BackgroundMessage(Message):
    """One source message a `summary` side task is given as background (already cut)."""

    role: Role
    content: str


class SessionCreated(DomainEvent):
    """Version 2 added the per-session settings and a side task's context (v1 payloads
    are upcast with the defaults, `upcasting.py`)."""

    type: Literal["SessionCreated"] = "SessionCreated"
    schema_version: int = 2
    session_id: UUID
    user_id: str
    session_type: SessionType = "NORMAL"
    parent_session_id: UUID | None = None
    root_session_id: UUID
    title: str | None = None
    agent_type: str = "general"
    model_id: str | None = None
    permission_level: PermissionLevel = "auto"
    execution_mode: ExecutionMode = "CLOUD"
    context_mode: ContextMode | None = None  # side tasks only
    background: list[BackgroundMessage] | None = None  # `summary` side tasks only
    workspace_id: UUID | None = None  # None: the root's (side tasks name their source's)


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


class TokenUsage(Message):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class MessageRecorded(DomainEvent):
    """v2 added `source_session_id`: the child session a delivered TOOL result came from.
    v3 keeps each tool call's `arguments` as the model's text instead of a parsed object."""

    type: Literal["MessageRecorded"] = "MessageRecorded"
    schema_version: int = 3
    message_id: UUID
    seq: int
    role: Role
    content: str
    tool_calls: list[ToolCallSpec] | None = None
    tool_call_id: str | None = None
    usage: TokenUsage | None = None  # ASSISTANT messages: what the model call cost
    source_session_id: UUID | None = None


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


InvocationType = Literal["DELEGATE", "FOLLOWUP"]
ExecutionStatus = Literal["RUNNING", "RECOVERING", "COMPLETED", "FAILED", "CANCELLED"]
DeliveryStatus = Literal["PENDING", "DELIVERED", "SUPPRESSED"]


class ExecutionStarted(DomainEvent):
    """First event of an execution's own stream (`stream_id` = execution id)."""

    type: Literal["ExecutionStarted"] = "ExecutionStarted"
    execution_id: UUID
    parent_session_id: UUID
    parent_tool_call_id: str
    parent_message_id: UUID
    child_session_id: UUID
    user_id: str
    agent_type: str
    invocation_type: InvocationType
    task: str
    round: int
    start_message_id: UUID
    deadline_at: datetime


class ExecutionFinished(DomainEvent):
    type: Literal["ExecutionFinished"] = "ExecutionFinished"
    status: Literal["COMPLETED", "FAILED", "CANCELLED"]
    result: str | None = None
    error: str | None = None
    final_message_id: UUID | None = None
    end_message_id: UUID | None = None
    rounds: int = 0
    tool_calls: int = 0
    usage: TokenUsage = TokenUsage()


RecoveryReason = Literal["lease_expired", "unclaimed"]


class ExecutionRecovering(DomainEvent):
    """Recovery took over a run nobody holds: its worker's lease expired (`lease_expired`)
    or no worker ever claimed it, its command lost with the broker (`unclaimed`). The run
    resumes on the same execution id and child session."""

    type: Literal["ExecutionRecovering"] = "ExecutionRecovering"
    reason: RecoveryReason


class ExecutionDelivered(DomainEvent):
    """The barrier recorded this execution's TOOL result in the parent (DELIVERED), or the
    parent had been cancelled or ended (SUPPRESSED)."""

    type: Literal["ExecutionDelivered"] = "ExecutionDelivered"
    delivery_status: Literal["DELIVERED", "SUPPRESSED"]
    tool_message_id: UUID | None = None


class SubagentSessionCreated(DomainEvent):
    """On the parent's stream, so its subscribers see the child appear."""

    type: Literal["SubagentSessionCreated"] = "SubagentSessionCreated"
    child_session_id: UUID
    tool_call_id: str
    agent_type: str
    execution_id: UUID


class ExecutionStatusChanged(DomainEvent):
    """On the parent's stream: an execution it delegated changed status or delivery."""

    type: Literal["ExecutionStatusChanged"] = "ExecutionStatusChanged"
    execution_id: UUID
    status: ExecutionStatus
    delivery_status: DeliveryStatus


ChangeType = Literal["CREATED", "MODIFIED", "DELETED"]


class FileChanged(DomainEvent):
    """A local tool (write_file, edit_file, delete_file, run_command) changed a workspace file, on the
    stream of the session whose tool call did it. Contents and the unified diff are stored
    once in `blobs` by sha256 and referenced here, so the event stays small whatever the
    file size. A content hash is None when that side does not exist (before a creation,
    after a deletion) or could not be captured (`note` says why)."""

    type: Literal["FileChanged"] = "FileChanged"
    change_id: UUID
    message_id: UUID  # the ASSISTANT message whose tool call made the change
    message_seq: int  # its seq: a child's changes are attributed by seq range
    tool_call_id: str
    path: str  # relative to the workspace root, '/'-separated
    change_type: ChangeType
    lines_added: int = 0
    lines_deleted: int = 0
    diff_sha256: str | None = None
    before_sha256: str | None = None
    after_sha256: str | None = None
    before_size: int | None = None
    after_size: int | None = None
    session_type: SessionType = "NORMAL"  # of the session that made the change
    agent_type: str = "general"
    note: str | None = None


class CompactionRecorded(DomainEvent):
    """The session's messages up to `boundary_seq` (`boundary_message_id`) are summarised
    by `summary`: from now on the model sees the summary and the messages after the
    boundary. Messages stay stored; only the model's context shrinks. `at_seq` is the
    session's message count when it was recorded (usage reported before it is stale)."""

    type: Literal["CompactionRecorded"] = "CompactionRecorded"
    boundary_message_id: UUID
    boundary_seq: int
    summary: str
    messages_compacted: int
    tokens_before: int
    tokens_after: int
    at_seq: int
