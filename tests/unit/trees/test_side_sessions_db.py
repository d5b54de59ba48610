"""`create_side_session` against PostgreSQL: what each context mode gives the side task's
model (through the loop's own `model_messages`), where a fork cuts, what it copies, and
that a replay of the log rebuilds the copies."""

from __future__ import annotations

import time
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_gateway.errors import GatewayError
from muster_runtime.process.db import Pool
from muster_runtime.store import rebuild
from muster_runtime.store.fork_ids import copied_id

from .side_support import USER, answer, append, context, conversation, main_session, side, tool, user


async def test_none_mode_has_no_source_text(pool: Pool) -> None:
    main = await main_session(pool)
    await conversation(pool, main, 3)
    sid = await side(pool, main)
    row = await pool.fetchrow("SELECT * FROM sessions WHERE session_id = $1", sid)
    assert (row["session_type"], row["parent_session_id"], row["root_session_id"]) == ("SIDE_TASK", main, main)
    assert row["context_mode"] == "none" and row["message_count"] == 0
    sent = await context(pool, sid)
    assert len(sent) == 1 and "question 1 " not in sent[0]["content"] and "answer 2" not in sent[0]["content"]
    kinds = [r["type"] for r in await pool.fetch(
        "SELECT type FROM events WHERE stream_id = $1 ORDER BY position", str(main))]
    assert kinds[-1] == "SideSessionCreated"


async def test_summary_mode_has_the_last_ten_messages_cut_to_300(pool: Pool) -> None:
    main = await main_session(pool)
    messages = await conversation(pool, main, 6)  # 12 messages, questions 400+ chars long
    sid = await side(pool, main, contextMode="summary")
    system = (await context(pool, sid))[0]["content"]
    assert "not reported back" in system
    for message in messages[2:]:
        assert f"{message.role}: {message.content[:300]}\n" in system + "\n"
        assert message.content[:301] not in system or len(message.content) <= 300
    for message in messages[:2]:
        assert message.content[:300] not in system
    assert len(await context(pool, sid)) == 1  # background only: no source messages as history


async def test_fork_copies_the_history_with_new_ids(pool: Pool) -> None:
    main = await main_session(pool)
    messages = await conversation(pool, main, 3)
    source_chat = (await context(pool, main))[1:]
    sid = await side(pool, main, contextMode="fork")
    assert (await context(pool, sid))[1:] == source_chat
    rows = await pool.fetch("SELECT message_id, seq FROM messages WHERE session_id = $1 ORDER BY seq", sid)
    assert [r["message_id"] for r in rows] == [copied_id(sid, m.message_id) for m in messages]
    assert await pool.fetchval("SELECT message_count FROM sessions WHERE session_id = $1", sid) == 6


async def test_fork_from_a_message_stops_there(pool: Pool) -> None:
    main = await main_session(pool)
    messages = await conversation(pool, main, 3)
    sid = await side(pool, main, contextMode="fork", forkFromMessageId=str(messages[1].message_id))
    assert [m["content"] for m in (await context(pool, sid))[1:]] == [messages[0].content, messages[1].content]


async def test_a_cut_inside_a_tool_round_moves_before_it(pool: Pool) -> None:
    main = await main_session(pool)
    await append(pool, main, user(1, "go"), answer(2, "", "c1", "c2"), tool(3, "c1"))
    round_started = await pool.fetchval("SELECT message_id FROM messages WHERE session_id = $1 AND seq = 3", main)
    # Up to the round's first result (c2 unanswered), and everything (the round still open).
    for data in ({"forkFromMessageId": str(round_started)}, {}):
        sid = await side(pool, main, contextMode="fork", **data)
        assert [m["role"] for m in (await context(pool, sid))[1:]] == ["user"]
    await append(pool, main, tool(4, "c2"))
    sid = await side(pool, main, contextMode="fork")
    assert [m["role"] for m in (await context(pool, sid))[1:]] == ["user", "assistant", "tool", "tool"]


