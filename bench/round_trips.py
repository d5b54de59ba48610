"""What one round trip costs in CPU on this machine, client and server together (issue 39).

    .venv/bin/python -m bench.round_trips [--count 3000]

On a fresh cluster (its own PostgreSQL and broker, the services idle):

- **PostgreSQL:** `SELECT 1` over the Unix socket the services use, one after another:
  the client's CPU (this process) and the backend's (found by `pg_backend_pid()`) per
  statement, and the same for `BEGIN` + `COMMIT` of an empty transaction.
- **Kafka:** one record produced and acknowledged (`linger_ms=0`), then fetched by a
  consumer waiting on it, one after another: this process's CPU (producer and consumer)
  and the broker's, per record.

A turn's round trips times these costs is a floor for what the design's messages cost,
before any work is done in them; `bench.statements` counts a turn's round trips.
It prints the figures and writes `bench-results/round-trips-<time>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg
import psutil
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench import report
from bench.cluster import ROOT, BenchCluster

TOPIC = "bench.round-trips"


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


class Meter:
    """CPU seconds of this process and of `other` over a block, and its wall time."""

    def __init__(self, other: psutil.Process) -> None:
        self.me = psutil.Process()
        self.other = other

    def __enter__(self) -> Meter:
        self.start = (cpu_s(self.me), cpu_s(self.other), time.perf_counter())
        return self

    def __exit__(self, *_: object) -> None:
        end = (cpu_s(self.me), cpu_s(self.other), time.perf_counter())
        self.client_s, self.server_s, self.wall_s = (b - a for a, b in zip(self.start, end, strict=True))

    def per(self, count: int) -> dict[str, float]:
        return {
            "client_cpu_us": round(self.client_s / count * 1e6, 1),
            "server_cpu_us": round(self.server_s / count * 1e6, 1),
            "wall_us": round(self.wall_s / count * 1e6, 1),
        }


async def postgres(url: str, count: int) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        backend = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
        for _ in range(200):
            await conn.fetchval("SELECT 1")
        with Meter(backend) as statement:
            for _ in range(count):
                await conn.fetchval("SELECT 1")
        with Meter(backend) as transaction:
            for _ in range(count):
                await conn.execute("BEGIN")
                await conn.execute("COMMIT")
    finally:
        await conn.close()
    return {"select_1": statement.per(count), "begin_commit": transaction.per(count)}


async def kafka(bootstrap: str, broker: psutil.Process, count: int) -> dict[str, Any]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=5, enable_auto_commit=False)
    await producer.start()
    await consumer.start()
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    # The topic is new: read it from its start, so no record is missed before the
    # consumer's position is first set.
    await consumer.seek_to_beginning(partition)
    waits: list[float] = []
    try:

        async def one() -> None:
            started = time.perf_counter()
            await producer.send_and_wait(TOPIC, b"x" * 200)
            while not await consumer.getmany(partition, timeout_ms=1000):
                pass
            waits.append((time.perf_counter() - started) * 1000)

        for _ in range(100):
            await one()
        waits.clear()
        with Meter(broker) as meter:
            for _ in range(count):
                await one()
    finally:
        await producer.stop()
        await consumer.stop()
    return {"produce_fetch": meter.per(count), "p50_ms": round(statistics.median(waits), 2)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with BenchCluster() as cluster:
        broker = cluster.processes()["tansu"][0]
        result: dict[str, Any] = {
            "postgres": await postgres(cluster.ready["database"], args.count),
            "kafka": await kafka(cluster.ready["kafka"], broker, args.count // 3),
        }
    result["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for system, figures in result.items():
        if isinstance(figures, dict):
            for name, value in figures.items():
                print(f"{system:8s} {name:14s} {value}")
    return result


def cli() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="PostgreSQL round trips (a third as many records)")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    return parser.parse_args()


if __name__ == "__main__":
    arguments = cli()
    path = report.write_json(asyncio.run(main(arguments)), Path(arguments.out), "round-trips")
    print(f"wrote {path}")
