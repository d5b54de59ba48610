"""The harness subscriber in memory (TestKafkaBroker): poison goes to the dead-letter
topic and the consumer carries on; valid commands reach their handler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from faststream.kafka import TestKafkaBroker
from muster_contracts.commands import CancelSession
from muster_harness import bootstrap
from muster_runtime.messaging import topics
from muster_runtime.process.settings import Settings


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes | None]] = []

    async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None) -> None:
        self.sent.append((topic, value, key))


class FakeRunners:
    def __init__(self) -> None:
        self.cancelled: list[Any] = []

    def cancel(self, key: Any) -> bool:
        self.cancelled.append(key)
        return True


@pytest.fixture
def harness(tmp_path: Path) -> bootstrap.Harness:
    settings = Settings(database_url="", kafka_bootstrap_servers="", data_dir=tmp_path)
    built = bootstrap.build(settings)
    built.edge.producer = FakeProducer()  # type: ignore[assignment]
    built.deps = bootstrap.HarnessDeps(loop=None, runners=FakeRunners(), lease_ttl_s=10)  # type: ignore[arg-type]
    return built


async def test_invalid_command_is_dead_lettered(harness: bootstrap.Harness) -> None:
    async with TestKafkaBroker(harness.broker) as broker:
        await broker.publish(b'{"type": "ProcessSession", "session_id": "not-a-uuid"}', topic=topics.COMMANDS, key=b"k")
        await broker.publish(b"{not json", topic=topics.COMMANDS, key=b"k2")
    sent = harness.edge.producer.sent  # type: ignore[union-attr]
    assert [topic for topic, _, _ in sent] == [topics.DEAD_LETTERS, topics.DEAD_LETTERS]
    first = json.loads(sent[0][1])
    assert first["source_topic"] == topics.COMMANDS
    assert first["consumer"] == "harness"
    assert "session_id" in first["error"]
    assert first["raw"].startswith('{"type": "ProcessSession"')
    assert sent[1][2] == b"k2"


async def test_valid_command_reaches_its_handler_after_poison(harness: bootstrap.Harness) -> None:
    command = CancelSession(session_id=uuid4())
    async with TestKafkaBroker(harness.broker) as broker:
        await broker.publish(b"garbage", topic=topics.COMMANDS)
        await broker.publish(command.model_dump_json().encode(), topic=topics.COMMANDS)
    assert harness.deps is not None
    assert harness.deps.runners.cancelled == [command.session_id]  # type: ignore[attr-defined]
