from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError
from muster_runtime.messaging.kafka import start_producer
from muster_runtime.process.settings import Settings


async def test_producer_start_retries_then_gives_up(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(database_url="", kafka_bootstrap_servers="127.0.0.1:1", data_dir=Path("."))
    with caplog.at_level(logging.WARNING, logger="muster.kafka"), pytest.raises(KafkaConnectionError):
        await start_producer(settings, within_s=0.5)
    retries = [r for r in caplog.records if r.getMessage().startswith("kafka_unreachable")]
    assert len(retries) >= 2


async def test_a_service_broker_waits_for_kafka_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """FastStream's own connection (its producer) is retried too: a service started while
    the broker restarts waits for it instead of exiting."""
    from faststream.kafka import KafkaBroker
    from muster_runtime.messaging.service import make_broker

    attempts: list[int] = []

    async def flaky_connect(self: KafkaBroker) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise KafkaConnectionError("unreachable")
        return "connected"

    monkeypatch.setattr(KafkaBroker, "_connect", flaky_connect)
    settings = Settings(database_url="", kafka_bootstrap_servers="127.0.0.1:1", data_dir=Path("."))
    broker = make_broker(settings, "test")
    assert await broker._connect() == "connected"
    assert len(attempts) == 3


async def test_a_service_broker_gives_up_after_its_wait() -> None:
    from muster_runtime.messaging.service import make_broker

    settings = Settings(database_url="", kafka_bootstrap_servers="127.0.0.1:1", data_dir=Path("."))
    broker = make_broker(settings, "test")
    broker.connect_within_s = 0.3  # type: ignore[attr-defined]
    with pytest.raises(KafkaConnectionError):
        await broker.connect()


def test_the_keyed_partitioner_places_keys_as_the_default_one_does() -> None:
    from uuid import uuid4

    from aiokafka.partitioner import DefaultPartitioner
    from muster_runtime.messaging.kafka import keyed_partitioner

    partitions = [0, 1, 2, 3]
    for key in [str(uuid4()).encode() for _ in range(200)] + [b"", b"k"]:
        expected = DefaultPartitioner()(key, partitions, partitions)
        assert keyed_partitioner(key, partitions, partitions) == expected
        assert keyed_partitioner(key, partitions[:3], partitions[:3]) == DefaultPartitioner()(key, [0, 1, 2], [])
    assert keyed_partitioner(None, partitions, [2]) == 2  # keyless: an available partition


async def test_the_relays_publisher_rings_the_topics_it_published_to(bells_dir: Path) -> None:
    from muster_runtime.messaging.kafka import publisher
    from muster_runtime.messaging.local_broker.bells import Bell, Ringer

    from tests.unit.runtime.fakes import Producer

    producer, ringer = Producer(), Ringer(bells_dir)
    commands, events = Bell.open(bells_dir, ["muster.commands"]), Bell.open(bells_dir, ["muster.events"])
    try:
        await publisher(producer, ringer)([("muster.commands", b"k", b"v", [])])  # type: ignore[arg-type]
        await asyncio.wait_for(commands.wait_beyond(0, timeout_s=30), 5)  # unrung: a timeout
        assert producer.sent == [b"v"]
        assert (commands.rings, events.rings) == (1, 0)
    finally:
        commands.close()
        events.close()
        ringer.close()
