"""Trees of side tasks against PostgreSQL: listings (direct, recursive, archived and deleted
subtrees cut off), search, promotion, settings, reads and the tree signals, each also
checked to rebuild from the events alone."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_gateway import management, queries, tree_queries
from muster_gateway.errors import GatewayError
from muster_recovery import tree_status
from muster_recovery.placements import Placements
from muster_recovery.postgres_scans import PostgresScans
from muster_recovery.scan_port import Placement
from muster_runtime.process.db import Pool
from muster_runtime.store import rebuild

from tests.databases import uows

from .side_support import USER, append, main_session, side, user


async def chain(pool: Pool, word: str = "zebracorn") -> tuple[UUID, UUID, UUID, UUID]:
    main = await main_session(pool)
    a = await side(pool, main, contextMode="fork")
    b = await side(pool, a, contextMode="fork")
    c = await side(pool, b, contextMode="fork")
    await append(pool, c, user(1, f"the {word} quests"))
    return main, a, b, c


async def listed(pool: Pool, sid: UUID, recursive: bool = True) -> list[str]:
    return [i["sessionId"] for i in await tree_queries.list_side_tasks(pool, USER, str(sid), recursive)]


async def rebuilds(pool: Pool) -> None:
    async with pool.acquire() as conn:
        assert (await rebuild.check(conn, batch=4)).equal


async def test_recursive_listing_is_flat_and_ordered_direct_is_one_level(pool: Pool) -> None:
    main, a, b, c = await chain(pool)
    rows = await pool.fetch(
        "SELECT session_id FROM sessions WHERE session_id = ANY($1) ORDER BY updated_at DESC, session_id DESC",
        [a, b, c])
    assert await listed(pool, main) == [str(r["session_id"]) for r in rows]
    assert await listed(pool, b, recursive=False) == [str(c)]
    assert await listed(pool, main, recursive=False) == [str(a)]
    item = (await tree_queries.list_side_tasks(pool, USER, str(b), False))[0]
    assert (item["parentSessionId"], item["rootSessionId"], item["permissionLevel"]) == (str(b), str(main), "auto")


async def test_archive_hides_a_subtree_and_unarchive_shows_it(pool: Pool) -> None:
    main, a, b, c = await chain(pool)
    await management.set_archived(uows(pool), USER, str(b), True)
    assert await listed(pool, main) == [str(a)]
    assert (await queries.get_session(pool, USER, str(b)))["archived"] is True  # still openable
    await management.set_archived(uows(pool), USER, str(b), False)
    assert set(await listed(pool, main)) == {str(a), str(b), str(c)}
    with pytest.raises(GatewayError) as info:
        await management.set_archived(uows(pool), USER, str(main), True)
    assert info.value.code == "conflict"
    await rebuilds(pool)


async def test_delete_hides_the_session_its_subtree_and_their_search_hits(pool: Pool) -> None:
    main, a, _, c = await chain(pool, "quokkaroo")
    hits = await tree_queries.search(pool, USER, "quokkaroo quest", 10)  # stemmed: quests → quest
    assert [(h["sessionId"], h["rootSessionId"], h["sessionType"]) for h in hits] == [
        (str(c), str(main), "SIDE_TASK")]
    assert "**quokkaroo**" in hits[0]["snippet"]
    assert await tree_queries.search(pool, "bob", "quokkaroo", 10) == []
    await management.delete(uows(pool), USER, str(a))
    assert await listed(pool, main) == []
    assert await tree_queries.search(pool, USER, "quokkaroo", 10) == []
    with pytest.raises(GatewayError) as info:
        await queries.get_session(pool, USER, str(a))
    assert info.value.code == "not_found"
    await rebuilds(pool)


async def test_promote_makes_a_root_of_its_subtree(pool: Pool) -> None:
    main, a, b, c = await chain(pool)
    await management.promote(uows(pool), USER, str(b))
    promoted = await queries.get_session(pool, USER, str(b))
    assert (promoted["sessionType"], promoted["parentSessionId"], promoted["rootSessionId"]) == (
        "NORMAL", None, str(b))
    assert (await queries.get_session(pool, USER, str(c)))["rootSessionId"] == str(b)
    assert await listed(pool, main) == [str(a)]
    assert await listed(pool, b) == [str(c)]
    await rebuilds(pool)
    for target in (main, b):  # not side tasks (any more)
        with pytest.raises(GatewayError) as info:
            await management.promote(uows(pool), USER, str(target))
        assert info.value.code == "conflict"


async def test_promote_refuses_a_running_side_task_or_one_with_a_subagent(pool: Pool) -> None:
    main, a, b, c = await chain(pool)
    await append(pool, c, ev.SessionPhaseChanged(phase="RUNNING"))
    child = UUID(int=77)
    await append(pool, child, ev.SessionCreated(session_id=child, user_id=USER, session_type="SUBAGENT",
                                                parent_session_id=b, root_session_id=main))
    for target in (c, b):
        with pytest.raises(GatewayError) as info:
            await management.promote(uows(pool), USER, str(target))
        assert info.value.code == "conflict"
    with pytest.raises(GatewayError) as info:
        await management.promote(uows(pool), "bob", str(a))
    assert info.value.code == "not_found"


async def test_settings_change_and_subagents_refuse(pool: Pool) -> None:
    main, a, _, _ = await chain(pool)
    changes = {"title": "renamed", "model_id": "m2", "permission_level": "ask"}
    await management.change_settings(uows(pool), USER, str(a), changes)
    body = await queries.get_session(pool, USER, str(a))
    assert (body["title"], body["modelId"], body["permissionLevel"]) == ("renamed", "m2", "ask")
    child = UUID(int=78)
    await append(pool, child, ev.SessionCreated(session_id=child, user_id=USER, session_type="SUBAGENT",
                                                parent_session_id=main, root_session_id=main))
    with pytest.raises(GatewayError) as info:
        await management.change_settings(uows(pool), USER, str(child), {"title": "x"})
    assert info.value.code == "conflict"
    await rebuilds(pool)


async def test_tree_signals_follow_the_deepest_side_task(pool: Pool) -> None:
    main, _, _, c = await chain(pool)

    async def signals() -> tuple[bool, bool]:
        item = next(i for i in await queries.list_sessions(pool, USER, "NORMAL", 1000)
                    if i["sessionId"] == str(main))
        row = await pool.fetchrow("SELECT tree_running, tree_unread FROM sessions WHERE session_id = $1", main)
        assert (row["tree_running"], row["tree_unread"]) == (item["treeRunning"], item["treeUnread"])
        return item["treeRunning"], item["treeUnread"]

    await append(pool, c, ev.SessionPhaseChanged(phase="RUNNING"))
    assert await tree_status.refresh(uows(pool), main) is True
    assert await tree_status.refresh(uows(pool), main) is False  # nothing changed: nothing recorded
    assert await signals() == (True, False)
    await append(pool, c, ev.SessionPhaseChanged(phase="COMPLETED"))
    await tree_status.refresh(uows(pool), main)
    assert await signals() == (False, True)
    assert (await queries.get_session(pool, USER, str(c)))["unread"] is True
    await management.mark_read(uows(pool), USER, str(c))
    await tree_status.refresh(uows(pool), main)
    assert await signals() == (False, False)
    kinds = [r["type"] for r in await pool.fetch(
        "SELECT type FROM events WHERE stream_id = $1 ORDER BY position", str(main))]
    assert kinds.count("SessionTreeStatusChanged") == 3
    await rebuilds(pool)


async def test_search_uses_the_full_text_index(pool: Pool) -> None:
    # A user with many sessions and messages: the plan must find the few matching messages
    # through the index, not read every message of every session.
    for n in range(150):
        sid = await main_session(pool, "searcher")
        await append(pool, sid, *(user(seq, f"routine note {n} {seq}") for seq in range(1, 21)))
    await pool.execute("ANALYZE messages; ANALYZE sessions")
    rows = await pool.fetch("EXPLAIN " + tree_queries.SEARCH, "searcher", "wombatine", 10)
    plan = "\n".join(r[0] for r in rows)
    assert "messages_user_text" in plan, plan


async def test_a_forks_copies_are_found_once_through_their_original(pool: Pool) -> None:
    main = await main_session(pool)
    await append(pool, main, user(1, "where do platypodes nest"))
    fork = await side(pool, main, contextMode="fork")
    assert await pool.fetchval("SELECT count(*) FROM messages WHERE session_id = $1", fork) == 1
    hits = await tree_queries.search(pool, USER, "platypodes", 10)
    assert [h["sessionId"] for h in hits] == [str(main)]


async def test_the_roots_own_subagents_are_its_turn_not_its_tree(pool: Pool) -> None:
    main = await main_session(pool)
    task = await side(pool, main)
    for parent, n in ((main, 90), (task, 91)):
        child = UUID(int=n)
        await append(pool, child, ev.SessionCreated(session_id=child, user_id=USER, session_type="SUBAGENT",
                                                    parent_session_id=parent, root_session_id=main),
                     ev.SessionPhaseChanged(phase="RUNNING"))
        running = await pool.fetchval("SELECT tree_running FROM muster_tree_status($1)", [main])
        assert running is (parent == task), parent


async def test_reconciliation_records_a_signal_whose_event_was_lost(pool: Pool) -> None:
    main = await main_session(pool)
    task = await side(pool, main)
    await append(pool, task, ev.SessionPhaseChanged(phase="RUNNING"))  # no event consumed: lost
    assert await pool.fetchval("SELECT tree_running FROM sessions WHERE session_id = $1", main) is False
    assert await tree_status.reconcile(uows(pool), PostgresScans(pool)) >= 1
    assert await pool.fetchval("SELECT tree_running FROM sessions WHERE session_id = $1", main) is True
    assert await tree_status.reconcile(uows(pool), PostgresScans(pool)) == 0


async def test_archived_and_deleted_subtrees_leave_the_signals(pool: Pool) -> None:
    main, a, b, c = await chain(pool)
    await append(pool, c, ev.SessionPhaseChanged(phase="RUNNING"))

    async def running() -> bool:
        return bool(await pool.fetchval("SELECT tree_running FROM muster_tree_status($1)", [main]))

    assert await running()
    await management.set_archived(uows(pool), USER, str(b), True)
    assert not await running()
    await management.set_archived(uows(pool), USER, str(b), False)
    assert await running()
    await management.delete(uows(pool), USER, str(a))
    assert not await running()
    await rebuilds(pool)


async def test_pending_waits_count_anywhere_in_the_tree_and_a_lost_signal_is_reconciled(pool: Pool) -> None:
    from muster_contracts import wait_events as we

    main = await main_session(pool)
    task = await side(pool, main)
    child = UUID(int=92)
    await append(pool, child, ev.SessionCreated(session_id=child, user_id=USER, session_type="SUBAGENT",
                                                parent_session_id=main, root_session_id=main))

    async def counts() -> tuple[int, int]:
        row = await pool.fetchrow(
            "SELECT pending_approvals, pending_questions FROM muster_tree_status($1)", [main])
        return row["pending_approvals"], row["pending_questions"]

    approvals = {sid: UUID(int=100 + i) for i, sid in enumerate((main, task, child))}
    for sid, approval in approvals.items():  # the root's own, a side task's and a subagent's
        await append(pool, sid, we.ApprovalRequested(approval_id=approval, tool_call_id="c", tool="write_file",
                                                     arguments="{}"))
    question = UUID(int=110)
    await append(pool, task, we.QuestionAsked(question_id=question, tool_call_id="q", question="?"))
    assert await counts() == (3, 1)
    assert await tree_status.reconcile(uows(pool), PostgresScans(pool)) >= 1  # no event consumed: the lost signal is made up
    assert await pool.fetchval("SELECT pending_approvals FROM sessions WHERE session_id = $1", main) == 3
    await append(pool, child, we.ApprovalResolved(approval_id=approvals[child], decision="approve"))
    await append(pool, task, we.QuestionResolved(question_id=question, outcome="dropped"))
    assert await counts() == (2, 0)
    await management.delete(uows(pool), USER, str(task))  # a deleted session's waits are dropped with it
    assert await counts() == (1, 0)
    await rebuilds(pool)


class CountingScans(PostgresScans):
    """The scans, counting the placement reads that reach the database."""

    def __init__(self, pool: Pool) -> None:
        super().__init__(pool)
        self.reads = 0

    async def placement(self, session_id: UUID) -> Placement | None:
        self.reads += 1
        return await super().placement(session_id)


async def test_placements_that_cannot_change_are_read_once_and_the_others_every_time(pool: Pool) -> None:
    main = await main_session(pool)
    task = await side(pool, main)
    placed = {}
    for name, parent in (("direct", main), ("under_task", task)):
        child = uuid4()
        await append(pool, child, ev.SessionCreated(session_id=child, user_id=USER, session_type="SUBAGENT",
                                                    parent_session_id=parent, root_session_id=main))
        placed[name] = child
    placements, counting = Placements(), CountingScans(pool)
    for _ in range(3):
        for sid in (main, placed["direct"], task, placed["under_task"]):
            row = await placements.of(counting, sid)
            assert row is not None and row.root_session_id == main
    assert counting.reads == 2 + 2 * 3  # the root and its subagent once; the others each time
