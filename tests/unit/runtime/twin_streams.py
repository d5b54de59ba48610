"""Event streams written once and played on both units of work: a history is a list of
decisions (one transaction each) whose events are built before either plays them, so the
in-memory twin and PostgreSQL receive the very same events, ids and payloads."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_contracts import wait_events as we
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

Decision = Callable[[AbstractUnitOfWork], Awaitable[Any]]


@dataclass
class History:
    """Decisions in order; `versions` follows each stream as the decisions will leave it,
    so every append names the version it expects, as a real decision does."""

    decisions: list[Decision] = field(default_factory=list)
    versions: dict[UUID, int] = field(default_factory=dict)
    sessions: list[UUID] = field(default_factory=list)
    executions: list[UUID] = field(default_factory=list)

    def append(self, *appends: tuple[UUID, Sequence[ev.DomainEvent]]) -> None:
        """One decision appending to one or more streams."""
        planned = []
        for stream, events in appends:
            planned.append((stream, list(events), self.versions.get(stream, 0)))
            self.versions[stream] = self.versions.get(stream, 0) + len(events)
            for event in events:
                if isinstance(event, ev.SessionCreated):
                    self.sessions.append(event.session_id)
                elif isinstance(event, ev.ExecutionStarted):
                    self.executions.append(event.execution_id)

        async def decide(uow: AbstractUnitOfWork) -> None:
            for stream, events, expected in planned:
                await uow.append(str(stream), events, expected_version=expected)

        self.decisions.append(decide)

    def decide(self, decision: Decision, *writes: tuple[UUID, int]) -> None:
        """A decision through another operation; `writes` says how many events it appends
        to which stream when it succeeds (the caller's expectation of the outcome)."""
        for stream, count in writes:
            self.versions[stream] = self.versions.get(stream, 0) + count
        self.decisions.append(decision)


async def play(uows: UnitOfWorkFactory, history: History) -> list[Any]:
    """Each decision in its own unit of work; what each returned (the outcomes)."""
    outcomes = []
    for decision in history.decisions:
        async with uows() as uow:
            outcomes.append(await decision(uow))
    return outcomes


def calls(*names: str) -> list[ev.ToolCallSpec]:
    return [
        ev.ToolCallSpec(id=f"call-{n}", name=n, arguments=json.dumps({"path": f"{n}.txt", "n": [1, {"x": None}]}))
        for n in names
    ]


def delegated_turn(h: History) -> dict[str, UUID]:
    """A parent delegating to a child that writes a file, with a queued message dropped, a
    discarded tail, waits, compactions and a delivered result: every read model gets rows,
    from appends of one and of many events (after `test_rebuild_db.delegated_turn`)."""
    parent, child, execution = uuid4(), uuid4(), uuid4()
    first, dropped, answer, stale = uuid4(), uuid4(), uuid4(), uuid4()
    h.append((parent, [ev.SessionCreated(session_id=parent, user_id="alice", root_session_id=parent,
                                         title="t", model_id="scripted")]))  # fmt: skip
    h.append((parent, [ev.UserMessageQueued(message_id=first, client_message_id="c1", content="go"),
                       ev.UserMessageQueued(message_id=dropped, client_message_id="c2", content="later")]))  # fmt: skip
    h.append((parent, [ev.MessageRecorded(message_id=first, seq=1, role="USER", content="go"),
                       ev.SessionPhaseChanged(phase="RUNNING")]))  # fmt: skip
    h.append((parent, [ev.MessageRecorded(message_id=stale, seq=2, role="ASSISTANT", content="half")]))
    h.append((parent, [ev.MessagesDiscarded(message_ids=[stale], reason="incomplete tail")]))
    h.append((parent, [ev.MessageRecorded(
        message_id=answer, seq=3, role="ASSISTANT", content="", tool_calls=calls("delegate", "write_file"),
        usage=ev.TokenUsage(prompt_tokens=12, completion_tokens=3))]))  # fmt: skip
    h.append((parent, [ev.ToolCallStarted(message_id=answer, tool_call_id="call-write_file", name="write_file")]))
    h.append((parent, [
        ev.MessageRecorded(message_id=uuid4(), seq=4, role="TOOL", content='{"ok": true}',
                           tool_call_id="call-write_file"),
        ev.FileChanged(change_id=uuid4(), message_id=answer, message_seq=3, tool_call_id="call-write_file",
                       path="write_file.txt", change_type="CREATED", lines_added=1, diff_sha256="d" * 64,
                       after_sha256="a" * 64, after_size=6),
    ]))  # fmt: skip
    start = uuid4()
    # The delegation: execution, child and notice in one decision, as the Delegator makes it.
    h.append(
        (execution, [ev.ExecutionStarted(
            execution_id=execution, parent_session_id=parent, parent_tool_call_id="call-delegate",
            parent_message_id=answer, child_session_id=child, user_id="alice", agent_type="coder",
            invocation_type="DELEGATE", task="write c.txt", round=1, start_message_id=start,
            deadline_at=datetime.now(UTC) + timedelta(hours=1))]),
        (child, [ev.SessionCreated(session_id=child, user_id="alice", session_type="SUBAGENT",
                                   parent_session_id=parent, root_session_id=parent, agent_type="coder"),
                 ev.MessageRecorded(message_id=start, seq=1, role="USER", content="write c.txt"),
                 ev.SessionPhaseChanged(phase="RUNNING")]),
        (parent, [ev.SubagentSessionCreated(child_session_id=child, tool_call_id="call-delegate",
                                            agent_type="coder", execution_id=execution)]),
    )  # fmt: skip
    child_answer, child_final = uuid4(), uuid4()
    h.append((child, [ev.MessageRecorded(message_id=child_answer, seq=2, role="ASSISTANT", content="",
                                         tool_calls=calls("write_file"))]))  # fmt: skip
    approval, question = uuid4(), uuid4()
    h.append((child, [we.ApprovalRequested(approval_id=approval, tool_call_id="call-write_file",
                                           tool="write_file", arguments=json.dumps({"path": "c.txt"})),
                      ev.SessionPhaseChanged(phase="WAITING_APPROVAL")]))  # fmt: skip
    h.append((child, [we.ApprovalResolved(approval_id=approval, decision="approve", reason="fine"),
                      ev.SessionPhaseChanged(phase="RUNNING")]))  # fmt: skip
    h.append((child, [we.QuestionAsked(question_id=question, tool_call_id="q", question="sure?"),
                      we.QuestionResolved(question_id=question, outcome="dropped")]))  # fmt: skip
    # Every other answer a wait can get, each in its own append (pending until then).
    denied, dropped_approval, asked, local, dropped_local = uuid4(), uuid4(), uuid4(), uuid4(), uuid4()
    h.append((child, [
        we.ApprovalRequested(approval_id=denied, tool_call_id="d", tool="run_command", arguments="{}"),
        we.ApprovalRequested(approval_id=dropped_approval, tool_call_id="d2", tool="run_command", arguments="{}"),
        we.QuestionAsked(question_id=asked, tool_call_id="q2", question="which?", options=["a", "b"]),
        we.ToolRequested(request_id=local, tool_call_id="t", name="read_file", arguments='{"path": "a"}'),
        we.ToolRequested(request_id=dropped_local, tool_call_id="t2", name="list_files", arguments="{}"),
    ]))  # fmt: skip
    h.append((child, [we.ApprovalResolved(approval_id=denied, decision="deny", reason="no")]))
    h.append((child, [we.ApprovalResolved(approval_id=dropped_approval, decision="dropped"),
                      we.QuestionResolved(question_id=asked, outcome="answered"),
                      we.ToolRequestResolved(request_id=local, outcome="answered"),
                      we.ToolRequestResolved(request_id=dropped_local, outcome="dropped")]))  # fmt: skip
    h.append((child, [
        ev.ToolCallStarted(message_id=child_answer, tool_call_id="call-write_file", name="write_file"),
        ev.MessageRecorded(message_id=uuid4(), seq=3, role="TOOL", content="{}", tool_call_id="call-write_file"),
        ev.FileChanged(change_id=uuid4(), message_id=child_answer, message_seq=2, tool_call_id="call-write_file",
                       path="c.txt", change_type="CREATED", lines_added=2, session_type="SUBAGENT",
                       agent_type="coder", note=None),
    ]))  # fmt: skip
    h.append((child, [ev.MessageRecorded(message_id=child_final, seq=4, role="ASSISTANT", content="wrote c.txt",
                                         usage=ev.TokenUsage(prompt_tokens=5, completion_tokens=2)),
                      ev.SessionPhaseChanged(phase="COMPLETED")]))  # fmt: skip
    h.append((execution, [ev.ExecutionRecovering(reason="lease_expired")]))
    h.append((execution, [ev.ExecutionFinished(status="COMPLETED", result="wrote c.txt",
                                               final_message_id=child_final, end_message_id=child_final,
                                               rounds=2, tool_calls=1, usage=ev.TokenUsage(prompt_tokens=5))]),
             (parent, [ev.ExecutionStatusChanged(execution_id=execution, status="COMPLETED",
                                                 delivery_status="PENDING")]))  # fmt: skip
    tool_result = uuid4()
    h.append((parent, [ev.MessageRecorded(message_id=tool_result, seq=5, role="TOOL", content="{}",
                                          tool_call_id="call-delegate")]),
             (execution, [ev.ExecutionDelivered(delivery_status="DELIVERED", tool_message_id=tool_result)]))  # fmt: skip
    h.append((parent, [ev.QueuedMessagesDropped(message_ids=[dropped], reason="cancelled"),
                       ev.MessageRecorded(message_id=uuid4(), seq=6, role="ASSISTANT", content="done"),
                       ev.SessionPhaseChanged(phase="FAILED", error="boom")]))  # fmt: skip
    for boundary, seq, summary in ((child_answer, 2, "summary of 2"), (child_final, 4, "summary of 4")):
        h.append((child, [ev.CompactionRecorded(
            boundary_message_id=boundary, boundary_seq=seq, summary=summary, messages_compacted=2,
            tokens_before=90, tokens_after=30, at_seq=4)]))  # fmt: skip
    return {"parent": parent, "child": child, "execution": execution, "answer": answer, "stale": stale}


def side_tasks(h: History, source: UUID, skipped: Sequence[UUID] = (), user: str = "alice") -> dict[str, UUID]:
    """A fork of `source` (its history copied), a side task of that side task, then the
    fork promoted (its descendant follows), archived, read, deleted; settings changed and
    the tree's signals recorded on the root."""
    fork, nested = uuid4(), uuid4()
    h.append(
        (fork, [ev.SessionCreated(session_id=fork, user_id=user, session_type="SIDE_TASK",
                                  parent_session_id=source, root_session_id=source, context_mode="fork",
                                  permission_level="ask", execution_mode="LOCAL"),
                se.SessionForked(source_session_id=source, up_to_seq=4, skipped_message_ids=list(skipped))]),
        (source, [se.SideSessionCreated(session_id=fork, root_session_id=source, context_mode="fork")]),
    )  # fmt: skip
    h.append(
        (nested, [ev.SessionCreated(session_id=nested, user_id=user, session_type="SIDE_TASK",
                                    parent_session_id=fork, root_session_id=source, context_mode="summary",
                                    background=[ev.BackgroundMessage(role="USER", content="the gist")],
                                    workspace_id=source)]),
        (fork, [se.SideSessionCreated(session_id=nested, root_session_id=source, context_mode="summary")]),
    )  # fmt: skip
    h.append((fork, [ev.MessageRecorded(message_id=uuid4(), seq=5, role="USER", content="and then?"),
                     ev.SessionPhaseChanged(phase="RUNNING"), ev.SessionPhaseChanged(phase="COMPLETED")]))  # fmt: skip
    h.append((fork, [se.SessionSettingsChanged(title="renamed", permission_level="auto")]))
    h.append((source, [se.SessionTreeStatusChanged(tree_running=True, tree_unread=True, pending_approvals=1)]))
    h.append((fork, [se.SessionPromoted(previous_parent_session_id=source, previous_root_session_id=source)]))
    h.append((nested, [se.SessionArchived()]))
    h.append((fork, [se.SessionRead()]))
    h.append((nested, [se.SessionUnarchived(), se.SessionDeleted()]))
    return {"fork": fork, "nested": nested}
