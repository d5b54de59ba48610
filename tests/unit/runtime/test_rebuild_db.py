"""Projection rebuild and check against fresh migrated databases (invariant 7): the live
projections equal a replay of the log; a corrupted row is detected and restored."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store import eventstore, rebuild
from muster_runtime.store.rebuild import PROJECTION_TABLES

from tests.databases import fresh_database_url, uows
from tests.unit.runtime import twin_streams
from tests.unit.runtime.twin_streams import History, play


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


async def delegated_turn(pool: Pool) -> dict[str, UUID]:
    """The twin's delegated turn (`twin_streams.delegated_turn`), decisions of one and of
    many events, with side tasks forked and promoted: every projection table gets rows."""
    history = History()
    ids = twin_streams.delegated_turn(history)
    twin_streams.side_tasks(history, ids["parent"], skipped=[ids["stale"]])
    await play(uows(pool), history)
    return ids


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
async def test_rebuild_of_an_interleaved_10k_event_log(postgres_server_url: str) -> None:
    # Correctness at some scale; its speed is measured by `make bench` (bench/rebuild.py).
    sessions, rounds, per_append = 100, 10, 10  # 10k events, runs of 10 interleaved
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
