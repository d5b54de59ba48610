"""The outbox relay against a fresh migrated PostgreSQL: the leader publishes in commit
order; a leader that hangs without dying (it keeps its lock) is bypassed by a standby."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import pytest
from muster_contracts.commands import ProcessSession
from muster_runtime.messaging import dispatch, outbox
from muster_runtime.messaging.local_broker.bells import Bell, Ringer
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from tests.databases import fresh_database_url
from tests.unit.runtime.fakes import Producer


@pytest.fixture
async def database(postgres_server_url: str) -> AsyncIterator[tuple[str, Pool]]:
    async with fresh_database_url(postgres_server_url, "outbox") as url:
        pool: Any = await create_pool(url)
        yield url, pool
        await pool.close()


class Published:
    def __init__(self, want: int) -> None:
        self.messages: list[tuple[str, bytes, bytes, object]] = []
        self.want = want
        self.done = asyncio.Event()

    async def __call__(self, batch: list[tuple[str, bytes, bytes, object]]) -> None:
        self.messages += batch
        if len(self.messages) >= self.want:
            self.done.set()


async def enqueue(pool: Pool, count: int) -> list[str]:
    commands = [ProcessSession(session_id=uuid4()) for _ in range(count)]
    for command in commands:
        async with pool.acquire() as conn, conn.transaction():
            await outbox.enqueue(conn, "muster.commands", "k", command)
    return [str(c.message_id) for c in commands]


async def relayed(url: str, pool: Pool, want: int) -> Published:
    published = Published(want)
    relay = outbox.OutboxRelay(pool, url, published)
    task = asyncio.create_task(relay.run())
    try:
        await asyncio.wait_for(published.done.wait(), 30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return published


def ids(published: Published) -> list[str]:
    return [json.loads(body)["message_id"] for _, _, body, _ in published.messages]


async def test_the_leader_publishes_in_commit_order_and_empties_the_outbox(database: tuple[str, Pool]) -> None:
    url, pool = database
    sent = await enqueue(pool, 5)
    published = Published(5)
    assert await outbox.OutboxRelay(pool, url, published, batch=2).drain() == 5
    assert ids(published) == sent
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 0


async def test_a_standby_drains_what_a_hung_leader_holds_back(database: tuple[str, Pool]) -> None:
    url, pool = database
    hung = await asyncpg.connect(url)  # a leader that stopped without dying: its lock stays
    try:
        assert await hung.fetchval("SELECT pg_try_advisory_lock($1)", outbox.LEADER_LOCK_KEY)
        sent = await enqueue(pool, 3)
        await pool.execute("UPDATE outbox SET created_at = now() - interval '1 minute'")
        published = await relayed(url, pool, 3)
    finally:
        await hung.close()
    assert ids(published) == sent


async def test_a_unit_of_work_publishes_its_rows_after_commit_and_deletes_them(
    database: tuple[str, Pool],
) -> None:
    _, pool = database
    producer = Producer()
    dispatcher = dispatch.Dispatcher(producer, pool, flush_every_s=0)
    dispatch.install(dispatcher)
    cleanup = asyncio.create_task(dispatcher.run())
    try:
        command = ProcessSession(session_id=uuid4())
        async with PostgresUnitOfWork(pool) as uow:
            await uow.send("muster.commands", "k", command)
            assert producer.sent == []  # nothing leaves before the commit
        assert [json.loads(v)["message_id"] for v in producer.sent] == [str(command.message_id)]
        await dispatcher.close()
        assert await pool.fetchval("SELECT count(*) FROM outbox") == 0
    finally:
        dispatch.install(None)
        cleanup.cancel()


async def test_the_dispatcher_rings_the_topic_once_the_broker_has_the_rows(
    database: tuple[str, Pool], bells_dir: Path
) -> None:
    _, pool = database
    ringer = Ringer(bells_dir)
    bell = Bell.open(bells_dir, ["muster.commands"])
    dispatcher = dispatch.Dispatcher(Producer(), pool, flush_every_s=0, ringer=ringer)
    dispatch.install(dispatcher)
    cleanup = asyncio.create_task(dispatcher.run())
    try:
        async with PostgresUnitOfWork(pool) as uow:
            await uow.send("muster.commands", "k", ProcessSession(session_id=uuid4()))
        await asyncio.wait_for(bell.wait_beyond(0, timeout_s=30), 5)  # unrung: a timeout
        assert bell.rings == 1
        await dispatcher.close()
    finally:
        dispatch.install(None)
        cleanup.cancel()
        bell.close()
        ringer.close()


async def test_the_relay_leaves_claimed_rows_to_their_writer_until_the_grace_period_ends(
    database: tuple[str, Pool],
) -> None:
    url, pool = database
    dispatch.install(dispatch.Dispatcher(Producer(fail=True), pool))  # the writer cannot publish
    try:
        async with PostgresUnitOfWork(pool) as uow:
            await uow.send("muster.commands", "k", ProcessSession(session_id=uuid4()))
    finally:
        dispatch.install(None)
    assert await pool.fetchval("SELECT claimed FROM outbox") is True
    published = Published(1)
    relay = outbox.OutboxRelay(pool, url, published, grace_s=30)
    assert await relay.drain() == 0  # young and claimed: its writer may still publish it
    await pool.execute("UPDATE outbox SET created_at = now() - interval '31 seconds'")
    assert await relay.drain() == 1  # the writer is gone: the outbox guarantees it
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 0
