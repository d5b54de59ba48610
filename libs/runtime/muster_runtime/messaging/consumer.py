"""The services' Kafka consumer, whatever the broker: offset commits behind the next batch
(`commits.CommitBehind`), and a batch `getmany` that returns only records.

FastStream's batch loop sleeps `batch_timeout_ms` after an empty `getmany`, so a record
arriving during that sleep waited for it (up to 200 ms, with any broker). `getmany` with a
timeout here keeps waiting, in `timeout_ms` slices, until records arrive; between slices a
subclass may re-decide its fetching (`after_getmany`: the local broker's idle wait).
Stopping is unaffected: FastStream cancels the consume task, and a stopped consumer raises
`ConsumerStoppedError`.

FastStream creates every subscriber's consumer through the broker config's `builder` (a
`partial(AIOKafkaConsumer, ...)` set when the broker connects). `ServiceBroker` swaps that
builder for one making this class (or the local broker's subclass) with the same options.
No FastStream or aiokafka code is patched.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from aiokafka import AIOKafkaConsumer
from faststream.kafka import KafkaBroker

from muster_runtime.messaging.commits import CommitBehind


class ServiceConsumer(CommitBehind):
    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[Any, list[Any]]:
        while True:
            batch: dict[Any, list[Any]] = await super().getmany(
                *partitions, timeout_ms=timeout_ms, max_records=max_records
            )
            self.after_getmany(batch)
            if batch or timeout_ms <= 0:
                return batch

    def after_getmany(self, batch: dict[Any, list[Any]]) -> None:
        """Called after every slice, before yielding to the loop (so before the fetcher's
        next request is built)."""


def consumer_builder(
    builder: Callable[..., AIOKafkaConsumer], consumer: type[ServiceConsumer], **extra: Any
) -> Callable[..., AIOKafkaConsumer]:
    """FastStream's consumer factory, making `consumer`s with the same options (and `extra`)."""
    if not isinstance(builder, partial) or builder.func is not AIOKafkaConsumer:
        return builder  # not the factory we know: leave it alone
    return partial(consumer, *builder.args, **extra, **builder.keywords)


class ServiceBroker(KafkaBroker):
    """A `KafkaBroker` whose subscribers consume through `consumer` (built with `extra`)."""

    def __init__(
        self,
        *args: Any,
        consumer: type[ServiceConsumer] = ServiceConsumer,
        consumer_extra: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._consumer = consumer
        self._consumer_extra = dict(consumer_extra or {})

    async def _connect(self) -> Callable[..., AIOKafkaConsumer]:
        builder = await super()._connect()
        adapted = consumer_builder(builder, self._consumer, **self._consumer_extra)
        if adapted is not builder:
            # Subscribers read the config's builder when they start, after connecting.
            self.config.broker_config.builder = adapted
        return adapted
