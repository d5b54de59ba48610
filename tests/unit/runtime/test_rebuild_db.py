"""Projection rebuild and check against fresh migrated databases (invariant 7): the live
projections equal a replay of the log; a corrupted row is detected and restored."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store import eventstore, rebuild
from muster_runtime.store.rebuild import PROJECTION_TABLES

from tests.databases import fresh_database_url


@contextlib.asynccontextmanager
async def fresh_database(server: str) -> AsyncIterator[Pool]:
    async with fresh_database_url(server, "rebuild_test") as url:
        pool: Pool = await create_pool(url, min_size=1, max_size=12)
        try:
            yield pool
        finally:
            await pool.close()


@pytest.fixture(scope="module")
async def pool(postgres_server_url: str) -> AsyncIterator[Pool]:
    async with fresh_database(postgres_server_url) as created:
        yield created


async def append(pool: Pool, stream: UUID, *events: ev.DomainEvent) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(stream), list(events))


def calls(*names: str) -> list[ev.ToolCallSpec]:
    return [ev.ToolCallSpec(id=f"call-{n}", name=n, arguments=json.dumps({"path": f"{n}.txt", "n": [1, {"x": None}]}))
            for n in names]


async def delegated_turn(pool: Pool) -> dict[str, UUID]:
    """A parent delegating to a child that writes a file, with a queued message dropped and
    a discarded tail: every projection table gets rows, appends of one and of many events."""
    parent, child, execution = uuid4(), uuid4(), uuid4()
    first, dropped, answer, stale = uuid4(), uuid4(), uuid4(), uuid4()
    await append(pool, parent, ev.SessionCreated(session_id=parent, user_id="alice", root_session_id=parent,
                                                 title="t", model_id="scripted"))
    await append(pool, parent, ev.UserMessageQueued(message_id=first, client_message_id="c1", content="go"),
                 ev.UserMessageQueued(message_id=dropped, client_message_id="c2", content="later"))
    await append(pool, parent, ev.MessageRecorded(message_id=first, seq=1, role="USER", content="go"),
                 ev.SessionPhaseChanged(phase="RUNNING"))
    await append(pool, parent, ev.MessageRecorded(message_id=stale, seq=2, role="ASSISTANT", content="half"))
    await append(pool, parent, ev.MessagesDiscarded(message_ids=[stale], reason="incomplete tail"))
    await append(pool, parent, ev.MessageRecorded(
        message_id=answer, seq=3, role="ASSISTANT", content="", tool_calls=calls("delegate", "write_file"),
        usage=ev.TokenUsage(prompt_tokens=12, completion_tokens=3)))
    await append(pool, parent, ev.ToolCallStarted(message_id=answer, tool_call_id="call-write_file", name="write_file"))
    await append(pool, parent, ev.MessageRecorded(message_id=uuid4(), seq=4, role="TOOL", content='{"ok": true}',
                                                  tool_call_id="call-write_file"),
                 ev.FileChanged(change_id=uuid4(), message_id=answer, message_seq=3, tool_call_id="call-write_file",
                                path="write_file.txt", change_type="CREATED", lines_added=1, diff_sha256="d" * 64,
                                after_sha256="a" * 64, after_size=6))
    start = uuid4()
    await append(pool, execution, ev.ExecutionStarted(
        execution_id=execution, parent_session_id=parent, parent_tool_call_id="call-delegate", parent_message_id=answer,
        child_session_id=child, user_id="alice", agent_type="coder", invocation_type="DELEGATE", task="write c.txt",
        round=1, start_message_id=start, deadline_at=datetime.now(UTC) + timedelta(hours=1)))
    await append(pool, child, ev.SessionCreated(session_id=child, user_id="alice", session_type="SUBAGENT",
                                                parent_session_id=parent, root_session_id=parent, agent_type="coder"),
                 ev.MessageRecorded(message_id=start, seq=1, role="USER", content="write c.txt"),
                 ev.SessionPhaseChanged(phase="RUNNING"))
    await append(pool, parent, ev.SubagentSessionCreated(child_session_id=child, tool_call_id="call-delegate",
                                                         agent_type="coder", execution_id=execution))
    child_answer, child_final = uuid4(), uuid4()
    await append(pool, child, ev.MessageRecorded(message_id=child_answer, seq=2, role="ASSISTANT", content="",
                                                 tool_calls=calls("write_file")))
    # The write waited for an approval (one append each), and a question came and went in one.
    approval, question = uuid4(), uuid4()
    await append(pool, child, we.ApprovalRequested(approval_id=approval, tool_call_id="call-write_file",
                                                   tool="write_file", arguments=json.dumps({"path": "c.txt"})),
                 ev.SessionPhaseChanged(phase="WAITING_APPROVAL"))
    await append(pool, child, we.ApprovalResolved(approval_id=approval, decision="approve"),
                 ev.SessionPhaseChanged(phase="RUNNING"))
    await append(pool, child, we.QuestionAsked(question_id=question, tool_call_id="q", question="sure?"),
                 we.QuestionResolved(question_id=question, outcome="dropped"))
    await append(pool, child, ev.ToolCallStarted(message_id=child_answer, tool_call_id="call-write_file", name="write_file"),
                 ev.MessageRecorded(message_id=uuid4(), seq=3, role="TOOL", content="{}", tool_call_id="call-write_file"),
                 ev.FileChanged(change_id=uuid4(), message_id=child_answer, message_seq=2, tool_call_id="call-write_file",
                                path="c.txt", change_type="CREATED", lines_added=2, session_type="SUBAGENT",
                                agent_type="coder", note=None))
    await append(pool, child, ev.MessageRecorded(message_id=child_final, seq=4, role="ASSISTANT", content="wrote c.txt",
                                                 usage=ev.TokenUsage(prompt_tokens=5, completion_tokens=2)),
                 ev.SessionPhaseChanged(phase="COMPLETED"))
    await append(pool, execution, ev.ExecutionFinished(status="COMPLETED", result="wrote c.txt",
                                                       final_message_id=child_final, end_message_id=child_final,
                                                       rounds=2, tool_calls=1, usage=ev.TokenUsage(prompt_tokens=5)))
    await append(pool, parent, ev.ExecutionStatusChanged(execution_id=execution, status="COMPLETED",
                                                         delivery_status="PENDING"))
    tool_result = uuid4()
    await append(pool, parent, ev.MessageRecorded(message_id=tool_result, seq=5, role="TOOL", content="{}",
                                                  tool_call_id="call-delegate"))
    await append(pool, execution, ev.ExecutionDelivered(delivery_status="DELIVERED", tool_message_id=tool_result))
    await append(pool, parent, ev.QueuedMessagesDropped(message_ids=[dropped], reason="cancelled"),
                 ev.MessageRecorded(message_id=uuid4(), seq=6, role="ASSISTANT", content="done"),
                 ev.SessionPhaseChanged(phase="FAILED", error="boom"))
    # Two compactions of the child: the later one is the row.
    for boundary, summary in ((child_answer, "summary of 2 messages"), (child_final, "summary of 4 messages")):
        await append(pool, child, ev.CompactionRecorded(
            boundary_message_id=boundary, boundary_seq=2 if boundary == child_answer else 4, summary=summary,
            messages_compacted=2, tokens_before=90, tokens_after=30, at_seq=4))
    return {"parent": parent, "child": child, "execution": execution, "answer": answer}


async def test_live_projections_equal_the_replay_then_corruption_is_found_and_repaired(pool: Pool) -> None:
    ids = await delegated_turn(pool)
    async with pool.acquire() as conn:
        report = await rebuild.check(conn)
    assert report.equal, report
    assert [t.table for t in report.tables] == list(PROJECTION_TABLES)
    assert all(t.rows_live > 0 for t in report.tables), report
    assert report.events == await pool.fetchval("SELECT count(*) FROM events")

    await pool.execute("UPDATE messages SET content = 'x' WHERE message_id = $1", ids["answer"])
    async with pool.acquire() as conn:
        report = await rebuild.check(conn)
    differ = {t.table: t for t in report.tables if not t.equal}
    assert set(differ) == {"messages"}, report
    assert differ["messages"].rows_live == differ["messages"].rows_rebuilt
    assert differ["messages"].differing_keys == [str(ids["answer"])]
    # check() keeps nothing: the live row is still the corrupted one.
    assert await pool.fetchval("SELECT content FROM messages WHERE message_id = $1", ids["answer"]) == "x"

    async with pool.acquire() as conn:
        rebuilt = await rebuild.rebuild(conn, batch=7)  # runs of one stream cross batch ends
        assert rebuilt.events == report.events
        assert rebuilt.rows == {t.table: t.rows_live for t in report.tables}
        assert (await rebuild.check(conn)).equal
    assert await pool.fetchval("SELECT content FROM messages WHERE message_id = $1", ids["answer"]) == ""


async def test_missing_and_extra_rows_are_reported(pool: Pool) -> None:
    ids = await delegated_turn(pool)
    await pool.execute("DELETE FROM tool_runs WHERE session_id = $1", ids["child"])
    await pool.execute("UPDATE sessions SET version = version + 1 WHERE session_id = $1", ids["parent"])
    async with pool.acquire() as conn:
        report = await rebuild.check(conn)
    differ = {t.table: t for t in report.tables if not t.equal}
    assert set(differ) == {"tool_runs", "sessions"}
    assert differ["tool_runs"].rows_live + 1 == differ["tool_runs"].rows_rebuilt
    assert differ["tool_runs"].differing_keys == [f"({ids['child']},call-write_file)"]
    assert differ["sessions"].differing_keys == [str(ids["parent"])]
    async with pool.acquire() as conn:
        await rebuild.rebuild(conn)
        assert (await rebuild.check(conn)).equal


async def test_a_connection_used_by_check_keeps_projecting_into_the_live_tables(pool: Pool) -> None:
    """check() shadows the tables with temporary ones; statements the connection prepared
    before and after must still reach the live tables."""
    async with pool.acquire() as conn:
        sid = uuid4()
        async with conn.transaction():
            await eventstore.append(conn, str(sid), [ev.SessionCreated(session_id=sid, user_id="bob", root_session_id=sid)])
        assert (await rebuild.check(conn)).equal
        async with conn.transaction():
            await eventstore.append(conn, str(sid), [ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content="hi")])
        assert await conn.fetchval("SELECT message_count FROM public.sessions WHERE session_id = $1", sid) == 1
        assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname LIKE 'pg_temp%'") == 0
        assert (await rebuild.check(conn)).equal


async def test_rebuild_while_appends_run_loses_nothing_and_aborts_no_writer(pool: Pool) -> None:
    """Plain appends in a tight loop, and decisions that lock their session row first (as
    the harness and gateway do) with a little think time: every append succeeds."""
    stop = asyncio.Event()

    progress: dict[int, int] = {}

    async def writer(index: int, lock_row: bool) -> int:
        sid, seq = uuid4(), 0
        await append(pool, sid, ev.SessionCreated(session_id=sid, user_id="w", root_session_id=sid))
        while not stop.is_set():
            seq += 1
            progress[index] = seq
            events = [ev.MessageRecorded(message_id=uuid4(), seq=seq, role="USER", content=str(seq)),
                      ev.SessionPhaseChanged(phase="RUNNING")]
            if not lock_row:
                await append(pool, sid, *events)
                continue
            await asyncio.sleep(0.005)
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE", sid)
                await eventstore.append(conn, str(sid), events)
        return seq

    writers = [asyncio.create_task(writer(i, lock_row=i % 2 == 1)) for i in range(6)]

    async def all_writing() -> None:  # every writer is mid-stream before the rebuilds start
        while len(progress) < 6 or min(progress.values()) < 3:
            await asyncio.sleep(0.005)

    await asyncio.wait_for(all_writing(), 30)
    for _ in range(3):
        async with pool.acquire() as conn:
            await rebuild.rebuild(conn, lock_within=30)
    stop.set()
    assert all(n > 0 for n in await asyncio.gather(*writers))
    async with pool.acquire() as conn:
        assert (await rebuild.check(conn)).equal


@pytest.mark.slow
async def test_rebuild_throughput_on_a_50k_event_log(postgres_server_url: str) -> None:
    sessions, rounds, per_append = 500, 10, 10  # 50k events, runs of 10 interleaved
    async with fresh_database(postgres_server_url) as big:
        ids = [uuid4() for _ in range(sessions)]

        async def fill(chunk: list[UUID]) -> None:
            async with big.acquire() as conn:
                for sid in chunk:
                    async with conn.transaction():
                        await eventstore.append(conn, str(sid), [
                            ev.SessionCreated(session_id=sid, user_id="u", root_session_id=sid)])
                for r in range(rounds):
                    for sid in chunk:
                        base = r * per_append - (1 if r else 0)
                        batch = [ev.MessageRecorded(message_id=uuid4(), seq=base + i + 1, role="ASSISTANT",
                                                    content="x" * 200, usage=ev.TokenUsage(prompt_tokens=i))
                                 for i in range(per_append - (1 if r == 0 else 0))]
                        async with conn.transaction():
                            await eventstore.append(conn, str(sid), batch)

        await asyncio.gather(*(fill(ids[i::8]) for i in range(8)))
        total = await big.fetchval("SELECT count(*) FROM events")
        assert total == sessions * rounds * per_append
        async with big.acquire() as conn:
            started = time.monotonic()
            report = await rebuild.rebuild(conn)
            print(f"\nrebuild: {report.events} events in {report.seconds:.2f}s = {report.events_per_second:.0f} events/s")
            checked = await rebuild.check(conn)
            print(f"check: {checked.events} events replayed in {checked.seconds:.2f}s = "
                  f"{checked.events_per_second:.0f} events/s; both {time.monotonic() - started:.2f}s")
        assert report.events == total and report.rows["messages"] == total - sessions
        assert checked.equal
