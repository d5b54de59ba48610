"""The model a generated history is drawn from (`twin_histories.py`): what each session
holds so far (its seq, phase, messages, queued input, tool calls and waits), and the steps
one session takes on its own stream — each returns the events it appends, all valid for
the session as it stands (one start per tool call, unique client ids, …)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from hypothesis import strategies as st
from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_contracts import wait_events as we

from tests.unit.runtime.twin_streams import History

PHASES = ("RUNNING", "RESUMING", "WAITING_APPROVAL", "WAITING_INPUT", "COMPLETED", "FAILED",
          "CANCELLING", "CANCELLED")  # fmt: skip
TOOLS = ("read_file", "write_file", "delegate", "run_command")
# What a generated history's next step is, weighted by repetition.
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


def assistant(w: World, s: Session) -> list[ev.DomainEvent]:
    names = w.draw(st.lists(st.sampled_from(TOOLS), max_size=2))
    specs = [ev.ToolCallSpec(id=f"c{s.seq}-{i}", name=n, arguments='{"path": "a"}') for i, n in enumerate(names)]
    usage = w.draw(st.none() | st.builds(ev.TokenUsage, prompt_tokens=st.integers(0, 9)))
    # PostgreSQL's jsonb holds no NUL character (`\u0000`) and UTF-8 no lone surrogate: an
    # event carrying either is refused (the gateway refuses both at its edge).
    content = w.draw(st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=5))
    message = w.record(s, "ASSISTANT", content=content, tool_calls=specs or None, usage=usage)
    s.calls += [(message.message_id, c.id) for c in specs]
    return [message]


def tool(w: World, s: Session) -> list[ev.DomainEvent]:
    message_id, call = w.pick(s.calls)
    started = ev.ToolCallStarted(message_id=message_id, tool_call_id=call, name="write_file")
    shape = "result" if call in s.started else w.pick(["started", "both", "result"])
    if shape != "result":
        s.started.add(call)
    if shape == "started":
        return [started]
    result = w.record(s, "TOOL", content="{}", tool_call_id=call)
    return [started, result] if shape == "both" else [result]


def user(w: World, s: Session) -> list[ev.DomainEvent]:
    consumed = w.pick(s.queued) if s.queued and w.draw(st.booleans()) else uuid4()
    if consumed in s.queued:
        s.queued.remove(consumed)
    events: list[ev.DomainEvent] = [w.record(s, "USER", content="hi", message_id=consumed)]
    if w.draw(st.booleans()):
        s.phase = "RUNNING"
        events.append(ev.SessionPhaseChanged(phase="RUNNING"))
    return events


def phase(w: World, s: Session) -> list[ev.DomainEvent]:
    s.phase = w.pick(list(PHASES))
    return [ev.SessionPhaseChanged(phase=s.phase, error="boom" if s.phase == "FAILED" else None)]


def wait(w: World, s: Session) -> list[ev.DomainEvent]:
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


def misc(w: World, s: Session) -> list[ev.DomainEvent]:
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
