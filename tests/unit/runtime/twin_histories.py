"""Generated histories (hypothesis): sessions, side tasks and subagents taking random valid
steps — messages, queued input, tool calls, discards, phases, compactions, settings, waits
and their answers, delegations and their executions' lifecycle, forks, promotions, the
management events — and one-statement decisions (`append_if_current`, `close_quietly`)
whose outcome the model predicts, so the streams' versions stay known."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from hypothesis import strategies as st
from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_contracts import wait_events as we
from muster_runtime.uow.unit_of_work import RUNNING_PHASES, AbstractUnitOfWork

from tests.unit.runtime.twin_streams import History

PHASES = ("RUNNING", "RESUMING", "WAITING_APPROVAL", "WAITING_INPUT", "COMPLETED", "FAILED",
          "CANCELLING", "CANCELLED")  # fmt: skip
TOOLS = ("read_file", "write_file", "delegate", "run_command")
# What a generated history's next step is, weighted by repetition.
STEPS = ["assistant", "assistant", "tool", "tool", "user", "user", "phase", "wait", "wait", "wait",
         "misc", "misc", "misc", "delegate", "run", "run", "side", "operation", "operation", "session"]  # fmt: skip


@dataclass
class Session:
    id: UUID
    kind: str
    root: UUID
    seq: int = 0
    phase: str | None = None
    gated: bool = False  # not `auto` or not CLOUD: an ungated append answers "gated"
    messages: list[tuple[UUID, int]] = field(default_factory=list)
    queued: list[UUID] = field(default_factory=list)
    calls: list[tuple[UUID, str]] = field(default_factory=list)  # (ASSISTANT message, call id)
    started: set[str] = field(default_factory=set)  # a call starts once (`tool_runs_pkey`)
    delegated: set[str] = field(default_factory=set)  # one execution per call (invariant 1)
    waits: list[tuple[type[Any], UUID]] = field(default_factory=list)


@dataclass
class World:
    draw: Any
    history: History = field(default_factory=History)
    sessions: list[Session] = field(default_factory=list)
    runs: list[tuple[UUID, Session, Session]] = field(default_factory=list)  # (execution, parent, child)

    def pick(self, items: list[Any]) -> Any:
        return self.draw(st.sampled_from(items))

    def create(self, kind: str = "NORMAL", parent: Session | None = None, **extra: Any) -> Session:
        root = parent.root if parent is not None else uuid4()
        session = Session(root if parent is None else uuid4(), kind, root)
        gated = self.draw(st.booleans()) and kind != "SUBAGENT"
        created = ev.SessionCreated(
            session_id=session.id, user_id="u", session_type=kind, root_session_id=root,
            parent_session_id=parent.id if parent else None,
            permission_level="ask" if gated else "auto", **extra)  # fmt: skip
        session.gated = gated
        self.sessions.append(session)
        self.history.append((session.id, [created]))
        return session

    def record(self, s: Session, role: str, **fields: Any) -> ev.MessageRecorded:
        s.seq += 1
        message = ev.MessageRecorded(message_id=fields.pop("message_id", uuid4()), seq=s.seq, role=role, **fields)
        s.messages.append((message.message_id, s.seq))
        return message


def _assistant(w: World, s: Session) -> list[ev.DomainEvent]:
    names = w.draw(st.lists(st.sampled_from(TOOLS), max_size=2))
    specs = [ev.ToolCallSpec(id=f"c{s.seq}-{i}", name=n, arguments='{"path": "a"}') for i, n in enumerate(names)]
    usage = w.draw(st.none() | st.builds(ev.TokenUsage, prompt_tokens=st.integers(0, 9)))
    message = w.record(s, "ASSISTANT", content=w.draw(st.text(max_size=5)), tool_calls=specs or None, usage=usage)
    s.calls += [(message.message_id, c.id) for c in specs]
    return [message]


def _tool(w: World, s: Session) -> list[ev.DomainEvent]:
    message_id, call = w.pick(s.calls)
    started = ev.ToolCallStarted(message_id=message_id, tool_call_id=call, name="write_file")
    shape = "result" if call in s.started else w.pick(["started", "both", "result"])
    if shape != "result":
        s.started.add(call)
    if shape == "started":
        return [started]
    result = w.record(s, "TOOL", content="{}", tool_call_id=call)
    return [started, result] if shape == "both" else [result]


def _user(w: World, s: Session) -> list[ev.DomainEvent]:
    consumed = w.pick(s.queued) if s.queued and w.draw(st.booleans()) else uuid4()
    if consumed in s.queued:
        s.queued.remove(consumed)
    events: list[ev.DomainEvent] = [w.record(s, "USER", content="hi", message_id=consumed)]
    if w.draw(st.booleans()):
        s.phase = "RUNNING"
        events.append(ev.SessionPhaseChanged(phase="RUNNING"))
    return events


def _phase(w: World, s: Session) -> list[ev.DomainEvent]:
    s.phase = w.pick(list(PHASES))
    return [ev.SessionPhaseChanged(phase=s.phase, error="boom" if s.phase == "FAILED" else None)]


def _wait(w: World, s: Session) -> list[ev.DomainEvent]:
    if s.waits and w.draw(st.booleans()):
        kind, wid = w.pick(s.waits)
        if kind is we.ApprovalRequested:
            return [we.ApprovalResolved(approval_id=wid, decision=w.pick(["approve", "deny", "dropped"]),
                                        reason=w.draw(st.none() | st.just("because")))]  # fmt: skip
        if kind is we.QuestionAsked:
            return [we.QuestionResolved(question_id=wid, outcome=w.pick(["answered", "dropped"]))]
        return [we.ToolRequestResolved(request_id=wid, outcome=w.pick(["answered", "dropped"]))]
    call = w.pick([c for _, c in s.calls] or ["c-none"])
    wid, kind = uuid4(), w.pick([we.ApprovalRequested, we.QuestionAsked, we.ToolRequested])
    s.waits.append((kind, wid))
    if kind is we.ApprovalRequested:
        return [kind(approval_id=wid, tool_call_id=call, tool="write_file", arguments='{"path": "a"}')]
    if kind is we.QuestionAsked:
        return [kind(question_id=wid, tool_call_id=call, question="q?", options=["a", "b"])]
    return [kind(request_id=wid, tool_call_id=call, name="read_file", arguments="{}")]


def _misc(w: World, s: Session) -> list[ev.DomainEvent]:
    known = [m for m, _ in s.messages]
    discarded = w.draw(st.lists(st.sampled_from(known or [uuid4()]), max_size=2, unique=True))
    choices: list[list[ev.DomainEvent]] = [
        [ev.UserMessageQueued(message_id=uuid4(), client_message_id=w.pick([None, str(uuid4())]), content="l")],
        [ev.MessagesDiscarded(message_ids=discarded, reason="tail")],
        [se.SessionSettingsChanged(title=w.pick([None, "renamed"]), permission_level=w.pick([None, "auto", "ask"]))],
        [w.pick([se.SessionArchived(), se.SessionUnarchived(), se.SessionDeleted(), se.SessionRead()])],
        [se.SessionTreeStatusChanged(tree_running=w.draw(st.booleans()), tree_unread=True, pending_questions=2)],
    ]
    if s.queued:
        choices.append([ev.QueuedMessagesDropped(message_ids=[w.pick(s.queued)], reason="cancelled")])
    if s.messages:
        message_id, seq = w.pick(s.messages)
        choices.append([ev.CompactionRecorded(boundary_message_id=message_id, boundary_seq=seq, summary="s",
                                              messages_compacted=seq, tokens_before=9, tokens_after=1,
                                              at_seq=s.seq)])  # fmt: skip
    events = w.pick(choices)
    for event in events:
        if isinstance(event, ev.UserMessageQueued):
            s.queued.append(event.message_id)
        if isinstance(event, ev.QueuedMessagesDropped):
            s.queued = [q for q in s.queued if q not in event.message_ids]
        if isinstance(event, se.SessionSettingsChanged) and event.permission_level is not None:
            s.gated = event.permission_level == "ask"
    return events


def _delegate(w: World, parent: Session) -> None:
    followups = [r for r in w.runs if r[1] is parent]
    follow = followups and w.draw(st.booleans())
    child = w.pick(followups)[2] if follow else w.create("SUBAGENT", parent, agent_type="coder")
    free = [c for c in parent.calls if c[1] not in parent.delegated]
    message_id, call = w.pick(free) if free else (uuid4(), f"d-{uuid4()}")
    parent.delegated.add(call)
    execution, task = uuid4(), w.record(child, "USER", content="task")
    child.phase = "RUNNING"
    started = ev.ExecutionStarted(
        execution_id=execution, parent_session_id=parent.id, parent_tool_call_id=call,
        parent_message_id=message_id, child_session_id=child.id, user_id="u", agent_type="coder",
        invocation_type="FOLLOWUP" if follow else "DELEGATE", task="task",
        round=1 + sum(r[2] is child for r in w.runs), start_message_id=task.message_id,
        deadline_at=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(microseconds=w.draw(st.integers(0, 9))))  # fmt: skip
    w.runs.append((execution, parent, child))
    w.history.append((execution, [started]), (child.id, [task, ev.SessionPhaseChanged(phase="RUNNING")]),
                     (parent.id, [ev.SubagentSessionCreated(child_session_id=child.id, tool_call_id=call,
                                                            agent_type="coder", execution_id=execution)]))  # fmt: skip


def _run_step(w: World) -> None:
    execution, _, child = w.pick(w.runs)
    event = w.pick([
        ev.ExecutionRecovering(reason=w.pick(["lease_expired", "unclaimed"])),
        ev.ExecutionFinished(status=w.pick(["COMPLETED", "FAILED", "CANCELLED"]), result="r", error=None,
                             final_message_id=w.pick([None, *[m for m, _ in child.messages]]), rounds=2,
                             tool_calls=1, usage=ev.TokenUsage(prompt_tokens=3, completion_tokens=1)),
        ev.ExecutionDelivered(delivery_status=w.pick(["DELIVERED", "SUPPRESSED"]),
                              tool_message_id=w.pick([None, uuid4()])),
    ])  # fmt: skip
    w.history.append((execution, [event]))


def _side_task(w: World, source: Session) -> None:
    mode = w.pick(["none", "summary", "fork"])
    background = [ev.BackgroundMessage(role="USER", content="gist")] if mode == "summary" else None
    side = w.create("SIDE_TASK", source, context_mode=mode, background=background)
    w.history.append((source.id, [se.SideSessionCreated(session_id=side.id, root_session_id=side.root,
                                                        context_mode=mode)]))  # fmt: skip
    if mode == "fork":
        up_to = w.draw(st.integers(0, source.seq))
        skipped = w.draw(st.lists(st.sampled_from([m for m, _ in source.messages] or [uuid4()]), max_size=1))
        w.history.append((side.id, [se.SessionForked(source_session_id=source.id, up_to_seq=up_to,
                                                     skipped_message_ids=skipped)]))  # fmt: skip
        side.seq = max(side.seq, up_to)
    if w.draw(st.booleans()):
        w.history.append((side.id, [se.SessionPromoted(previous_parent_session_id=source.id,
                                                       previous_root_session_id=source.root)]))  # fmt: skip
        side.root = side.id


def _operation(w: World, s: Session) -> None:
    """`append_if_current` or `close_quietly` with a count that may be stale."""
    count = w.pick([s.seq, s.seq + 1])
    ungated = w.draw(st.booleans())
    quiet = w.draw(st.booleans())
    if s.phase not in RUNNING_PHASES:
        outcome = "gone"
    elif ungated and s.gated and not quiet:
        outcome = "gated"
    elif count != s.seq:
        outcome = "moved"
    else:
        outcome = "queued" if quiet and s.queued else ("closed" if quiet else "current")
    message = ev.MessageRecorded(message_id=uuid4(), seq=s.seq + 1, role="ASSISTANT", content="a")
    events: list[ev.DomainEvent] = [message, ev.SessionPhaseChanged(phase="COMPLETED")] if quiet else [message]
    if outcome in ("current", "closed"):
        w.record(s, "ASSISTANT", message_id=message.message_id, content="a")
        s.phase = "COMPLETED" if quiet else s.phase

    async def decide(uow: AbstractUnitOfWork) -> str:
        if quiet:
            return await uow.close_quietly(s.id, count, events, run=None)
        return (await uow.append_if_current(s.id, count, events, ungated=ungated)).outcome

    w.history.decide(decide, *([(s.id, len(events))] if outcome in ("current", "closed") else []))


@st.composite
def histories(draw: Any) -> History:
    w = World(draw)
    w.create()
    batch: tuple[Session, list[ev.DomainEvent]] | None = None  # events of steps appended together
    for _ in range(draw(st.integers(6, 30))):
        s: Session = w.pick(w.sessions)
        step = w.pick(STEPS)
        plain = step in ("assistant", "tool", "user", "phase", "wait", "misc")
        if batch is not None and not (plain and batch[0] is s and draw(st.booleans())):
            w.history.append((batch[0].id, batch[1]))  # several steps' events in one append
            batch = None
        if step == "session":
            w.create()
        elif step == "delegate" and s.kind != "SUBAGENT":
            _delegate(w, s)
        elif step == "run" and w.runs:
            _run_step(w)
        elif step == "side" and s.kind != "SUBAGENT":
            _side_task(w, s)
        elif step == "operation":
            _operation(w, s)
        else:
            make = {"assistant": _assistant, "user": _user, "phase": _phase, "wait": _wait, "misc": _misc}
            make_tool = _tool if s.calls else _assistant
            events = make_tool(w, s) if step == "tool" else make.get(step, _misc)(w, s)
            batch = (s, [*batch[1], *events]) if batch is not None else (s, events)
    if batch is not None:
        w.history.append((batch[0].id, batch[1]))
    return w.history