async def test_fork_from_a_foreign_or_unknown_message_is_bad_request(pool: Pool) -> None:
    main, other = await main_session(pool), await main_session(pool)
    await conversation(pool, main, 1)
    foreign = (await conversation(pool, other, 1))[0].message_id
    for raw in (str(foreign), str(uuid4()), "not-a-uuid"):
        with pytest.raises(GatewayError) as info:
            await side(pool, main, contextMode="fork", forkFromMessageId=raw)
        assert info.value.code == "bad_request"
    with pytest.raises(GatewayError) as info:
        await side(pool, main, contextMode="none", forkFromMessageId=str(foreign))
    assert info.value.code == "bad_request"


async def test_sources_must_be_the_users_normal_or_side_sessions(pool: Pool) -> None:
    main = await main_session(pool)
    with pytest.raises(GatewayError) as info:
        await side(pool, main, who="bob")
    assert info.value.code == "not_found"
    child = uuid4()
    await append(pool, child, ev.SessionCreated(session_id=child, user_id=USER, session_type="SUBAGENT",
                                                parent_session_id=main, root_session_id=main))
    with pytest.raises(GatewayError) as info:
        await side(pool, child)
    assert info.value.code == "conflict"


async def test_fork_carries_file_changes_with_the_new_message_ids(pool: Pool) -> None:
    main = await main_session(pool)
    round_ = answer(2, "", "w1")
    change = uuid4()
    await append(pool, main, user(1, "write"), round_, tool(3, "w1"), ev.FileChanged(
        change_id=change, message_id=round_.message_id, message_seq=2, tool_call_id="w1", path="a.txt",
        change_type="CREATED", lines_added=1))
    sid = await side(pool, main, contextMode="fork")
    row = await pool.fetchrow("SELECT * FROM file_changes WHERE session_id = $1", sid)
    assert (row["change_id"], row["message_id"], row["path"]) == (
        copied_id(sid, change), copied_id(sid, round_.message_id), "a.txt")
    assert await pool.fetchval("SELECT count(*) FROM file_changes WHERE session_id = $1", main) == 1


async def test_discarded_messages_are_not_copied_and_a_replay_rebuilds_the_copies(pool: Pool) -> None:
    main = await main_session(pool)
    messages = await conversation(pool, main, 2)
    await append(pool, main, ev.MessagesDiscarded(message_ids=[messages[3].message_id], reason="test"))
    sid = await side(pool, main, contextMode="fork")
    # A fork of the fork, then the source discards more: neither copy changes.
    second = await side(pool, sid, contextMode="fork")
    await append(pool, main, ev.MessagesDiscarded(message_ids=[messages[2].message_id], reason="test"))
    for fork in (sid, second):
        assert len((await context(pool, fork))[1:]) == 3
    async with pool.acquire() as conn:
        for batch in (1, 3, 10_000):
            assert (await rebuild.check(conn, batch=batch)).equal


async def test_a_fork_of_5000_messages_is_well_under_a_second(pool: Pool) -> None:
    main = await main_session(pool)
    for start in range(1, 5000, 1000):
        await conversation(pool, main, 500, start=start)
    started = time.perf_counter()
    sid = await side(pool, main, contextMode="fork")
    took = time.perf_counter() - started
    assert await pool.fetchval("SELECT count(*) FROM messages WHERE session_id = $1", sid) == 5000
    assert took < 0.8, f"fork of 5000 messages took {took:.3f}s"


async def test_side_tasks_inherit_the_source_settings(pool: Pool) -> None:
    main = await main_session(pool)
    first = await side(pool, main, modelId="m-1", permissionLevel="read_only", title="t")
    second = await side(pool, first)
    row = await pool.fetchrow("SELECT * FROM sessions WHERE session_id = $1", second)
    assert (row["model_id"], row["permission_level"], row["root_session_id"], row["parent_session_id"]) == (
        "m-1", "read_only", main, first)
    assert row["workspace_id"] == main and row["title"] is None
    assert isinstance(second, UUID)
