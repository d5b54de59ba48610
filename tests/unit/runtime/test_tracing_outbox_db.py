"""The trace context survives the outbox: a command's row keeps the `traceparent` of the span
that enqueued it and an append's events keep it in their metadata, so the writer's publish
after commit and the relay's later one send the same Kafka headers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest
from muster_contracts.commands import ProcessSession
from muster_contracts.events import SessionCreated
from muster_runtime.messaging import dispatch, outbox
from muster_runtime.process import tracing
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store import lineage
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.databases import fresh_database_url


@pytest.fixture
async def database(postgres_server_url: str) -> AsyncIterator[tuple[str, Pool]]:
    async with fresh_database_url(postgres_server_url, "tracing") as url:
        pool: Any = await create_pool(url)
        yield url, pool
        await pool.close()


class Producer:
    """Records (topic, value, headers) of each send; or fails every send (broker down)."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, bytes, Any]] = []
        self.fail = fail

    async def send(self, topic: str, value: bytes, key: bytes, headers: Any = None) -> asyncio.Future[None]:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.sent.append((topic, value, headers))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


async def decide(pool: Pool, producer: Producer) -> tuple[str | None, ProcessSession, lineage.Lineage]:
    """One decision inside a consumer's span: an append and a command."""
    cause = lineage.Lineage(uuid4(), uuid4())
    session_id = uuid4()
    command = ProcessSession(session_id=uuid4())
    dispatch.install(dispatch.Dispatcher(producer, pool))
    try:
        with tracing.span("process RunExecution"), lineage.caused_by(cause):
            async with PostgresUnitOfWork(pool) as uow:
                created = SessionCreated(session_id=session_id, user_id="u", root_session_id=session_id)
                await uow.append(str(session_id), [created], expected_version=0)
                await uow.send("muster.commands", "k", command)
            context = tracing.traceparent()
    finally:
        dispatch.install(None)
    return context, command, cause


def by_topic(records: list[tuple[str, bytes, Any]]) -> dict[str, tuple[dict[str, Any], Any]]:
    return {topic: (json.loads(value), headers) for topic, value, headers in records}


async def test_the_writer_publishes_the_trace_context_in_the_headers(
    database: tuple[str, Pool], spans: InMemorySpanExporter
) -> None:
    _, pool = database
    producer = Producer()
    context, _, cause = await decide(pool, producer)
    assert context is not None
    sent = by_topic(producer.sent)
    assert sent["muster.commands"][1] == [("traceparent", context.encode())]
    assert sent["muster.events"][1] == [("traceparent", context.encode())]
    body = sent["muster.commands"][0]
    assert (body["correlation_id"], body["causation_id"]) == (str(cause.correlation_id), str(cause.causation_id))
    event = sent["muster.events"][0]
    assert event["metadata"]["traceparent"] == context
    assert event["metadata"]["correlation_id"] == str(cause.correlation_id)


async def test_the_relay_sends_the_same_headers_after_the_writer_failed(
    database: tuple[str, Pool], spans: InMemorySpanExporter
) -> None:
    url, pool = database
    context, command, _ = await decide(pool, Producer(fail=True))  # rows stay in the outbox
    assert context is not None
    assert await pool.fetchval("SELECT trace_context FROM outbox WHERE payload IS NOT NULL") == context
    published: list[tuple[str, bytes, Any]] = []

    async def publish(batch: list[outbox.Record]) -> None:
        published.extend((topic, value, headers) for topic, _, value, headers in batch)

    assert await outbox.OutboxRelay(pool, url, publish, grace_s=0).drain() == 2
    sent = by_topic(published)
    assert sent["muster.commands"][1] == [("traceparent", context.encode())]
    assert sent["muster.events"][1] == [("traceparent", context.encode())]
    assert sent["muster.commands"][0]["message_id"] == str(command.message_id)


async def test_off_no_context_is_stored_or_sent(database: tuple[str, Pool]) -> None:
    _, pool = database
    producer = Producer()
    context, _, _ = await decide(pool, producer)
    assert context is None
    assert [headers for _, _, headers in producer.sent] == [None, None]
    event = by_topic(producer.sent)["muster.events"][0]
    assert "traceparent" not in event["metadata"]
