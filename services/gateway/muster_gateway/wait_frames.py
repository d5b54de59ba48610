"""Server → client frames of the waits (issue 11): approvals, questions and the status of
a LOCAL client's tool requests, on the waiting session's stream."""

from __future__ import annotations

from typing import Any

from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_contracts.tool_arguments import shown_arguments


def render(event: ev.DomainEvent) -> tuple[str, dict[str, Any]] | None:
    match event:
        case we.ApprovalRequested():
            return "approval_requested", {
                "approvalId": str(event.approval_id),
                "toolCallId": event.tool_call_id,
                "tool": event.tool,
                "arguments": shown_arguments(event.arguments),
            }
        case we.ApprovalResolved():
            resolved: dict[str, Any] = {"approvalId": str(event.approval_id), "decision": event.decision}
            if event.reason is not None:
                resolved["reason"] = event.reason
            return "approval_resolved", resolved
        case we.QuestionAsked():
            return "question_asked", {
                "questionId": str(event.question_id),
                "toolCallId": event.tool_call_id,
                "question": event.question,
                "options": event.options,
            }
        case we.QuestionResolved():
            return "question_resolved", {"questionId": str(event.question_id), "outcome": event.outcome}
        case we.ToolRequested():
            # The request itself goes to the user's LOCAL clients (`tool_request`); the
            # session's subscribers learn that the call runs on the client.
            return "tool_request_sent", {
                "requestId": str(event.request_id),
                "toolCallId": event.tool_call_id,
                "name": event.name,
            }
        case we.ToolRequestResolved():
            return "tool_request_resolved", {"requestId": str(event.request_id), "outcome": event.outcome}
    return None
