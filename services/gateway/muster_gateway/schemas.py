"""REST response shapes, for `/openapi.json` and for checking what the queries return.

Optional fields (`toolCalls`, `toolCallId`, `fileChanges`, `error`) are absent rather than
null when they do not apply; routes serialise with `exclude_unset` for that.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class Session(BaseModel):
    sessionId: str
    title: str | None
    sessionType: Literal["NORMAL", "SIDE_TASK", "SUBAGENT"]
    parentSessionId: str | None
    rootSessionId: str
    phase: str | None
    agentType: str
    modelId: str | None
    createdAt: str
    updatedAt: str
    error: str | None = None


class SessionList(BaseModel):
    items: list[Session]


class ToolCallFunction(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: ToolCallFunction


class Message(BaseModel):
    messageId: str
    seq: int
    role: Literal["USER", "ASSISTANT", "TOOL"]
    content: str
    toolCalls: list[ToolCall] | None = None
    toolCallId: str | None = None
    createdAt: str
    discarded: bool
    fileChanges: list[dict[str, Any]] | None = None


class MessagePage(BaseModel):
    items: list[Message]
    nextBeforeSeq: int | None


class Usage(BaseModel):
    promptTokens: int
    completionTokens: int
    totalTokens: int


class Execution(BaseModel):
    executionId: str
    parentSessionId: str
    childSessionId: str
    parentToolCallId: str | None
    agentType: str
    invocationType: Literal["DELEGATE", "FOLLOWUP"]
    round: int
    task: str
    status: Literal["RUNNING", "RECOVERING", "COMPLETED", "FAILED", "CANCELLED"]
    deliveryStatus: Literal["PENDING", "DELIVERED", "SUPPRESSED"]
    startedAt: str
    endedAt: str | None
    deadlineAt: str
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
