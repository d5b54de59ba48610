"""The gateway's live-event consumer: the Kafka broker whose subscriber hands `muster.events`
records to the WebSocket hub (and LOCAL clients' tool requests to `LocalTools`). Built by the
composition root for the service and by the AsyncAPI generator for the contract."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from muster_contracts.deltas import decode_delta
from muster_runtime.messaging import topics
from muster_runtime.messaging.consuming import BATCH_OPTIONS, records_of
from muster_runtime.messaging.kafka import consumer_options
from muster_runtime.messaging.service import make_broker, the_message
from muster_runtime.process.settings import Settings

from muster_gateway import streams
from muster_gateway.fanout import Hub
from muster_gateway.live_lag import LiveLag
from muster_gateway.local_tools import LocalTools
from muster_gateway.turn_latency import TurnLatency

LIVE_EVENTS = "gateway-live-events"  # the subscriber's AsyncAPI title
DELTAS = "gateway-deltas"
TOOL_REQUESTED = b'"ToolRequested"'


def acts_on(hub: Hub, local: LocalTools | None) -> Callable[[bytes], bool]:
    """Which `muster.events` keys the live consumer acts on: a watched stream's, and any
    while a LOCAL client is attached. A ring naming none of them does not wake it: those
    records wait for its next fetch (ADR 0026)."""

    def relevant(key: bytes) -> bool:
        return hub.is_watched(key.decode(errors="replace")) or (local is not None and local.connected() > 0)

    return relevant


def build_broker(
    settings: Settings,
    hub: Hub,
    local: LocalTools | None = None,
    lag: LiveLag | None = None,
    turns: TurnLatency | None = None,
) -> KafkaBroker:
    """The live-event consumer. Its own group per instance: every gateway must see every
    event, since any of them may hold a subscriber of any session. `lag` and `turns` are
    told of every batch (overload shedding reads them)."""
    # Our log format (per-message lines only at DEBUG), adaptive fetch wait, patient start;
    # woken only by rings for records it acts on.
    # A consumer of all of `muster.events` that falls behind catches up without its bell
    # (ADR 0026's amendment).
    broker = make_broker(settings, "gateway", bell_relevant=acts_on(hub, local), catch_up=True)

    # `**consumer_options` makes mypy fall back to an untyped overload of `subscriber`.
    @broker.subscriber(  # type: ignore[untyped-decorator]
        topics.EVENTS,
        group_id=f"gateway-{settings.instance_id}",
        ack_policy=AckPolicy.ACK,
        decoder=the_message,
        title=LIVE_EVENTS,
        description="Live events for WebSocket subscribers: a record (keyed by its stream id) "
        "that directly follows a subscriber's cursor is handed out as it is; otherwise it names "
        "a stream that moved, and the gateway reads the new events from the event store.",
        **BATCH_OPTIONS,
        **consumer_options(settings),
    )
    async def on_events(msg: KafkaMessage) -> None:
        # The record key is the stream id: only records of watched streams are parsed. A
        # keyless record cannot name a stream; skipping it loses nothing (the store is read
        # on the next ring or poll), nor does one that carries no event (the store is read).
        records = records_of(msg.raw_message)
        if lag is not None:
            lag.observe(records)
        if turns is not None:
            turns.observe(records)
        for record in records:
            stream_id = record.key.decode(errors="replace") if record.key else None
            if stream_id is None or not hub.is_watched(stream_id):
                continue
            row = streams.published_row(record.value)
            if row is None:
                hub.ring(stream_id)
            else:
                hub.offer(stream_id, row)
        # A LOCAL client's tool request: a byte search, so other records cost no parsing.
        for record in records:
            if local is not None and record.key and record.value and TOOL_REQUESTED in record.value:
                local.requested(record.key.decode(errors="replace"))

    subscribe_deltas(broker, settings, hub)
    return broker


def subscribe_deltas(broker: KafkaBroker, settings: Settings, hub: Hub) -> None:
    """Answer previews (ADR 0039), from now on: a group of its own per instance, and a
    record older than this consumer's start is skipped — the local broker's answer to
    "latest" is wrong, so the group starts from the earliest record it still holds."""
    started_ms = time.time() * 1000

    @broker.subscriber(  # type: ignore[untyped-decorator]
        topics.DELTAS,
        group_id=f"gateway-deltas-{settings.instance_id}",
        ack_policy=AckPolicy.ACK,
        decoder=the_message,
        title=DELTAS,
        description="Pieces of answers as the models stream them, keyed by session id: sent "
        "as `assistant_delta` to the session's subscribers, in order and before the durable "
        "message; never stored, never replayed (a piece of a message already recorded, or "
        "older than this gateway's consumer, goes to nobody).",
        **BATCH_OPTIONS,
        **consumer_options(settings),
    )
    async def on_deltas(msg: KafkaMessage) -> None:
        forward_deltas(records_of(msg.raw_message), hub, started_ms)


def forward_deltas(records: Iterable[Any], hub: Hub, started_ms: float) -> None:
    """Hand each piece of a watched session to the hub, in order; a record older than
    `started_ms` (Kafka timestamp, ms) is an old one replayed to a new group: skipped."""
    for record in records:
        session_id = record.key.decode(errors="replace") if record.key else None
        if session_id is None or not hub.is_watched(session_id) or record.timestamp < started_ms:
            continue
        decoded = decode_delta(record.value)
        if decoded is not None:
            hub.delta(session_id, *decoded)
