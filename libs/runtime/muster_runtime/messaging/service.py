"""What every Kafka-consuming service is made of, so each composition root only says what
is its own: the broker, the shared resources of its lifespan, and batch subscribers that
validate at the edge before dispatching."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from pydantic import TypeAdapter

from muster_runtime.messaging import dispatch
from muster_runtime.messaging.consumer import ServiceBroker
from muster_runtime.messaging.consuming import BATCH_OPTIONS, per_key, records_of
from muster_runtime.messaging.dispatch import Dispatcher
from muster_runtime.messaging.edge import Edge
from muster_runtime.messaging.kafka import consumer_options, publisher, start_producer
from muster_runtime.messaging.local_broker import bells, tuning
from muster_runtime.messaging.outbox import OutboxRelay
from muster_runtime.process import retrying
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.process.settings import Settings
from muster_runtime.uow.batched import ClaimCoalescer, claims_coalescer
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

T = TypeVar("T")

log = logging.getLogger("muster.kafka")


class PatientKafkaBroker(ServiceBroker):
    """A broker whose start waits for an unreachable Kafka (it may be restarting) instead of
    failing the service's start, as `start_producer` does for our own producer."""

    connect_within_s = 60.0

    async def _connect(self) -> Callable[..., AIOKafkaConsumer]:
        async def connect() -> Callable[..., AIOKafkaConsumer]:
            try:
                return await super(PatientKafkaBroker, self)._connect()
            except KafkaConnectionError:
                with contextlib.suppress(Exception):
                    await self.config.disconnect()
                raise

        policy = retrying.until_reachable(KafkaConnectionError, within_s=self.connect_within_s, log=log)
        return await retrying.call(policy, connect)


def make_broker(
    settings: Settings,
    service: str,
    *,
    bell_relevant: bells.Relevant | None = None,
    catch_up: bool = False,
) -> KafkaBroker:
    # Our log format; FastStream's per-message lines only at DEBUG. No dependency injection:
    # typed handlers cost 2.5 times (a typed batch) to 16 times (per message) today's consuming per
    # record, and a typed batch cannot park one poison record (ADR 0036). Handlers take the
    # message itself (`the_message`) and validate at the edge.
    consumer, extra = tuning.consumer(settings, bell_relevant=bell_relevant, catch_up=catch_up)
    return PatientKafkaBroker(
        settings.kafka_bootstrap_servers or "localhost:9092",
        apply_types=False,
        logger=logging.getLogger(f"muster.{service}.kafka"),
        log_level=logging.DEBUG,
        consumer=consumer,
        consumer_extra=extra,
    )


async def the_message(msg: KafkaMessage) -> KafkaMessage:
    """A subscriber's decoder that hands its handler the message itself (with the raw
    records), not a decoded body: our handlers parse each record at the edge."""
    return msg


@dataclass
class Resources:
    pool: Pool
    producer: AIOKafkaProducer
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    claims: ClaimCoalescer = field(default_factory=claims_coalescer)

    def spawn(self, work: Awaitable[None]) -> None:
        self.tasks.append(asyncio.ensure_future(work))

    def uow(self) -> PostgresUnitOfWork:
        """A unit of work on this pool: the factory decisions take."""
        return PostgresUnitOfWork(self.pool, self.claims)


@contextlib.asynccontextmanager
async def resources(settings: Settings, *, pool_size: int = 10) -> AsyncIterator[Resources]:
    """Pool, producer and outbox relay for a lifespan; background tasks spawned on the
    result are cancelled before the producer and pool close."""
    pool = await create_pool(settings.database_url, max_size=pool_size)
    try:
        producer = await start_producer(settings)
    except BaseException:
        await pool.close()
        raise
    held = Resources(pool, producer)
    ringer = tuning.publishers_ringer(settings)
    dispatcher = Dispatcher(producer, pool, ringer=ringer)
    dispatch.install(dispatcher)
    held.spawn(dispatcher.run())
    held.spawn(OutboxRelay(pool, settings.database_url, publisher(producer, ringer)).run_forever())
    try:
        yield held
    finally:
        dispatch.install(None)
        for task in held.tasks:
            task.cancel()
        await asyncio.gather(*held.tasks, return_exceptions=True)
        await dispatcher.close()
        await producer.stop()
        await pool.close()
        if ringer is not None:
            ringer.close()


# What each batch subscriber validates its records with, by title. Its handler takes the
# raw batch, so FastStream cannot infer the payload; the AsyncAPI generator reads it here.
_RECEIVED: weakref.WeakKeyDictionary[KafkaBroker, dict[str, TypeAdapter[Any]]] = weakref.WeakKeyDictionary()


def received_payloads(broker: KafkaBroker) -> dict[str, TypeAdapter[Any]]:
    return dict(_RECEIVED.get(broker, {}))


def subscribe_batch(
    broker: KafkaBroker,
    settings: Settings,
    edge: Edge,
    *,
    group_id: str,
    adapter: TypeAdapter[T],
    dispatch: Callable[[T], Awaitable[None]],
    title: str,
    description: str,
    fetch_max_wait_ms: int | None = None,
    concerns: Callable[[bytes], bool] | None = None,
) -> Any:
    """A batch subscriber on `edge.topic`: one offset commit per batch, records of one key
    in order, poison to the dead-letter topic (see `Edge`). `fetch_max_wait_ms` is the
    local broker's wait for a subscriber whose latency does not matter; a record for which
    `concerns` says False is acknowledged without being validated or handled."""
    _RECEIVED.setdefault(broker, {})[title] = adapter
    options = consumer_options(settings, backstop_ms=fetch_max_wait_ms)

    @broker.subscriber(  # type: ignore[untyped-decorator]  # **options hide the typed overload
        edge.topic,
        group_id=group_id,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        decoder=the_message,
        title=title,
        description=description,
        **BATCH_OPTIONS,
        **options,
    )
    async def consume(msg: KafkaMessage) -> None:
        records = records_of(msg.raw_message)
        if concerns is not None:
            records = [record for record in records if record.value is None or concerns(record.value)]
        await per_key(
            records,
            lambda record: edge.handle(
                record.value,
                record.key,
                adapter,
                dispatch,
                offset=(record.topic, record.partition, record.offset),
                headers=record.headers or (),
            ),
        )

    return consume
