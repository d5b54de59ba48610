"""Kafka plumbing shared by the services: consumer options tuned for the configured broker,
the relay's producer, and the dead-letter topic."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from aiokafka.partitioner import DefaultPartitioner, murmur2

from muster_runtime.messaging import topics
from muster_runtime.messaging.local_broker import tuning
from muster_runtime.messaging.local_broker.bells import Ringer
from muster_runtime.messaging.outbox import Publish, Record
from muster_runtime.process import retrying
from muster_runtime.process.settings import Settings

log = logging.getLogger("muster.kafka")


def consumer_options(settings: Settings, *, backstop_ms: int | None = None) -> dict[str, Any]:
    """Options for every FastStream subscriber. `earliest` because the local broker's
    "latest" offset answer is wrong; committed offsets make restarts resume correctly. The
    fetch wait is the local broker's tuning (`tuning.fetch_options`), none with Kafka."""
    return {
        "auto_offset_reset": "earliest",
        "session_timeout_ms": settings.kafka_session_timeout_ms,
        "heartbeat_interval_ms": settings.kafka_heartbeat_interval_ms,
        **tuning.fetch_options(settings, backstop_ms=backstop_ms),
    }


@functools.lru_cache(maxsize=65_536)
def _hashed(key: bytes) -> int:
    return int(murmur2(key)) & 0x7FFFFFFF


def keyed_partitioner(key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
    """aiokafka's default partitioner (murmur2 of the key, as Java clients do), with the
    hash of a key remembered: a session's id keys dozens of records a turn, and the hash
    is pure Python."""
    if key is None:
        return int(DefaultPartitioner()(key, all_partitions, available))
    return all_partitions[_hashed(key) % len(all_partitions)]


async def start_producer(settings: Settings, *, within_s: float = 60.0) -> AIOKafkaProducer:
    """Connect a producer, retrying with backoff while the broker is unreachable (it may
    be restarting), so a service waits for it instead of crash-looping."""

    async def connect() -> AIOKafkaProducer:
        # Idempotent/transactional producers are rejected by the local broker; consumers
        # are idempotent instead (processed-message tracking).
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap_servers,
            acks="all",
            linger_ms=0,
            enable_idempotence=False,
            max_request_size=8 * 1024 * 1024,
            partitioner=keyed_partitioner,
        )
        try:
            await producer.start()
        except KafkaConnectionError:
            await producer.stop()
            raise
        return producer

    policy = retrying.until_reachable(KafkaConnectionError, within_s=within_s, log=log)
    return await retrying.call(policy, connect)


def publisher(producer: AIOKafkaProducer, ringer: Ringer | None = None) -> Publish:
    async def publish(batch: list[Record]) -> None:
        futures = [
            await producer.send(topic, value, key=key, headers=headers)
            for topic, key, value, headers in batch
        ]
        await asyncio.gather(*futures)
        if ringer is not None:
            ringer.ring_records((topic, key) for topic, key, _, _ in batch)

    return publish


async def dead_letter(
    producer: AIOKafkaProducer,
    *,
    source_topic: str,
    consumer: str,
    raw: bytes,
    key: bytes | None,
    error: str,
) -> None:
    """Park a message that can never be processed, with the reason, and move on."""
    body = {
        "source_topic": source_topic,
        "consumer": consumer,
        "error": error[:2000],
        "key": key.decode(errors="replace") if key else None,
        "raw": raw.decode(errors="replace"),
    }
    await producer.send_and_wait(topics.DEAD_LETTERS, json.dumps(body).encode(), key=key)
    log.warning(
        "message_dead_lettered source_topic=%s consumer=%s error=%s",
        source_topic,
        consumer,
        error.splitlines()[0][:200] if error else "",
    )
