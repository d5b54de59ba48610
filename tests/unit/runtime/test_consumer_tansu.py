"""The services' consumer against the local broker: fast while records flow, slow when
idle, fast again with the next record, and every handled batch committed by `stop`; with a
bell, quiet until rung, and a record nobody rings for still arrives."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from muster_launcher.broker import tansu_binary
from muster_runtime.messaging.local_broker.bells import Bell, Ringer
from muster_runtime.messaging.local_broker.fetching import AdaptiveConsumer, adaptive_builder

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


async def _create_topic(bootstrap: str) -> None:
    admin = await _started(AIOKafkaAdminClient, bootstrap_servers=bootstrap)
    await admin.create_topics([NewTopic(TOPIC, 2, 1)])  # type: ignore[attr-defined]
    await admin.close()  # type: ignore[attr-defined]


def _consumer(bootstrap: str, group: str = "g", **bells: Any) -> AdaptiveConsumer:
    build = adaptive_builder(
        partial(AIOKafkaConsumer, bootstrap_servers=bootstrap),
        idle_fetch_max_wait_ms=150,
        idle_after_s=0.3,
        **bells,
    )
    consumer = build(
        group_id=group,
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
    await _create_topic(tansu)
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


def _belled_consumer(bootstrap: str, bells_dir: Path, fallback_s: float, **bells: Any) -> AdaptiveConsumer:
    return _consumer(bootstrap, "belled", bells_dir=bells_dir, bell_fallback_s=fallback_s, **bells)


def _counting_fetches(consumer: AdaptiveConsumer) -> list[float]:
    """The times of the fetch requests the consumer sends from now on."""
    sent: list[float] = []
    client = consumer._client
    send = client.send

    async def counted(node_id: Any, request: Any, **kwargs: Any) -> Any:
        if type(request).__name__.startswith("FetchRequest"):
            sent.append(time.monotonic())
        return await send(node_id, request, **kwargs)

    client.send = counted
    return sent


async def _next_values(consumer: AdaptiveConsumer, within_s: float) -> list[bytes]:
    batch = await asyncio.wait_for(consumer.getmany(timeout_ms=100), within_s)
    return [r.value for records in batch.values() for r in records]


async def test_a_belled_consumer_fetches_when_rung_and_not_while_quiet(tansu: str, bells_dir: Path) -> None:
    await _create_topic(tansu)
    producer: AIOKafkaProducer = await _started(AIOKafkaProducer, bootstrap_servers=tansu)  # type: ignore[assignment]
    ringer = Ringer(bells_dir, ttl_s=0.0)
    # A fallback far beyond the test's waits: a record comes quickly only if rung.
    consumer = _belled_consumer(tansu, bells_dir, fallback_s=60.0)
    try:
        await consumer.start()
        assert consumer.bell is not None
        [bound] = (bells_dir / TOPIC).iterdir()
        assert bound.name.startswith(f"{os.getpid()}.")
        await producer.send_and_wait(TOPIC, b"first", key=b"k")
        ringer.ring([TOPIC])
        assert await _next_values(consumer, 20) == [b"first"]

        # Quiet: after a short chase the fetcher waits for the bell, sending nothing.
        fetches = _counting_fetches(consumer)
        quiet = asyncio.ensure_future(consumer.getmany(timeout_ms=100))
        await asyncio.sleep(1.0)
        assert not quiet.done()
        assert len(fetches) <= 10  # polling at 5 ms would be about 200

        await producer.send_and_wait(TOPIC, b"rung", key=b"k")
        ringer.ring([TOPIC])
        batch = await asyncio.wait_for(quiet, 20)
        assert [r.value for records in batch.values() for r in records] == [b"rung"]
    finally:
        await consumer.stop()
        await producer.stop()
        ringer.close()
    assert list((bells_dir / TOPIC).iterdir()) == []  # stopping removes its socket


async def test_a_record_nobody_rings_for_arrives_after_the_fallback(tansu: str, bells_dir: Path) -> None:
    await _create_topic(tansu)
    producer: AIOKafkaProducer = await _started(AIOKafkaProducer, bootstrap_servers=tansu)  # type: ignore[assignment]
    consumer = _belled_consumer(tansu, bells_dir, fallback_s=0.2)
    try:
        await consumer.start()
        await producer.send_and_wait(TOPIC, b"unrung", key=b"k")  # a publisher without a ringer
        assert await _next_values(consumer, 20) == [b"unrung"]
    finally:
        await consumer.stop()
        await producer.stop()


async def test_a_filtering_consumer_is_woken_only_by_rings_naming_its_keys(tansu: str, bells_dir: Path) -> None:
    await _create_topic(tansu)
    producer: AIOKafkaProducer = await _started(AIOKafkaProducer, bootstrap_servers=tansu)  # type: ignore[assignment]
    ringer = Ringer(bells_dir, ttl_s=0.0)
    # What is checked is which rings the bell counts, not how soon a record comes: a short
    # fallback bounds the wait when a loaded machine lets the fetch on a ring miss its record.
    consumer = _belled_consumer(tansu, bells_dir, fallback_s=2.0, bell_relevant=lambda key: key == b"watched")
    try:
        await consumer.start()
        assert consumer.bell is not None
        await producer.send_and_wait(TOPIC, b"first", key=b"watched")
        ringer.ring_records([(TOPIC, b"watched")])
        assert await _next_values(consumer, 20) == [b"first"]
        rings = consumer.bell.rings

        # A ring naming only another key: a plain bell of the topic hears it, this one not.
        plain = Bell.open(bells_dir, [TOPIC])
        try:
            await producer.send_and_wait(TOPIC, b"other", key=b"other")
            ringer.ring_records([(TOPIC, b"other")])
            await asyncio.wait_for(plain.wait_beyond(0, timeout_s=30), 5)
        finally:
            plain.close()
        assert consumer.bell.rings == rings

        await producer.send_and_wait(TOPIC, b"watched", key=b"watched")
        ringer.ring_records([(TOPIC, b"watched")])
        seen: list[bytes] = []
        while b"watched" not in seen:  # "other" may come with it or before it
            seen += await _next_values(consumer, 20)
        assert consumer.bell.rings > rings
    finally:
        await consumer.stop()
        await producer.stop()
        ringer.close()
