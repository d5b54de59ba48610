"""Ending a wait (see `waits`): the user's approval or denial, the answer to a question,
a LOCAL client's tool result, or a cancel that drops what was pending.

Each answer is one transaction under the session's row lock: the wait's resolution, the
tool call's result where the answer is one, the session RUNNING again and the command that
resumes it (the harness's `ProcessSession`, or the worker's `RunExecution` for a child), so
an answer counts exactly once, whichever process dies when.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Literal
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_contracts.commands import ProcessSession, RunExecution
from muster_runtime.messaging import topics
from muster_runtime.uow.aggregates import Execution, Session, Wait
from muster_runtime.uow.phases import WAIT_PHASE
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_agent import session_store as store

log = logging.getLogger("muster.waits")

ErrorCode = Literal["not_found", "conflict"]
PHASE_OF = WAIT_PHASE  # the phase each kind of wait holds its session in


class AnswerRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message


Build = Callable[[Session, Wait], list[ev.DomainEvent]]  # (the waiting session, its wait) → events


async def answer_approval(
    uows: UnitOfWorkFactory,
    user_id: str,
    session_id: UUID,
    approval_id: UUID,
    decision: Literal["approve", "deny"],
    reason: str | None,
) -> dict[str, Any]:
    def build(session: Session, wait: Wait) -> list[ev.DomainEvent]:
        events: list[ev.DomainEvent] = [
            we.ApprovalResolved(approval_id=approval_id, decision=decision, reason=reason)
        ]
        if decision == "deny":
            why = f"denied by the user: {reason}" if reason else "denied by the user"
            events.append(_tool_message(session, wait, store.error_result(why)))
        return events

    await _resolve(uows, user_id, session_id, approval_id, "approval", build)
    return {"approvalId": str(approval_id), "decision": decision}


async def answer_question(
    uows: UnitOfWorkFactory, user_id: str, session_id: UUID, question_id: UUID, answer: str
) -> dict[str, Any]:
    def build(session: Session, wait: Wait) -> list[ev.DomainEvent]:
        result = json.dumps({"success": True, "answer": answer})
        return [
            we.QuestionResolved(question_id=question_id, outcome="answered"),
            _tool_message(session, wait, result),
        ]

    await _resolve(uows, user_id, session_id, question_id, "question", build)
    return {"questionId": str(question_id)}


async def answer_tool_request(
    uows: UnitOfWorkFactory, user_id: str, session_id: UUID, request_id: UUID, result: str
) -> dict[str, Any]:
    """The first result counts; a repeat (the client re-sent it after a reconnect) is
    acknowledged and ignored."""

    def build(session: Session, wait: Wait) -> list[ev.DomainEvent]:
        return [
            we.ToolRequestResolved(request_id=request_id, outcome="answered"),
            _tool_message(session, wait, result),
        ]

    try:
        await _resolve(uows, user_id, session_id, request_id, "tool", build)
    except AnswerRefused as refused:
        if refused.code == "conflict":
            return {"requestId": str(request_id), "duplicate": True}
        raise
    return {"requestId": str(request_id)}


async def dropped_waits(uow: AbstractUnitOfWork, session_id: UUID) -> list[ev.DomainEvent]:
    """The resolutions that drop every pending wait of a session whose turn ends (a
    cancel, a deadline): appended with that end, so nothing stays pending."""
    return drop_events([Wait.of(row) for row in await uow.pending_waits(session_id)])


def drop_events(pending: list[Wait]) -> list[ev.DomainEvent]:
    """The resolutions that drop the `pending` waits."""
    events: list[ev.DomainEvent] = []
    for wait in pending:
        if wait.kind == "approval":
            events.append(we.ApprovalResolved(approval_id=wait.wait_id, decision="dropped"))
        elif wait.kind == "question":
            events.append(we.QuestionResolved(question_id=wait.wait_id, outcome="dropped"))
        else:
            events.append(we.ToolRequestResolved(request_id=wait.wait_id, outcome="dropped"))
    return events


async def _resolve(
    uows: UnitOfWorkFactory, user_id: str, session_id: UUID, wait_id: UUID, kind: str, build: Build
) -> None:
    name = {"approval": "approval", "question": "question", "tool": "tool request"}[kind]
    async with uows() as uow:
        # `lock_session`, not `lock_owned_session`: an answer on a deleted session has
        # always met its dropped wait (`conflict`), and that answer is kept.
        row = await uow.lock_session(session_id)
        session = Session.of(row) if row is not None else None
        if session is None or session.user_id != user_id:
            raise AnswerRefused("not_found", f"session {session_id} not found")
        wait = await uow.lock_wait(wait_id)
        if wait is None or wait.session_id != session_id or wait.kind != kind:
            raise AnswerRefused("not_found", f"{name} {wait_id} not found in session {session_id}")
        if not wait.pending:
            raise AnswerRefused("conflict", f"{name} {wait_id} was already resolved ({wait.status})")
        if session.phase != PHASE_OF[kind]:
            raise AnswerRefused("conflict", f"session {session_id} no longer waits for this {name}")
        events = [*build(session, wait), ev.SessionPhaseChanged(phase="RUNNING")]
        await uow.append(str(session_id), events, expected_version=session.version)
        await _resume(uow, session)
    log.info("wait_resolved session=%s kind=%s wait=%s", session_id, kind, wait_id)


def _tool_message(session: Session, wait: Wait, content: str) -> ev.MessageRecorded:
    return store.tool_message(wait.tool_call_id, content)(session.message_count + 1)


async def _resume(uow: AbstractUnitOfWork, session: Session) -> None:
    """The runner of the session takes it up again: the harness, or for a subagent the
    worker of its open execution."""
    session_id = session.session_id
    if not session.is_subagent:
        command = ProcessSession(session_id=session_id, reason="answered")
        await uow.send(topics.COMMANDS, str(session_id), command)
        return
    row = await uow.open_execution_of(session_id)
    if row is not None:
        execution = Execution.of(row)
        run = RunExecution(
            execution_id=execution.execution_id,
            child_session_id=session_id,
            parent_session_id=execution.parent_session_id,
        )
        await uow.send(topics.DELEGATIONS, str(session_id), run)
