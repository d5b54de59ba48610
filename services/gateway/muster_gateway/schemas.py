"""REST response shapes, for `/openapi.json` and for checking what the queries return.

Optional fields (`toolCalls`, `toolCallId`, `fileChanges`, `error`) are absent rather than
null when they do not apply; routes serialise with `exclude_unset` for that.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str
    # `rate_limited`, `quota_exceeded`, `overloaded`: when to retry (also `Retry-After`).
    retryAfterMs: int | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Usage(BaseModel):
    promptTokens: int
    completionTokens: int
    totalTokens: int


class Session(BaseModel):
    sessionId: str
    title: str | None
    sessionType: Literal["NORMAL", "SIDE_TASK", "SUBAGENT"]
    parentSessionId: str | None
    rootSessionId: str
    phase: str | None
    agentType: str
    modelId: str | None
    permissionLevel: Literal["auto", "ask", "read_only"]
    executionMode: Literal["CLOUD", "LOCAL"]
    contextMode: Literal["none", "summary", "fork"] | None
    archived: bool
    unread: bool
    createdAt: str
    updatedAt: str
    error: str | None = None
    # `GET /v1/sessions` only: the tree signals over this session's descendants, computed
    # as `session_tree_status` is (migration 0010's `muster_tree_status`).
    treeRunning: bool | None = None
    treeUnread: bool | None = None
    pendingApprovals: int | None = None
    pendingQuestions: int | None = None
    # `GET /v1/sessions/{id}` (and the answers that return one session): the tokens its own
    # model calls reported, and those of its tree (the session and all its descendants).
    usage: Usage | None = None
    treeUsage: Usage | None = None


class SessionList(BaseModel):
    items: list[Session]


class ToolCallFunction(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: ToolCallFunction


ChangeType = Literal["CREATED", "MODIFIED", "DELETED"]
SourceType = Literal["MAIN", "SUBAGENT"]


class FileChange(BaseModel):
    """A change made in this message's round: by this session's own tool calls (MAIN), or by
    a subagent it delegated to in this message (SUBAGENT; `parentToolCallId` names the
    delegation). `toolCallId`/`messageId` are those of the session that made the change."""

    changeId: str
    path: str
    changeType: ChangeType
    linesAdded: int
    linesDeleted: int
    diff: str | None
    sourceSessionId: str
    sourceType: SourceType
    sourceAgentType: str | None  # null for a main session's own changes
    toolCallId: str
    messageId: str
    parentToolCallId: str | None
    executionId: str | None
    note: str | None


class Message(BaseModel):
    messageId: str
    seq: int
    role: Literal["USER", "ASSISTANT", "TOOL"]
    content: str
    toolCalls: list[ToolCall] | None = None
    toolCallId: str | None = None
    sourceSessionId: str | None = None  # a delivered TOOL result: the child session it came from
    createdAt: str
    discarded: bool
    fileChanges: list[FileChange] | None = None


class MessagePage(BaseModel):
    items: list[Message]
    nextBeforeSeq: int | None


class ChangeSource(BaseModel):
    sessionId: str
    type: SourceType
    agentType: str | None  # null for a main session's own changes


class MergedFileChange(BaseModel):
    path: str
    changeType: ChangeType
    linesAdded: int
    linesDeleted: int
    before: str | None
    after: str | None
    patch: str | None
    sources: list[ChangeSource]


class TurnFileChanges(BaseModel):
    items: list[MergedFileChange]


class Execution(BaseModel):
    executionId: str
    parentSessionId: str
    childSessionId: str
    parentToolCallId: str | None
    agentType: str
    invocationType: Literal["DELEGATE", "FOLLOWUP"]
    round: int
    task: str
    status: Literal["RUNNING", "COMPLETED", "FAILED", "CANCELLED"]  # RECOVERING shows as RUNNING
    deliveryStatus: Literal["PENDING", "DELIVERED", "SUPPRESSED"]
    startedAt: str
    endedAt: str | None
    deadlineAt: str
    deliveredAt: str | None  # when the barrier delivered (or suppressed) the result
    parentMessageId: str | None  # the parent's ASSISTANT message holding the tool call
    toolMessageId: str | None  # the parent's TOOL message holding the delivered result
    rounds: int
    toolCalls: int
    usage: Usage
    startMessageId: str | None
    endMessageId: str | None
    finalMessageId: str | None
    error: str | None = None


class ExecutionList(BaseModel):
    items: list[Execution]


class Health(BaseModel):
    status: str


class CompactionAccepted(BaseModel):
    accepted: bool
    commandId: str
