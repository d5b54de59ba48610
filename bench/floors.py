"""The raw floors measured on the same broker and database as the workload: a Kafka
produce→consume→produce→consume round trip and a single PostgreSQL insert+commit."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def kafka_round_trip_ms(bootstrap: str, samples: int = 200, fetch_max_wait_ms: int = 5) -> list[float]:
    ping, pong = f"bench.ping.{uuid.uuid4().hex[:8]}", f"bench.pong.{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(ping, 1, 1), NewTopic(pong, 1, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    options = dict(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=fetch_max_wait_ms,
        session_timeout_ms=2000,
        heartbeat_interval_ms=500,
    )
    echo_in = AIOKafkaConsumer(ping, group_id=f"echo-{ping}", **options)
    back = AIOKafkaConsumer(pong, group_id=f"back-{pong}", **options)
    await asyncio.gather(producer.start(), echo_in.start(), back.start())

    async def echo() -> None:
        async for record in echo_in:
            await producer.send_and_wait(pong, record.value)

    echo_task = asyncio.create_task(echo())
    timings: list[float] = []
    try:
        for i in range(samples + 10):
            started = time.perf_counter()
            await producer.send_and_wait(ping, str(i).encode())
            await back.getone()
            if i >= 10:  # warm-up: group joins and metadata
                timings.append((time.perf_counter() - started) * 1000)
    finally:
        echo_task.cancel()
        await asyncio.gather(echo_in.stop(), back.stop(), producer.stop(), return_exceptions=True)
    return timings


async def postgres_commit_ms(database_url: str, samples: int = 500) -> list[float]:
    conn = await asyncpg.connect(database_url)
    try:
        # A logged table: a temporary one would skip the WAL flush that a real commit pays.
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id serial primary key, body text)")
        timings = []
        for _ in range(samples):
            started = time.perf_counter()
            async with conn.transaction():
                await conn.execute("INSERT INTO bench_commit (body) VALUES ('x')")
            timings.append((time.perf_counter() - started) * 1000)
        return timings
    finally:
        await conn.close()


def p50(values: list[float]) -> float:
    return statistics.median(values)
