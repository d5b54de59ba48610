"""Generated histories (hypothesis): sessions, side tasks and subagents taking random valid
steps — messages, queued input, tool calls, discards, phases, compactions, settings, waits
and their answers, delegations and their executions' lifecycle, forks, promotions, the
management events — and one-statement decisions (`append_if_current`, `close_quietly`)
whose outcome the model predicts, so the streams' versions stay known."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from hypothesis import strategies as st
from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_runtime.uow.phases import RUNNING_PHASES
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from tests.unit.runtime.twin_streams import History
from tests.unit.runtime.twin_world import Session, World, assistant, misc, phase, tool, user, wait

STEPS = ["assistant", "assistant", "tool", "tool", "user", "user", "phase", "wait", "wait", "wait",
         "misc", "misc", "misc", "delegate", "run", "run", "side", "operation", "operation", "session"]  # fmt: skip


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
            make = {"assistant": assistant, "user": user, "phase": phase, "wait": wait, "misc": misc}
            tool_or_answer = tool if s.calls else assistant
            events = tool_or_answer(w, s) if step == "tool" else make.get(step, misc)(w, s)
            batch = (s, [*batch[1], *events]) if batch is not None else (s, events)
    if batch is not None:
        w.history.append((batch[0].id, batch[1]))
    return w.history
