"""The adaptive fetch wait: fast while records flow, slow once idle, fast again at once; and
the switch that turns the local broker's tuning off with a real Kafka."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from faststream.kafka import KafkaBroker
from muster_runtime.messaging.consumer import ServiceBroker, ServiceConsumer
from muster_runtime.messaging.local_broker import tuning
from muster_runtime.messaging.local_broker.fetching import (
    BEHIND_MS,
    AdaptiveConsumer,
    FetchWait,
    adaptive_builder,
)
from muster_runtime.process.settings import Settings

from tests.unit.runtime.fakes import Clock


def test_a_new_consumer_polls_fast_then_slows_down_when_nothing_arrives() -> None:
    wait = FetchWait(5, 100, 2.0, now=10.0)
    assert wait.observe(0, 10.5) == 5
    assert wait.observe(0, 11.99) == 5
    assert wait.observe(0, 12.0) == 100
    assert wait.observe(0, 60.0) == 100


def test_records_bring_the_fast_wait_back_at_once_and_keep_it_for_the_idle_period() -> None:
    wait = FetchWait(5, 100, 2.0, now=0.0)
    assert wait.observe(0, 30.0) == 100
    assert wait.observe(3, 30.1) == 5
    assert wait.observe(0, 31.0) == 5
    assert wait.observe(0, 32.1) == 100


def test_an_idle_wait_below_the_busy_one_changes_nothing() -> None:
    """Real Kafka: the busy wait is Kafka's 500 ms (it answers early when data arrives)."""
    wait = FetchWait(500, 100, 2.0, now=0.0)
    assert not wait.adaptive
    assert wait.observe(0, 100.0) == 500
    assert FetchWait(5, 5, 2.0).adaptive is False


async def test_getmany_waits_through_empty_slices_and_sets_the_fetchers_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    record = SimpleNamespace(offset=7)
    answers: list[dict[Any, list[Any]]] = [{}, {}, {}, {"tp": [record, record]}]
    seen_waits: list[int] = []

    async def scripted_getmany(self: AIOKafkaConsumer, *partitions: Any, **kwargs: Any) -> Any:
        seen_waits.append(self._fetcher._fetch_max_wait_ms)
        clock.now += 1.5  # each empty slice costs its timeout
        return answers.pop(0)

    monkeypatch.setattr(AIOKafkaConsumer, "getmany", scripted_getmany)
    consumer = AdaptiveConsumer(
        fetch_max_wait_ms=5, idle_fetch_max_wait_ms=150, idle_after_s=2.0, clock=clock
    )
    consumer._fetcher = SimpleNamespace(_fetch_max_wait_ms=5)

    batch = await consumer.getmany(timeout_ms=200, max_records=10)

    assert batch == {"tp": [record, record]}
    # busy at start, idle after 2 s without records, busy again as soon as records came
    assert seen_waits == [5, 5, 150, 150]
    assert consumer._fetcher._fetch_max_wait_ms == 5


async def test_getmany_without_a_timeout_returns_even_when_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    async def empty(self: AIOKafkaConsumer, *partitions: Any, **kwargs: Any) -> Any:
        return {}

    monkeypatch.setattr(AIOKafkaConsumer, "getmany", empty)
    consumer = AdaptiveConsumer(fetch_max_wait_ms=5, idle_fetch_max_wait_ms=150, idle_after_s=2.0)
    consumer._fetcher = SimpleNamespace(_fetch_max_wait_ms=5)
    assert await consumer.getmany(timeout_ms=0) == {}


