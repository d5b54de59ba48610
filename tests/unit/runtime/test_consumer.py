"""The services' consumer with any broker: `getmany` with a timeout waits through empty
slices (FastStream's batch loop would sleep after an empty one), and without the local
broker's adapter it never touches the fetcher."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from muster_runtime.messaging.consumer import ServiceConsumer


async def test_getmany_waits_through_empty_slices_and_leaves_the_fetcher_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = SimpleNamespace(offset=3)
    answers: list[dict[Any, list[Any]]] = [{}, {}, {"tp": [record]}]
    timeouts: list[int] = []

    async def scripted_getmany(self: AIOKafkaConsumer, *partitions: Any, timeout_ms: int = 0, **kw: Any) -> Any:
        timeouts.append(timeout_ms)
        return answers.pop(0)

    monkeypatch.setattr(AIOKafkaConsumer, "getmany", scripted_getmany)
    consumer = ServiceConsumer(bootstrap_servers="127.0.0.1:1")
    # A fetcher with no attributes at all: any read or write of one would raise.
    consumer._fetcher = object()

    assert await consumer.getmany(timeout_ms=200, max_records=10) == {"tp": [record]}
    assert timeouts == [200, 200, 200]


async def test_getmany_without_a_timeout_returns_even_when_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    async def empty(self: AIOKafkaConsumer, *partitions: Any, **kwargs: Any) -> Any:
        return {}

    monkeypatch.setattr(AIOKafkaConsumer, "getmany", empty)
    assert await ServiceConsumer(bootstrap_servers="127.0.0.1:1").getmany(timeout_ms=0) == {}
