"""`delegate` and `delegate_followup` in the parent loop: validate, then create the child
session, the execution, the child's USER message and the `RunExecution` command in one
transaction. The step then ends; the barrier (recovery) resumes the parent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid4, uuid5

from muster_contracts import events as ev
from muster_contracts.commands import RunExecution
from muster_runtime.messaging import topics
from muster_runtime.uow.aggregates import Execution, Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, SessionBusy, UnitOfWorkFactory

from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry, UnknownAgentType
from muster_agent.session_store import SessionState
from muster_agent.tools.arguments import Delegate, DelegateFollowup, parse
from muster_agent.waits import Gate, decide

NAMESPACE = uuid5(NAMESPACE_URL, "https://muster.dev/executions")
STILL_RUNNING = "subagent session {} is still running; wait for its result"


def execution_id_for(parent_session_id: UUID, parent_tool_call_id: str) -> UUID:
    """Deterministic: a replayed parent step can never create a second execution."""
    return uuid5(NAMESPACE, f"{parent_session_id}:{parent_tool_call_id}")


class DelegationRefused(Exception):
    """Becomes the tool call's error result; nothing is created."""


@dataclass(frozen=True)
class Delegator:
    uows: UnitOfWorkFactory
    agents: AgentRegistry
    timeout_s: float
    # The deadline is fixed from this clock when the execution starts and never moves.
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    async def __call__(
        self, state: SessionState, calls: list[dict[str, Any]], lead: Sequence[store.Item] = ()
    ) -> store.Recorded:
        """Record `lead` (the round's ASSISTANT message, when it was just produced), then
        create every delegation of `calls`, all in one transaction; a refused one gets its
        error as the TOOL result instead."""
        async with self.uows() as uow:
            parent, found = await store.lock_if_current(uow, state.session_id, state.message_count)
            if parent is None or found != store.Lock.CURRENT:
                return store.Recorded(found == store.Lock.MOVED, None)  # moved: reload, look again
            parent_events = store.message_items(lead, parent.message_count + 1)
            # The round's ASSISTANT message is the newest one, recorded just now or before.
            round_state = store.advance(state, parent.version, parent_events)
            seq = round_state.message_count
            waiting = False
            for call in calls:
                try:
                    if state.session_type == "SUBAGENT":
                        raise DelegationRefused("subagents cannot delegate")
                    decision = await decide(uow, parent, call)
                    if decision.gate == Gate.REFUSED:
                        raise DelegationRefused(decision.reason)
                    if decision.gate == Gate.WAITING:
                        # An approval first; the calls after it wait with it (in call order).
                        parent_events += decision.wait
                        waiting = True
                        break
                    if call["name"] == "delegate":
                        parent_events += await self._delegate(uow, round_state, call)
                    else:
                        parent_events += await self._followup(uow, round_state, call)
                except DelegationRefused as refused:
                    seq += 1
                    parent_events.append(
                        store.tool_message(call["id"], store.error_result(str(refused)))(seq)
                    )
            await uow.append(str(state.session_id), parent_events, expected_version=parent.version)
        if waiting:
            return store.Recorded(False, None)  # the gateway resumes it once answered
        after = store.advance(replace(state, phase=parent.phase), parent.version, parent_events)
        return store.Recorded(True, after)

    def _agent_type(self, value: str) -> str:
        try:
            return self.agents.get(value).agent_type
        except UnknownAgentType:
            known = ", ".join(self.agents.names())
            raise DelegationRefused(f"unknown agent type {value!r}; available: {known}") from None

    async def _delegate(
        self, uow: AbstractUnitOfWork, state: SessionState, call: dict[str, Any]
    ) -> list[ev.DomainEvent]:
        given = parse(Delegate, call["arguments"])
        if isinstance(given, str) or not given.agent_type.strip() or not given.task.strip():
            raise DelegationRefused("delegate requires non-empty 'agent_type' and 'task'")
        # A child's USER message is exactly its task: no trimming.
        agent_type, task = self._agent_type(given.agent_type.strip()), given.task
        execution_id = execution_id_for(state.session_id, call["id"])
        child_id = uuid5(NAMESPACE, f"child:{execution_id}")
        task_message_id = uuid5(NAMESPACE, f"task:{execution_id}")
        await uow.append(
            str(child_id),
            [
                ev.SessionCreated(
                    session_id=child_id,
                    user_id=state.user_id,
                    session_type="SUBAGENT",
                    parent_session_id=state.session_id,
                    root_session_id=state.root_session_id,
                    title=task[:80],
                    agent_type=agent_type,
                    workspace_id=state.workspace_id,  # the tree's, also after a promotion
                    permission_level=state.permission_level,
                    execution_mode=state.execution_mode,
                ),
                ev.MessageRecorded(message_id=task_message_id, seq=1, role="USER", content=task),
                ev.SessionPhaseChanged(phase="RUNNING"),
            ],
            expected_version=0,
        )
        return await self._start_execution(
            uow,
            state,
            call,
            execution_id=execution_id,
            child_id=child_id,
            agent_type=agent_type,
            task=task,
            invocation="DELEGATE",
            round_=1,
            start_message_id=task_message_id,
            announce_child=True,
        )

    async def _followup(
        self, uow: AbstractUnitOfWork, state: SessionState, call: dict[str, Any]
    ) -> list[ev.DomainEvent]:
        given = parse(DelegateFollowup, call["arguments"])
        if isinstance(given, str) or not given.child_session_id.strip() or not given.task.strip():
            raise DelegationRefused("delegate_followup requires non-empty 'child_session_id' and 'task'")
        child_ref, task = given.child_session_id.strip(), given.task
        try:
            child_id = UUID(child_ref)
        except ValueError:
            raise DelegationRefused(f"session {child_ref} not found") from None
        # Ownership first, read without a lock: another user's session is "not found" whatever
        # it is doing (a lock attempt on a busy one would tell it exists).
        seen = await uow.session(child_id)
        if seen is None or seen.user_id != state.user_id:
            raise DelegationRefused(f"session {child_ref} not found")
        try:
            # NOWAIT: the lock order is child before parent everywhere else, and we already
            # hold the parent. A child row locked right now is being driven by its worker
            # (or cancelled), i.e. still running.
            row = await uow.lock_session(child_id, nowait=True)
        except SessionBusy:
            raise DelegationRefused(STILL_RUNNING.format(child_ref)) from None
        child = Session.of(row) if row is not None else None
        if child is None or child.user_id != state.user_id:
            raise DelegationRefused(f"session {child_ref} not found")
        if not child.is_subagent:
            raise DelegationRefused(f"session {child_ref} is not a subagent session")
        if child.parent_session_id != state.session_id:
            raise DelegationRefused(f"session {child_ref} was not delegated by this session")
        if child.active:
            raise DelegationRefused(STILL_RUNNING.format(child_ref))
        agent_type = self._agent_type(child.agent_type)
        runs = [Execution.of(run) for run in await uow.runs_of(child.session_id)]
        task_message_id = uuid4()
        # A child cancelled mid-round has open calls: they are answered before the new task.
        closing = await store.answer_open_calls(uow, child.session_id, child.message_count + 1)
        await uow.append(
            str(child.session_id),
            [
                *closing,
                ev.MessageRecorded(
                    message_id=task_message_id,
                    seq=child.message_count + len(closing) + 1,
                    role="USER",
                    content=task,
                ),
                ev.SessionPhaseChanged(phase="RUNNING"),
            ],
            expected_version=child.version,
        )
        return await self._start_execution(
            uow,
            state,
            call,
            execution_id=execution_id_for(state.session_id, call["id"]),
            child_id=child.session_id,
            agent_type=agent_type,
            task=task,
            invocation="FOLLOWUP",
            round_=len(runs) + 1,
            start_message_id=task_message_id,
            announce_child=False,
        )

    async def _start_execution(
        self,
        uow: AbstractUnitOfWork,
        state: SessionState,
        call: dict[str, Any],
        *,
        execution_id: UUID,
        child_id: UUID,
        agent_type: str,
        task: str,
        invocation: ev.InvocationType,
        round_: int,
        start_message_id: UUID,
        announce_child: bool,
    ) -> list[ev.DomainEvent]:
        """The execution's stream and command; returns the events for the parent's stream."""
        round_message = next(m for m in reversed(state.messages) if m.role == "ASSISTANT")
        await uow.append(
            str(execution_id),
            [
                ev.ExecutionStarted(
                    execution_id=execution_id,
                    parent_session_id=state.session_id,
                    parent_tool_call_id=call["id"],
                    parent_message_id=round_message.message_id,
                    child_session_id=child_id,
                    user_id=state.user_id,
                    agent_type=agent_type,
                    invocation_type=invocation,
                    task=task,
                    round=round_,
                    start_message_id=start_message_id,
                    deadline_at=self.clock() + timedelta(seconds=self.timeout_s),
                )
            ],
            expected_version=0,
        )
        parent_events: list[ev.DomainEvent] = [
            ev.ToolCallStarted(
                message_id=round_message.message_id, tool_call_id=call["id"], name=call["name"]
            )
        ]
        if announce_child:
            parent_events.append(
                ev.SubagentSessionCreated(
                    child_session_id=child_id,
                    tool_call_id=call["id"],
                    agent_type=agent_type,
                    execution_id=execution_id,
                )
            )
        parent_events.append(
            ev.ExecutionStatusChanged(execution_id=execution_id, status="RUNNING", delivery_status="PENDING")
        )
        await uow.send(
            topics.DELEGATIONS,
            str(child_id),
            RunExecution(
                execution_id=execution_id,
                child_session_id=child_id,
                parent_session_id=state.session_id,
            ),
        )
        return parent_events
