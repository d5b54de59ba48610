"""The services' consumer against the local broker: fast while records flow, slow when
idle, fast again with the next record, and every handled batch committed by `stop`."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from functools import partial

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from muster_launcher.broker import tansu_binary
from muster_runtime.fetching import AdaptiveConsumer, adaptive_builder

TOPIC = "adaptive"


@pytest.fixture
def tansu() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


async def _started(make: object, *args: object, **kwargs: object) -> object:
    for _ in range(50):  # the broker takes a moment to listen
        try:
            client = make(*args, **kwargs)  # type: ignore[operator]
            await client.start()
            return client
        except Exception:
            await asyncio.sleep(0.1)
    raise RuntimeError("broker not reachable")


def _consumer(bootstrap: str) -> AdaptiveConsumer:
    build = adaptive_builder(
        partial(AIOKafkaConsumer, bootstrap_servers=bootstrap), idle_fetch_max_wait_ms=150, idle_after_s=0.3
    )
    consumer = build(
        group_id="g",
        fetch_max_wait_ms=5,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=2000,
        heartbeat_interval_ms=500,
    )
    assert isinstance(consumer, AdaptiveConsumer)
    consumer.subscribe(topics=[TOPIC])
    return consumer


async def test_adaptive_consumer_on_the_local_broker(tansu: str) -> None:
    admin = await _started(AIOKafkaAdminClient, bootstrap_servers=tansu)
    await admin.create_topics([NewTopic(TOPIC, 2, 1)])  # type: ignore[attr-defined]
    await admin.close()  # type: ignore[attr-defined]
    producer: AIOKafkaProducer = await _started(AIOKafkaProducer, bootstrap_servers=tansu)  # type: ignore[assignment]
    try:
        for i in range(50):
            await producer.send(TOPIC, b"x", key=str(i).encode())
        await producer.flush()

        consumer = _consumer(tansu)
        await consumer.start()
        got = 0
        while got < 50:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=100, max_records=7), 20)
            got += sum(map(len, batch.values()))
            await consumer.commit()
        assert consumer._fetcher._fetch_max_wait_ms == 5

        waiting = asyncio.ensure_future(consumer.getmany(timeout_ms=100, max_records=7))
        await asyncio.sleep(0.8)
        assert not waiting.done()  # empty slices do not return
        assert consumer._fetcher._fetch_max_wait_ms == 150  # idle
        sent_at = time.monotonic()
        await producer.send_and_wait(TOPIC, b"late", key=b"k")
        batch = await asyncio.wait_for(waiting, 5)
        assert [r.value for records in batch.values() for r in records] == [b"late"]
        assert time.monotonic() - sent_at < 1.0  # at most about one idle wait
        assert consumer._fetcher._fetch_max_wait_ms == 5  # busy again at once
        await consumer.commit()
        await consumer.stop()

        again = _consumer(tansu)
        await again.start()
        try:
            committed = [await again.committed(TopicPartition(TOPIC, p)) for p in (0, 1)]
            assert sum(c or 0 for c in committed) == 51
        finally:
            await again.stop()
    finally:
        await producer.stop()