async def test_the_builder_keeps_faststreams_options() -> None:
    builder = partial(AIOKafkaConsumer, bootstrap_servers="127.0.0.1:1", client_id="x")
    adapted = adaptive_builder(builder, idle_fetch_max_wait_ms=100, idle_after_s=2.0)
    consumer = adapted(group_id="g", fetch_max_wait_ms=5)
    assert isinstance(consumer, AdaptiveConsumer)
    assert consumer._client._bootstrap_servers == "127.0.0.1:1"
    assert consumer._group_id == "g"
    assert (consumer.fetch_wait.busy_ms, consumer.fetch_wait.idle_ms) == (5, 100)

    def other(**kwargs: Any) -> AIOKafkaConsumer:
        raise AssertionError

    assert adaptive_builder(other, idle_fetch_max_wait_ms=100, idle_after_s=2.0) is other


def _settings(**values: Any) -> Settings:
    return Settings(database_url="", kafka_bootstrap_servers="127.0.0.1:1", data_dir=Path("."), **values)


async def _built_consumer(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> AIOKafkaConsumer:
    from muster_runtime.messaging.kafka import consumer_options
    from muster_runtime.messaging.service import make_broker

    async def connect(self: KafkaBroker) -> Any:
        self.config.broker_config.builder = partial(AIOKafkaConsumer, bootstrap_servers="127.0.0.1:1")
        return self.config.broker_config.builder

    monkeypatch.setattr(KafkaBroker, "_connect", connect)
    broker = make_broker(settings, "test")
    assert isinstance(broker, ServiceBroker)
    builder = await broker._connect()
    assert builder is broker.config.broker_config.builder
    consumer: AIOKafkaConsumer = builder(group_id="g", **consumer_options(settings))
    return consumer


async def test_on_the_local_broker_service_brokers_build_adaptive_consumers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = _settings(local_broker=True, bells_dir=Path("/tmp/bells"))
    consumer = await _built_consumer(monkeypatch, settings)
    assert isinstance(consumer, AdaptiveConsumer)
    assert consumer.fetch_wait.busy_ms == settings.kafka_fetch_max_wait_ms
    assert consumer._fetch_max_wait_ms == settings.kafka_fetch_max_wait_ms
    assert consumer.fetch_wait.idle_ms == settings.kafka_idle_fetch_max_wait_ms
    assert consumer.fetch_wait.idle_after_s == settings.kafka_idle_after_ms / 1000
    assert consumer._bells_dir == Path("/tmp/bells")


async def test_with_a_real_kafka_consumers_keep_aiokafkas_options_and_no_bells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The adapter is off: aiokafka's default fetch wait, a plain service consumer (its
    commits behind the next batch), no bells even if a directory is named."""
    settings = _settings(bells_dir=Path("/tmp/bells"), recovery_fetch_max_wait_ms=250)
    consumer = await _built_consumer(monkeypatch, settings)
    assert type(consumer) is ServiceConsumer
    assert consumer._fetch_max_wait_ms == 500  # aiokafka's default
    assert tuning.fetch_options(settings, backstop_ms=250) == {}
    assert tuning.bells_dir(settings) is None and tuning.publishers_ringer(settings) is None


def test_a_backstop_subscriber_waits_longer_on_the_local_broker_only() -> None:
    local = _settings(local_broker=True)
    assert tuning.fetch_options(local) == {"fetch_max_wait_ms": 5}
    assert tuning.fetch_options(local, backstop_ms=250) == {"fetch_max_wait_ms": 250}
    assert tuning.fetch_options(local, backstop_ms=1) == {"fetch_max_wait_ms": 5}


async def test_only_a_consumer_asked_to_catch_up_watches_how_late_its_records_are() -> None:
    builder = partial(AIOKafkaConsumer, bootstrap_servers="127.0.0.1:1")
    plain = adaptive_builder(builder, idle_fetch_max_wait_ms=100, idle_after_s=2.0)(fetch_max_wait_ms=5)
    catching = adaptive_builder(builder, idle_fetch_max_wait_ms=100, idle_after_s=2.0, catch_up=True)(
        fetch_max_wait_ms=5
    )
    assert isinstance(plain, AdaptiveConsumer) and isinstance(catching, AdaptiveConsumer)
    assert plain.lateness is None
    assert catching.lateness is not None and catching.lateness.after_ms == BEHIND_MS
