"""A history made of the one-statement decisions (ADR 0025) besides plain appends: records
that are current, moved, gone or gated; a child's quiet close that tells its parent, the
round's last child refused, a stale run refused; the claims of a running session, of a
session under its lock and of a run. Each decision returns its outcome in plain values,
so the two units of work are seen to decide alike, not only to project alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, RunClose

from tests.unit.runtime.twin_streams import History


def _session(h: History, kind: str = "NORMAL", parent: UUID | None = None) -> UUID:
    sid = uuid4()
    h.append((sid, [
        ev.SessionCreated(session_id=sid, user_id="u", session_type=kind, parent_session_id=parent,
                          root_session_id=parent or sid),
        ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content="go"),
        ev.SessionPhaseChanged(phase="RUNNING"),
    ]))  # fmt: skip
    return sid


def _answer(seq: int, content: str = "done") -> ev.MessageRecorded:
    return ev.MessageRecorded(message_id=uuid4(), seq=seq, role="ASSISTANT", content=content)


def _record(h: History, sid: UUID, count: int, events: list[ev.DomainEvent], written: bool, **how: Any) -> None:
    async def decide(uow: AbstractUnitOfWork) -> tuple[str, int | None, str | None, int]:
        recorded = await uow.append_if_current(sid, count, events, **how)
        return recorded.outcome, recorded.base_version, recorded.phase, len(recorded.stored)

    h.decide(decide, *([(sid, len(events))] if written else []))


def _close(h: History, sid: UUID, count: int, run: RunClose | None, written: bool) -> None:
    events: list[ev.DomainEvent] = [_answer(count + 1), ev.SessionPhaseChanged(phase="COMPLETED")]

    async def decide(uow: AbstractUnitOfWork) -> str:
        return await uow.close_quietly(sid, count, events, run=run)

    writes = [(sid, 2)]
    if run is not None:
        writes += [(run.execution_id, len(run.finished)), (run.parent_session_id, len(run.notice))]
    h.decide(decide, *(writes if written else []))


def _run_close(h: History, execution: UUID, parent: UUID) -> RunClose:
    return RunClose(
        execution_id=execution, execution_version=h.versions[execution], parent_session_id=parent,
        finished=[ev.ExecutionFinished(status="COMPLETED", result="done", rounds=1)],
        notice=[ev.ExecutionStatusChanged(execution_id=execution, status="COMPLETED", delivery_status="PENDING")],
        finished_metadata={"barrier": "checked"},
    )  # fmt: skip


def one_statement_decisions(h: History) -> None:
    parent = _session(h)
    gated = _session(h)
    h.append((gated, [se.SessionSettingsChanged(permission_level="ask")]))
    _record(h, parent, 1, [_answer(2, "thinking")], True, blobs={"ab": "content"})
    _record(h, parent, 1, [_answer(2)], False)  # moved: the count is stale
    _record(h, gated, 1, [_answer(2)], False, ungated=True)  # gated
    _record(h, gated, 1, [_answer(2)], True)  # the gate is the caller's choice
    children, runs = [], []
    for n in range(2):
        child, execution = _session(h, "SUBAGENT", parent), uuid4()
        h.append((execution, [ev.ExecutionStarted(
            execution_id=execution, parent_session_id=parent, parent_tool_call_id=f"c{n}",
            parent_message_id=uuid4(), child_session_id=child, user_id="u", agent_type="coder",
            invocation_type="DELEGATE", task="t", round=1, start_message_id=uuid4(),
            deadline_at=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=n))]))  # fmt: skip
        children.append(child)
        runs.append(execution)
    _claims(h, children[0], runs[0], parent)
    stale = RunClose(runs[0], 7, parent, [ev.ExecutionFinished(status="FAILED")], [])
    _close(h, children[0], 1, stale, False)  # "changed": not the run's claimed version
    _close(h, children[0], 1, _run_close(h, runs[0], parent), True)  # closed, the parent told
    _close(h, children[1], 1, _run_close(h, runs[1], parent), False)  # "last": decided under locks
    h.append((parent, [ev.UserMessageQueued(message_id=uuid4(), content="next")]))
    _close(h, parent, 2, None, False)  # "queued"
    _close(h, children[0], 1, None, False)  # "gone": it ended
    _record(h, children[0], 3, [_answer(4)], False)  # "gone" too


def _claims(h: History, child: UUID, execution: UUID, parent: UUID) -> None:
    async def decide(uow: AbstractUnitOfWork) -> list[Any]:
        run = await uow.claim_execution("worker", f"run-{execution}", execution, "w1", 60)
        locked = await uow.claim_session("harness", f"start-{parent}", parent, "h1", 60)
        again = await uow.claim_session("harness", f"start-{parent}", parent, "h2", 60)
        subagent = await uow.claim_session("harness", f"resume-{child}", child, "h1", 60)
        state = run.child_state
        return [
            (run.first, run.leased, run.child_phase, None if state is None else [m["seq"] for m in state.messages]),
            (locked.first, locked.leased, None if locked.row is None else locked.row["version"]),
            (again.first, again.leased, again.row),
            (subagent.first, subagent.leased, None if subagent.row is None else subagent.row["session_type"]),
        ]

    h.decide(decide)
