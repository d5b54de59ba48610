"""REST routes of the waits (issue 11): a session's approvals and questions, newest last."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from muster_contracts.tool_arguments import arguments_text, shown_arguments
from pydantic import BaseModel

from muster_gateway.frames import iso
from muster_gateway.rest import _ERRORS, GW, User

router = APIRouter()


class Approval(BaseModel):
    approvalId: str
    sessionId: str
    toolCallId: str
    tool: str
    arguments: dict[str, Any]
    status: Literal["pending", "approved", "denied", "dropped"]
    reason: str | None
    createdAt: str
    resolvedAt: str | None


class ApprovalList(BaseModel):
    items: list[Approval]


class Question(BaseModel):
    questionId: str
    sessionId: str
    toolCallId: str
    question: str
    options: list[str] | None
    status: Literal["pending", "answered", "dropped"]
    createdAt: str
    resolvedAt: str | None


class QuestionList(BaseModel):
    items: list[Question]


async def _waits(gw: GW, user: str, session_id: str, kind: str, status: str | None) -> list[Any]:
    return await gw.reads.waits(user, session_id, kind, status)


def _common(row: Any) -> dict[str, Any]:
    return {
        "sessionId": str(row["session_id"]),
        "toolCallId": row["tool_call_id"],
        "status": row["status"],
        "createdAt": iso(row["created_at"]),
        "resolvedAt": iso(row["resolved_at"]) if row["resolved_at"] is not None else None,
    }


@router.get("/v1/sessions/{session_id}/approvals", response_model=ApprovalList, responses=_ERRORS)
async def approvals(
    gw: GW,
    user: User,
    session_id: str,
    status: Literal["pending", "approved", "denied", "dropped"] | None = None,
) -> dict[str, Any]:
    """The session's approvals (`status=pending`: those waiting for an answer)."""
    rows = await _waits(gw, user, session_id, "approval", status)
    items = [
        {
            **_common(r),
            "approvalId": str(r["wait_id"]),
            "tool": r["detail"]["tool"],
            "arguments": shown_arguments(arguments_text(r["detail"]["arguments"])),
            "reason": r["reason"],
        }
        for r in rows
    ]
    return {"items": items}


@router.get("/v1/sessions/{session_id}/questions", response_model=QuestionList, responses=_ERRORS)
async def questions(
    gw: GW,
    user: User,
    session_id: str,
    status: Literal["pending", "answered", "dropped"] | None = None,
) -> dict[str, Any]:
    """The session's `ask_user` questions (`status=pending`: those waiting for an answer)."""
    rows = await _waits(gw, user, session_id, "question", status)
    items = [
        {
            **_common(r),
            "questionId": str(r["wait_id"]),
            "question": r["detail"]["question"],
            "options": r["detail"].get("options"),
        }
        for r in rows
    ]
    return {"items": items}
