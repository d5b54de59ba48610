"""The decisions of `management.py` on the in-memory unit of work: settings, archive,
delete, promote and read, each on an owned session, appending nothing when nothing changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_contracts import wait_events as we
from muster_gateway import management
from muster_gateway.errors import GatewayError
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.memory_uow import MemoryStore

from tests.unit.gateway.memory_support import USER, append, events, sent, session, types


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def side_task(store: MemoryStore, source: UUID, *, phase: ev.Phase | None = None) -> UUID:
    return await session(
        store, phase=phase, session_type="SIDE_TASK", parent_session_id=source, root_session_id=source
    )


async def read(store: MemoryStore, sid: UUID) -> Session:
    async with store.uow() as uow:
        found = await uow.session(sid)
    assert found is not None
    return found


async def refused(decision: Callable[[], Awaitable[object]], code: str) -> None:
    with pytest.raises(GatewayError) as info:
        await decision()
    assert info.value.code == code


async def test_settings_change_what_differs_and_nothing_else(store: MemoryStore) -> None:
    sid = await session(store, title="old", model_id="m1")
    changes = {"title": "new", "model_id": "m1", "permission_level": "ask"}
    await management.change_settings(store.uow, USER, str(sid), changes)
    (changed,) = events(store, sid)[-1:]
    assert isinstance(changed, se.SessionSettingsChanged)
    assert (changed.title, changed.model_id, changed.permission_level) == ("new", None, "ask")
    settled = await read(store, sid)
    assert (settled.title, settled.model_id, settled.permission_level) == ("new", "m1", "ask")
    await management.change_settings(store.uow, USER, str(sid), changes)  # the same again: no event
    assert types(store, sid) == ["SessionCreated", "SessionSettingsChanged"]


async def test_a_subagent_session_is_managed_through_its_parent(store: MemoryStore) -> None:
    parent = await session(store)
    child = await session(store, session_type="SUBAGENT", parent_session_id=parent, root_session_id=parent)
    await refused(lambda: management.change_settings(store.uow, USER, str(child), {"title": "x"}), "conflict")
    await refused(lambda: management.delete(store.uow, USER, str(child)), "conflict")
    await refused(lambda: management.mark_read(store.uow, USER, str(child)), "conflict")
    await refused(
        lambda: management.change_settings(store.uow, "bob", str(child), {"title": "x"}), "not_found"
    )
    assert types(store, child) == ["SessionCreated"]


async def test_only_side_tasks_are_archived_and_twice_is_once(store: MemoryStore) -> None:
    main = await session(store)
    side = await side_task(store, main)
    await management.set_archived(store.uow, USER, str(side), True)
    await management.set_archived(store.uow, USER, str(side), True)
    assert (await read(store, side)).archived and types(store, side)[-1] == "SessionArchived"
    await management.set_archived(store.uow, USER, str(side), False)
    assert not (await read(store, side)).archived
    assert types(store, side) == ["SessionCreated", "SessionArchived", "SessionUnarchived"]
    await refused(lambda: management.set_archived(store.uow, USER, str(main), True), "conflict")


async def test_deleting_a_running_session_cancels_it_and_drops_its_waits_and_queue(
    store: MemoryStore,
) -> None:
    sid, question, queued = await session(store), uuid4(), uuid4()
    await append(
        store,
        sid,
        ev.SessionPhaseChanged(phase="RUNNING"),
        we.QuestionAsked(question_id=question, tool_call_id="c1", question="which?"),
        ev.SessionPhaseChanged(phase="WAITING_INPUT"),
        ev.UserMessageQueued(message_id=queued, content="later"),
    )
    await management.delete(store.uow, USER, str(sid))
    assert types(store, sid)[-4:] == [
        "QuestionResolved",
        "SessionPhaseChanged",
        "QueuedMessagesDropped",
        "SessionDeleted",
    ]
    dropped = events(store, sid)[-2]
    assert isinstance(dropped, ev.QueuedMessagesDropped) and (dropped.message_ids, dropped.reason) == (
        [queued],
        "deleted",
    )
    assert sent(store, sid) == ["CancelSession"]
    await refused(
        lambda: management.mark_read(store.uow, USER, str(sid)), "not_found"
    )  # gone for every request


async def test_deleting_an_idle_session_only_deletes_it(store: MemoryStore) -> None:
    sid = await session(store, phase="COMPLETED")
    await management.delete(store.uow, USER, str(sid))
    assert (
        types(store, sid)[-1:] == ["SessionDeleted"]
        and len(types(store, sid)) == 3
        and sent(store, sid) == []
    )


async def test_promotion_makes_an_idle_side_task_the_root_of_its_subtree(store: MemoryStore) -> None:
    main = await session(store)
    side = await side_task(store, main, phase="COMPLETED")
    below = await session(store, session_type="SIDE_TASK", parent_session_id=side, root_session_id=main)
    await management.promote(store.uow, USER, str(side))
    promoted = events(store, side)[-1]
    assert isinstance(promoted, se.SessionPromoted)
    assert (promoted.previous_parent_session_id, promoted.previous_root_session_id) == (main, main)
    now = await read(store, side)
    assert (now.session_type, now.parent_session_id, now.root_session_id) == ("NORMAL", None, side)
    assert (await read(store, below)).root_session_id == side
    await refused(
        lambda: management.promote(store.uow, USER, str(side)), "conflict"
    )  # not a side task any more
    await refused(lambda: management.promote(store.uow, USER, str(main)), "conflict")


@pytest.mark.parametrize(
    "phase", ["RUNNING", "RESUMING", "CANCELLING", "WAITING_APPROVAL", "WAITING_INPUT", "WAITING_CLIENT"]
)
async def test_a_busy_side_task_is_not_promoted(store: MemoryStore, phase: ev.Phase) -> None:
    side = await side_task(store, await session(store), phase=phase)
    await refused(lambda: management.promote(store.uow, USER, str(side)), "conflict")


async def test_a_side_task_that_delegated_is_not_promoted_and_a_foreign_one_is_not_found(
    store: MemoryStore,
) -> None:
    main = await session(store)
    side = await side_task(store, main)
    await refused(lambda: management.promote(store.uow, "bob", str(side)), "not_found")
    await session(store, session_type="SUBAGENT", parent_session_id=side, root_session_id=main)
    await refused(lambda: management.promote(store.uow, USER, str(side)), "conflict")
    assert types(store, side) == ["SessionCreated"]


async def test_reading_clears_unread_once(store: MemoryStore) -> None:
    sid = await session(store, phase="COMPLETED")
    assert (await read(store, sid)).unread
    await management.mark_read(store.uow, USER, str(sid))
    await management.mark_read(store.uow, USER, str(sid))
    assert types(store, sid).count("SessionRead") == 1 and not (await read(store, sid)).unread
