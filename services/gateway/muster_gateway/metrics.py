"""Prometheus metrics of one gateway process, in a registry of its own so that building
several apps (tests) never collides on the global default registry, plus the deployment-wide
recovery figures read from the projections at each scrape (recovery_metrics.py)."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)

from muster_gateway import recovery_metrics
from muster_gateway.protocol import FRAME_TYPES
from muster_gateway.read_port import ClientReads


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        process_collector.ProcessCollector(registry=self.registry)
        platform_collector.PlatformCollector(registry=self.registry)
        gc_collector.GCCollector(registry=self.registry)
        self.connections = Gauge(
            "muster_gateway_connections",
            "Open authenticated WebSocket connections",
            registry=self.registry,
        )
        self.subscriptions = Gauge(
            "muster_gateway_subscriptions",
            "Live (socket, session) subscriptions",
            registry=self.registry,
        )
        self.frames = Counter(
            "muster_gateway_frames",
            "Client frames received, by type",
            ["type"],
            registry=self.registry,
        )
        self.errors = Counter(
            "muster_gateway_errors", "Errors answered, by code", ["code"], registry=self.registry
        )
        self.events_pushed = Counter(
            "muster_gateway_events_pushed",
            "Event frames queued to clients",
            registry=self.registry,
        )
        self.command_seconds = Histogram(
            "muster_gateway_frame_seconds",
            "Time to answer a client frame, by type",
            ["type"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.recovery = recovery_metrics.RecoveryCollector()
        self.registry.register(self.recovery)

    def frame(self, frame_type: str) -> None:
        # Only known types become label values: clients must not mint time series.
        self.frames.labels(frame_type if frame_type in FRAME_TYPES else "invalid").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def scrape(self, reads: ClientReads | None) -> bytes:
        """Everything, with the projections' figures as of now. Without the reads (before
        the lifespan has started) or when the database fails, only the in-process metrics."""
        self.recovery.snapshot = await reads.recovery_figures() if reads is not None else None
        # No await between setting the snapshot and rendering: concurrent scrapes cannot mix.
        return self.render()
