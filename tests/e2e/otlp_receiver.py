"""A small OTLP/HTTP trace receiver run inside the test process: the services export their
spans to it (`OTEL_EXPORTER_OTLP_ENDPOINT`) and it keeps them in memory."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Span:
    service: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict[str, str] = field(default_factory=dict)


def decode(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(Span(
                    service=resource.get("service.name", ""),
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    name=span.name,
                    attributes={a.key: a.value.string_value for a in span.attributes},
                ))
    return spans


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                received = decode(body) if self.path == "/v1/traces" else []
                with receiver._lock:
                    receiver.spans += received
                    receiver.requests += 1
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[Span]:
        with self._lock:
            return list(self.spans)

    async def wait_for(self, condition: Callable[[list[Span]], bool], timeout: float = 30.0) -> list[Span]:
        """Poll until `condition` holds for the spans received so far (a deadline, no sleep
        standing in for the export)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if condition(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({(s.service, s.name) for s in spans})
                raise TimeoutError(f"spans not received in {timeout:g}s; got {len(spans)}: {names}")
            await asyncio.sleep(0.05)
