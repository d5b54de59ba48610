"""Events of the waits (issue 11): a tool call that waits for a person's approval, a
question for the user, or a LOCAL client that runs the file tools. Each wait is requested
on the waiting session's stream and resolved there exactly once; registered in `events.py`.
"""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from muster_contracts.events import DomainEvent

ApprovalDecision = Literal["approve", "deny", "dropped"]


class ApprovalRequested(DomainEvent):
    """A gated tool call of an `ask` session waits (phase WAITING_APPROVAL) until the
    user approves or denies it; nothing of it has run."""

    type: Literal["ApprovalRequested"] = "ApprovalRequested"
    schema_version: int = 2  # v2: `arguments` is the model's text (v1: the parsed object)
    approval_id: UUID
    tool_call_id: str
    tool: str
    arguments: str


class ApprovalResolved(DomainEvent):
    """The user's answer (`approve`: the call runs; `deny`: it gets an error result with
    `reason`), or `dropped` when the turn was cancelled or failed while it waited."""

    type: Literal["ApprovalResolved"] = "ApprovalResolved"
    approval_id: UUID
    decision: ApprovalDecision
    reason: str | None = None


class QuestionAsked(DomainEvent):
    """`ask_user`: the session waits (phase WAITING_INPUT) for the user's answer, which
    becomes the tool call's result."""

    type: Literal["QuestionAsked"] = "QuestionAsked"
    question_id: UUID
    tool_call_id: str
    question: str
    options: list[str] | None = None


class QuestionResolved(DomainEvent):
    """`answered` (the answer is the TOOL message recorded with it) or `dropped`."""

    type: Literal["QuestionResolved"] = "QuestionResolved"
    question_id: UUID
    outcome: Literal["answered", "dropped"]


class ToolRequested(DomainEvent):
    """A file tool of a LOCAL session runs on the user's connected client: the session
    waits (phase WAITING_CLIENT, shown as RUNNING) for its `tool_result`."""

    type: Literal["ToolRequested"] = "ToolRequested"
    schema_version: int = 2  # v2: `arguments` is the model's text (v1: the parsed object)
    request_id: UUID
    tool_call_id: str
    name: str
    arguments: str


class ToolRequestResolved(DomainEvent):
    """`answered` (the client's result is the TOOL message recorded with it) or `dropped`."""

    type: Literal["ToolRequestResolved"] = "ToolRequestResolved"
    request_id: UUID
    outcome: Literal["answered", "dropped"]


WAIT_EVENTS = (
    ApprovalRequested,
    ApprovalResolved,
    QuestionAsked,
    QuestionResolved,
    ToolRequested,
    ToolRequestResolved,
)
