"""The in-memory `session_waits` rows (migration 0012's `muster_project_waits`, event by
event)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts import wait_events as we

Row = dict[str, Any]
_KINDS: dict[type[ev.DomainEvent], str] = {
    we.ApprovalRequested: "approval",
    we.QuestionAsked: "question",
    we.ToolRequested: "tool",
}


def wait_id(event: ev.DomainEvent) -> UUID | None:
    """The id of the wait an event requests or resolves (None: not a wait's event)."""
    for name in ("approval_id", "question_id", "request_id"):
        value = getattr(event, name, None)
        if isinstance(value, UUID):
            return value
    return None


def project_wait(
    waits: dict[UUID, Row],
    sessions: dict[UUID, Row],
    session_id: UUID,
    event: ev.DomainEvent,
    position: int,
    at: datetime,
) -> None:
    key = wait_id(event)
    if key is None:
        return
    kind = _KINDS.get(type(event))
    if kind is not None:
        owner = sessions.get(session_id)
        if owner is None:  # the projector joins the session for its user: no session, no wait
            return
        waits.setdefault(
            key,
            {
                "wait_id": key, "kind": kind, "session_id": session_id,
                "user_id": owner["user_id"], "tool_call_id": _tool_call_id(event),
                "detail": event.payload(), "status": "pending", "reason": None,
                "position": position, "created_at": at, "resolved_at": None,
            },
        )  # fmt: skip
        return
    row = waits.get(key)
    if row is None or row["position"] >= position:
        return
    row["status"] = _status(event)
    row["reason"] = getattr(event, "reason", None)
    row["resolved_at"] = at


def _tool_call_id(event: ev.DomainEvent) -> str:
    assert isinstance(event, we.ApprovalRequested | we.QuestionAsked | we.ToolRequested)
    return event.tool_call_id


def _status(event: ev.DomainEvent) -> str:
    if isinstance(event, we.ApprovalResolved):
        return {"approve": "approved", "deny": "denied"}.get(event.decision, "dropped")
    outcome: str = getattr(event, "outcome", "answered")
    return "dropped" if outcome == "dropped" else "answered"

