"""Trace context across a Kafka hop, in memory: what a span injects into record headers the
consumer's span continues; the edge sets the lineage its handler's writes carry; with
tracing off nothing is added anywhere."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from uuid import uuid4

import pytest
from muster_contracts.commands import SESSION_COMMANDS, ProcessSession
from muster_contracts.events import SessionCreated
from muster_runtime.messaging.edge import Edge
from muster_runtime.process import tracing
from muster_runtime.process.settings import Settings
from muster_runtime.store import lineage
from muster_runtime.uow.memory_uow import MemoryStore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind


def created() -> tuple[str, list[SessionCreated]]:
    session_id = uuid4()
    return str(session_id), [SessionCreated(session_id=session_id, user_id="u", root_session_id=session_id)]


def test_a_consumer_span_continues_the_trace_of_the_headers(spans: InMemorySpanExporter) -> None:
    with tracing.server_span("ws send_message"):
        headers = tracing.headers(tracing.traceparent())
    assert headers is not None and headers[0][0] == "traceparent"
    with tracing.consumer_span("muster.commands", "ProcessSession", headers):
        with tracing.span("session loop"):
            pass
    loop, consumer, root = (
        next(s for s in spans.get_finished_spans() if s.name == name)
        for name in ("session loop", "process ProcessSession", "ws send_message")
    )
    assert root.parent is None and root.kind == SpanKind.SERVER
    assert consumer.kind == SpanKind.CONSUMER
    assert consumer.parent is not None and consumer.parent.span_id == root.context.span_id
    assert loop.parent is not None and loop.parent.span_id == consumer.context.span_id
    assert {s.context.trace_id for s in (root, consumer, loop)} == {root.context.trace_id}
    assert consumer.attributes is not None and consumer.attributes["messaging.destination.name"] == "muster.commands"


def test_an_event_without_header_continues_the_trace_in_its_metadata(spans: InMemorySpanExporter) -> None:
    with tracing.server_span("ws create_session"):
        context = tracing.traceparent()
    with tracing.consumer_span("muster.events", "ExecutionFinished", (), fallback=context):
        pass
    consumer, root = sorted(spans.get_finished_spans(), key=lambda s: s.name)
    assert consumer.context.trace_id == root.context.trace_id


def test_a_record_without_context_starts_a_trace_of_its_own(spans: InMemorySpanExporter) -> None:
    with tracing.consumer_span("muster.commands", "ProcessSession", ()):
        pass
    (span,) = spans.get_finished_spans()
    assert span.parent is None


def test_every_frame_span_is_a_root_even_inside_another_span(spans: InMemorySpanExporter) -> None:
    with tracing.span("outer"), tracing.server_span("ws cancel"):
        pass
    frame = next(s for s in spans.get_finished_spans() if s.name == "ws cancel")
    assert frame.parent is None


def test_off_nothing_is_traced_or_added() -> None:
    assert not tracing.enabled()
    with tracing.server_span("ws send_message"), tracing.span("x"):
        assert tracing.traceparent() is None
    assert tracing.headers(None) is None
    metadata = lineage.event_metadata({"user_id": "u"}, uuid4())
    assert set(metadata) == {"user_id", "correlation_id", "causation_id"}


async def test_the_edge_continues_the_trace_and_sets_the_lineage(spans: InMemorySpanExporter) -> None:
    turn = uuid4()
    command = ProcessSession(session_id=uuid4(), correlation_id=turn, causation_id=turn)
    with tracing.server_span("ws send_message"):
        headers = tracing.headers(tracing.traceparent())
    seen: list[tuple[lineage.Lineage | None, str | None]] = []

    async def handle(message: object) -> None:
        seen.append((lineage.current(), tracing.traceparent()))

    edge = Edge("harness", "muster.commands")
    await edge.handle(command.model_dump_json().encode(), b"k", SESSION_COMMANDS, handle, headers=headers or ())
    assert seen[0][0] == lineage.Lineage(turn, command.message_id)
    consumer = next(s for s in spans.get_finished_spans() if s.name == "process ProcessSession")
    root = next(s for s in spans.get_finished_spans() if s.name == "ws send_message")
    assert consumer.context.trace_id == root.context.trace_id
    assert seen[0][1] is not None and f"{consumer.context.span_id:016x}" in seen[0][1]
    assert lineage.current() is None  # reset after the handler


async def test_what_a_handler_writes_carries_its_lineage_and_trace(spans: InMemorySpanExporter) -> None:
    store = MemoryStore()
    cause = ProcessSession(session_id=uuid4(), correlation_id=uuid4())
    with tracing.span("process ProcessSession"), lineage.caused_by(lineage.of_message(cause)):
        async with store.uow() as uow:
            stream_id, events = created()
            await uow.append(stream_id, events, expected_version=0)
            await uow.send("muster.delegations", "k", ProcessSession(session_id=uuid4()))
            stored = await uow.read_stream(stream_id)
        context = tracing.traceparent()
    meta = stored[0].metadata
    assert meta["correlation_id"] == str(cause.correlation_id)
    assert meta["causation_id"] == str(cause.message_id)
    assert meta["traceparent"] == context
    (_, _, sent), = store.sent
    assert (sent.correlation_id, sent.causation_id) == (cause.correlation_id, cause.message_id)


async def test_a_message_without_cause_is_its_own_correlation_and_cause() -> None:
    store = MemoryStore()
    async with store.uow() as uow:
        stream_id, events = created()
        await uow.append(stream_id, events, expected_version=0)
        await uow.send("muster.commands", "k", ProcessSession(session_id=uuid4()))
        stored = await uow.read_stream(stream_id)
    assert stored[0].metadata["correlation_id"] == stored[0].metadata["causation_id"] == str(stored[0].event_id)
    (_, _, sent), = store.sent
    assert sent.correlation_id == sent.causation_id == sent.message_id


def test_a_command_body_is_filled_from_the_lineage_or_is_its_own_cause() -> None:
    command = ProcessSession(session_id=uuid4())
    own = lineage.fill(command.model_dump(mode="json"))
    assert own["correlation_id"] == own["causation_id"] == str(command.message_id)
    cause = lineage.Lineage(uuid4(), uuid4())
    with lineage.caused_by(cause):
        body = lineage.fill(command.model_dump(mode="json"))
        kept = lineage.fill(ProcessSession(session_id=uuid4(), correlation_id=cause.causation_id).model_dump(mode="json"))
    assert (body["correlation_id"], body["causation_id"]) == (str(cause.correlation_id), str(cause.causation_id))
    assert (kept["correlation_id"], kept["causation_id"]) == (str(cause.causation_id), str(cause.causation_id))


async def test_a_service_traces_only_with_an_endpoint_and_stops_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with tracing.running("harness", Settings.from_environ({"MUSTER_DATA_DIR": str(tmp_path)})):
        assert not tracing.enabled()
    # A collector nobody listens on: the exporter retries, the stop does not wait for it.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", closed)
    started = time.monotonic()
    async with tracing.running("harness", Settings.from_environ({"MUSTER_DATA_DIR": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": closed})):
        assert tracing.enabled()
        with tracing.server_span("ws send_message"):
            assert tracing.traceparent() is not None
    assert not tracing.enabled()
    assert time.monotonic() - started < tracing.SHUTDOWN_WITHIN_S + 2
