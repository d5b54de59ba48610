"""The thin edge of every Kafka subscriber: validate, dead-letter poison, then dispatch.

A message that fails validation goes to the dead-letter topic at once. A valid message
whose handler keeps failing is retried (the subscriber nacks, Kafka redelivers) up to
`max_attempts`, then dead-lettered too, so one bad message never stalls its partition.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer
from muster_contracts.envelope import Envelope
from muster_contracts.published import RecordedEvent
from pydantic import TypeAdapter, ValidationError

from muster_runtime.messaging.kafka import dead_letter
from muster_runtime.process import tracing
from muster_runtime.store import lineage

log = logging.getLogger("muster.edge")

T = TypeVar("T")


class Edge:
    def __init__(self, consumer: str, topic: str, *, max_attempts: int = 5):
        self.consumer = consumer
        self.topic = topic
        self.max_attempts = max_attempts
        self.producer: AIOKafkaProducer | None = None
        self._attempts: OrderedDict[tuple[Any, ...], int] = OrderedDict()

    async def handle(
        self,
        raw: bytes,
        key: bytes | None,
        adapter: TypeAdapter[T],
        dispatch: Callable[[T], Awaitable[None]],
        *,
        offset: tuple[Any, ...] = (),
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        try:
            message = adapter.validate_json(raw)
        except ValidationError as exc:
            await self._park(raw, key, f"invalid message: {exc}")
            return
        # What the handler writes is caused by this message and continues its trace.
        cause = lineage.enter(message if isinstance(message, Envelope | RecordedEvent) else None)
        try:
            if tracing.enabled():
                with self._span(message, key, headers):
                    await dispatch(message)
            else:
                await dispatch(message)
        except Exception as exc:
            attempts = self._count(offset or (raw,))
            if attempts >= self.max_attempts:
                log.exception("message_failed_permanently consumer=%s attempts=%d", self.consumer, attempts)
                await self._park(raw, key, f"handler failed {attempts} times: {type(exc).__name__}: {exc}")
                return
            log.warning(
                "message_failed consumer=%s attempt=%d error=%s", self.consumer, attempts, type(exc).__name__
            )
            raise
        finally:
            lineage.leave(cause)
        self._attempts.pop(offset or (raw,), None)

    def _span(
        self, message: object, key: bytes | None, headers: Sequence[tuple[str, bytes]]
    ) -> AbstractContextManager[Any]:
        metadata = message.metadata if isinstance(message, RecordedEvent) else {}
        return tracing.consumer_span(
            self.topic,
            str(getattr(message, "type", type(message).__name__)),
            headers,
            fallback=metadata.get(tracing.TRACEPARENT),
            attributes={
                "muster.consumer": self.consumer,
                "messaging.kafka.message.key": key.decode(errors="replace") if key else "",
            },
        )

    def _count(self, ident: tuple[Any, ...]) -> int:
        attempts = self._attempts.get(ident, 0) + 1
        self._attempts[ident] = attempts
        while len(self._attempts) > 10_000:
            self._attempts.popitem(last=False)
        return attempts

    async def _park(self, raw: bytes, key: bytes | None, error: str) -> None:
        if self.producer is None:
            raise RuntimeError("edge producer not started")
        await dead_letter(
            self.producer, source_topic=self.topic, consumer=self.consumer, raw=raw, key=key, error=error
        )
