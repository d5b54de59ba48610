"""Side-task figures (issue 10): p50 of a fork of 5,000 messages, of the recursive listing
of 500 side tasks ten levels deep, and of `GET /v1/sessions` with tree signals for 200
trees (the route's query, without HTTP).

    .venv/bin/python -m bench.side_tasks [--repeat 21]

Creates a throw-away database (on the server of $DATABASE_URL, else on an embedded
PostgreSQL started for the run); everything is written through the gateway's own
decisions and events, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_gateway import queries, side_sessions, tree_queries
from muster_gateway.protocol import CreateSideSessionData
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store import eventstore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from bench.rebuild_speed import postgres_server, throwaway_database

USER = "bench"


async def _append(pool: Pool, stream: UUID, events: list[ev.DomainEvent]) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(stream), events)


async def _main_session(pool: Pool, messages: int = 0) -> UUID:
    sid = uuid4()
    await _append(pool, sid, [ev.SessionCreated(session_id=sid, user_id=USER, root_session_id=sid)])
    for first in range(1, messages + 1, 1000):
        batch: list[ev.DomainEvent] = [
            ev.MessageRecorded(
                message_id=uuid4(),
                seq=seq,
                role="USER" if seq % 2 else "ASSISTANT",
                content=f"message {seq} " + "lorem ipsum " * 20,
            )
            for seq in range(first, min(first + 1000, messages + 1))
        ]
        await _append(pool, sid, batch)
    return sid


async def _side(pool: Pool, source: UUID, mode: str = "none") -> UUID:
    data = CreateSideSessionData(content="side", contextMode=mode)  # type: ignore[arg-type]
    return UUID((await side_sessions.create_side_session(partial(PostgresUnitOfWork, pool), USER, str(source), data))["sessionId"])


async def _p50(repeat: int, action: Callable[[], Awaitable[Any]]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(pool: Pool, repeat: int) -> dict[str, float]:
    source = await _main_session(pool, 5000)
    fork_ms = await _p50(repeat, lambda: _side(pool, source, "fork"))

    root = await _main_session(pool)
    level = [root]
    for _ in range(10):  # 10 levels of 50 side tasks, each level's spread over the previous one
        level = [await _side(pool, level[i % len(level)]) for i in range(50)]
    listed = await tree_queries.list_side_tasks(pool, USER, str(root), True)
    assert len(listed) == 500, len(listed)
    listing_ms = await _p50(repeat, lambda: tree_queries.list_side_tasks(pool, USER, str(root), True))

    for _ in range(200 - 2):  # 200 trees in all, each with a side task and one below it
        tree = await _main_session(pool)
        await _side(pool, await _side(pool, tree))
    items = await queries.list_sessions(pool, USER, "NORMAL", 200)
    assert len(items) == 200 and all("treeRunning" in i for i in items)
    sessions_ms = await _p50(repeat, lambda: queries.list_sessions(pool, USER, "NORMAL", 200))
    return {
        "fork_5000_p50_ms": fork_ms,
        "recursive_500_p50_ms": listing_ms,
        "sessions_200_p50_ms": sessions_ms,
    }


async def main(repeat: int) -> None:
    async with postgres_server() as server, throwaway_database(server) as url:
        pool = await create_pool(url)
        try:
            figures = await measure(pool, repeat)
        finally:
            await pool.close()
    for name, value in figures.items():
        print(f"{name}: {value:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=21)
    asyncio.run(main(parser.parse_args().repeat))
