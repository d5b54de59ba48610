"""OpenTelemetry spans across the Kafka hops (ADR 0017).

A turn is one trace: the gateway's span for the WebSocket frame that starts it is the root;
every message a span causes carries the span's W3C `traceparent` — in the Kafka record's
headers, in the outbox row of a command and in the metadata of appended events, so the
context survives the outbox whoever publishes it — and the consumer's span continues it.

Off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT`): then no tracer
exists, every helper here returns at once (a shared no-op context manager, None for the
trace context) and nothing is added to messages. The provider is this module's own (not
OpenTelemetry's global one), created by `running` in a service's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from muster_runtime.process.settings import Settings

if TYPE_CHECKING:  # the SDK is imported only when tracing is on (it is slow to import)
    from opentelemetry.sdk.trace import TracerProvider

TRACEPARENT = "traceparent"
Headers = list[tuple[str, bytes]]

_tracer: trace.Tracer | None = None
_propagator = TraceContextTextMapPropagator()
_OFF: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
SHUTDOWN_WITHIN_S = 3.0


def install(provider: TracerProvider | None) -> None:
    """Trace through `provider` from now on (None: tracing off). Tests install one with an
    in-memory exporter; services call `running`."""
    global _tracer
    _tracer = provider.get_tracer("muster") if provider is not None else None


def enabled() -> bool:
    return _tracer is not None


def provider_for(service: str, settings: Settings) -> TracerProvider:
    """A provider exporting over OTLP/HTTP in batches; the exporter reads the endpoint and
    the other `OTEL_EXPORTER_OTLP_*` variables itself."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_NAME: service, SERVICE_INSTANCE_ID: settings.instance_id})
    # Shut down by `running`, within a bound; not at interpreter exit, which it could delay.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@contextlib.asynccontextmanager
async def running(service: str, settings: Settings) -> AsyncIterator[None]:
    """Tracing for a service's lifespan when an endpoint is configured: spans still buffered
    at the end are exported before it returns."""
    if not settings.otel_endpoint:
        yield
        return
    provider = provider_for(service, settings)
    install(provider)
    try:
        yield
    finally:
        install(None)
        await asyncio.to_thread(_shutdown, provider, SHUTDOWN_WITHIN_S)


def _shutdown(provider: TracerProvider, within_s: float) -> None:
    """Export what is buffered, waiting at most `within_s`: an unreachable collector must
    not hold up a service's stop (the exporter retries for its whole timeout)."""
    thread = threading.Thread(target=provider.shutdown, name="otel-shutdown", daemon=True)
    thread.start()
    thread.join(within_s)


def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span of this process's work, child of the current one."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(name, attributes=attributes)


def server_span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """The root of a trace: a request from outside (a WebSocket frame)."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(
        name,
        context=trace.set_span_in_context(trace.INVALID_SPAN),
        kind=trace.SpanKind.SERVER,
        attributes=attributes,
    )


def consumer_span(
    topic: str,
    message_type: str,
    headers: Sequence[tuple[str, bytes]],
    fallback: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """The span of handling one consumed record, continuing the trace of its `traceparent`
    header (or `fallback`, the trace context an event carries in its metadata)."""
    if _tracer is None:
        return _OFF
    carrier = {key: value.decode("latin-1") for key, value in headers if key == TRACEPARENT}
    if not carrier and fallback:
        carrier[TRACEPARENT] = fallback
    return _tracer.start_as_current_span(
        f"process {message_type}",
        context=_propagator.extract(carrier),
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "muster.message_type": message_type,
            **(attributes or {}),
        },
    )


def traceparent() -> str | None:
    """The current span's context as a W3C `traceparent` value (None: off, or no span)."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get(TRACEPARENT)


def headers(context: str | None) -> Headers | None:
    """Kafka record headers carrying `context` (None when there is none)."""
    return [(TRACEPARENT, context.encode("latin-1"))] if context else None
