"""A round of delegations is one decision under the parent's lock, on both units of work:
every execution of the round in one transaction; and when something was appended to the
parent since the loop looked (a queued input), the same delegations are still decided, with
no second model call and nothing lost. (The unlocked twin of ADR 0025 was removed: it was
worth 2 % of throughput, under issue 35's 10 % bar.)"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry
from muster_agent.delegation import Delegator, execution_id_for
from muster_contracts import events as ev
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from tests.unit.recovery.builders import assistant, delegate_call, record, running_session
from tests.unit.runtime.uow_harness import Harness


def locking(work: Harness, locks: list[UUID]) -> Any:
    """`work`'s units of work, noting each session they lock."""

    def uows() -> AbstractUnitOfWork:
        uow = work.uow()
        real = uow.lock_session

        async def lock_session(session_id: UUID, **options: Any) -> Any:
            locks.append(session_id)
            return await real(session_id, **options)

        uow.lock_session = lock_session  # type: ignore[method-assign]
        return uow

    return uows


async def round_of(work: Harness, calls: list[dict[str, Any]]) -> store.SessionState:
    parent = await running_session(work.uow)
    await record(work.uow, parent, lambda seq: [assistant(seq, calls)])
    state = await store.read_state(work.uow, parent)
    assert state is not None
    return state


async def test_a_round_of_delegations_is_one_decision_under_the_parents_lock(work: Harness) -> None:
    calls = [delegate_call("a"), delegate_call("b")]
    state, locks = await round_of(work, calls), []
    recorded = await Delegator(locking(work, locks), AgentRegistry.load(), 3600.0)(state, calls)
    assert recorded.keep_going and recorded.state is not None
    assert locks == [state.session_id]
    async with work.uow() as uow:
        runs = await uow.executions_of(state.session_id)
        parent = await uow.lock_session(state.session_id)
    assert sorted(r["execution_id"] for r in runs) == sorted(
        execution_id_for(state.session_id, c) for c in "ab"
    )
    assert parent is not None and parent["version"] == recorded.state.version


async def test_a_parent_appended_to_meanwhile_still_gets_its_delegations(work: Harness) -> None:
    calls = [delegate_call("a")]
    state, locks = await round_of(work, calls), []
    queued = ev.UserMessageQueued(message_id=uuid4(), content="while you think")
    async with work.uow() as uow:
        await uow.append(str(state.session_id), [queued], expected_version=state.version)
    recorded = await Delegator(locking(work, locks), AgentRegistry.load(), 3600.0)(state, calls)
    assert recorded.keep_going and locks == [state.session_id]
    async with work.uow() as uow:
        runs = await uow.executions_of(state.session_id)
        waiting = await uow.next_queued_input(state.session_id)
    assert [r["execution_id"] for r in runs] == [execution_id_for(state.session_id, "a")]
    assert waiting is not None and waiting["message_id"] == queued.message_id
