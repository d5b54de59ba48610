"""`tree_status`, one contract for both units of work: a root's signals as recorded and as
its tree adds up now — side tasks at any depth and their subagents, archived and deleted
subtrees left out, the root's own subagents not counted as its tree, pending approvals and
questions counted anywhere under the root, a promotion moving a subtree to a tree of its own."""

from __future__ import annotations

from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_contracts import wait_events as we
from muster_runtime.uow.recovery_views import TreeSignals

from tests.unit.runtime.uow_contract import covers
from tests.unit.runtime.uow_harness import Harness

QUIET = TreeSignals()


async def append(work: Harness, sid: UUID, *events: ev.DomainEvent) -> None:
    async with work.uow() as uow:
        await uow.append(str(sid), list(events), expected_version=None)


async def session(work: Harness, root: UUID | None, parent: UUID | None, kind: str = "SIDE_TASK") -> UUID:
    sid = uuid4()
    created = ev.SessionCreated(
        session_id=sid, user_id="u", session_type=kind,  # type: ignore[arg-type]
        parent_session_id=parent, root_session_id=root or sid,
    )  # fmt: skip
    await append(work, sid, created)
    return sid


async def current(work: Harness, root: UUID) -> TreeSignals:
    async with work.uow() as uow:
        status = await uow.tree_status(root)
    assert status is not None
    return status.current


@covers("tree_status")
async def test_signals_follow_the_deepest_side_task_and_are_recorded_on_the_root(work: Harness) -> None:
    root = await session(work, None, None, "NORMAL")
    task = await session(work, root, root)
    deep = await session(work, root, task)
    async with work.uow() as uow:
        status = await uow.tree_status(root)
        assert await uow.tree_status(task) is None  # not a root
        assert await uow.tree_status(uuid4()) is None
    assert status is not None and not status.changed and status.current == QUIET and status.version == 1
    await append(work, deep, ev.SessionPhaseChanged(phase="RUNNING"))
    async with work.uow() as uow:
        status = await uow.tree_status(root)
    assert status is not None and status.changed and status.current == TreeSignals(running=True)
    await append(work, root, se.SessionTreeStatusChanged(tree_running=True, tree_unread=False))
    async with work.uow() as uow:
        status = await uow.tree_status(root)
    assert status is not None and not status.changed and status.version == 2
    await append(work, deep, ev.SessionPhaseChanged(phase="COMPLETED"))
    assert await current(work, root) == TreeSignals(unread=True)
    await append(work, deep, se.SessionRead())
    assert await current(work, root) == QUIET


async def test_hidden_subtrees_and_the_roots_own_subagents_are_not_its_tree(work: Harness) -> None:
    root = await session(work, None, None, "NORMAL")
    own_child = await session(work, root, root, "SUBAGENT")
    task = await session(work, root, root)
    under = await session(work, root, task)
    grandchild = await session(work, root, under, "SUBAGENT")
    await append(work, own_child, ev.SessionPhaseChanged(phase="RUNNING"))
    assert await current(work, root) == QUIET
    await append(work, grandchild, ev.SessionPhaseChanged(phase="RUNNING"))
    assert (await current(work, root)).running
    await append(work, task, se.SessionArchived())
    assert not (await current(work, root)).running  # an archived session hides its subtree
    await append(work, task, se.SessionUnarchived())
    assert (await current(work, root)).running
    await append(work, under, se.SessionDeleted())
    assert not (await current(work, root)).running


async def test_pending_waits_count_anywhere_under_the_root_until_resolved(work: Harness) -> None:
    root = await session(work, None, None, "NORMAL")
    task = await session(work, root, root)
    child = await session(work, root, root, "SUBAGENT")
    approvals = {sid: uuid4() for sid in (root, task, child)}
    for sid, approval in approvals.items():
        await append(work, sid, we.ApprovalRequested(approval_id=approval, tool_call_id="c", tool="t", arguments="{}"))
    question = uuid4()
    await append(work, task, we.QuestionAsked(question_id=question, tool_call_id="q", question="?"))
    assert await current(work, root) == TreeSignals(approvals=3, questions=1)
    await append(work, child, we.ApprovalResolved(approval_id=approvals[child], decision="approve"))
    await append(work, task, we.QuestionResolved(question_id=question, outcome="dropped"))
    assert await current(work, root) == TreeSignals(approvals=2)
    await append(work, task, se.SessionDeleted())  # a deleted session's waits leave with it
    assert await current(work, root) == TreeSignals(approvals=1)


async def test_a_promoted_side_task_takes_its_subtree_to_a_tree_of_its_own(work: Harness) -> None:
    root = await session(work, None, None, "NORMAL")
    task = await session(work, root, root)
    under = await session(work, root, task)
    await append(work, under, ev.SessionPhaseChanged(phase="RUNNING"))
    await append(work, under, we.QuestionAsked(question_id=uuid4(), tool_call_id="q", question="?"))
    assert await current(work, root) == TreeSignals(running=True, questions=1)
    await append(work, task, se.SessionPromoted(previous_parent_session_id=root, previous_root_session_id=root))
    assert await current(work, root) == QUIET
    assert await current(work, task) == TreeSignals(running=True, questions=1)
