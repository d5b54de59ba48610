"""The gateway's Kafka contract (AsyncAPI), built by the one generator from the broker the
service runs; served at `/asyncapi.json` and written by `make docs`."""

from __future__ import annotations

import functools
from typing import Any

from muster_contracts.commands import CancelSession, CompactSession, ProcessSession
from muster_contracts.deltas import AssistantDelta
from muster_contracts.published import RecordedEvent
from muster_runtime.messaging import topics
from muster_runtime.messaging.asyncapi import Contract, Flow, build_document, events_flow
from muster_runtime.process.settings import Settings

from muster_gateway.fanout import EventRow, Hub
from muster_gateway.live_events import DELTAS, LIVE_EVENTS, build_broker


async def _no_reads(session_id: str, after_version: int, limit: int) -> list[EventRow]:
    return []


def _broker(settings: Settings) -> Any:
    return build_broker(settings, Hub(_no_reads))


CONTRACT = Contract(
    service="gateway",
    description="The edge: WebSocket and REST. Consumes muster.events for live subscriptions "
    "(a record that directly follows a subscriber's cursor is handed out as it is; any gap is "
    "read from the event store); its decisions write commands and events through the outbox.",
    build=_broker,
    # Records of streams nobody here watches are not parsed: the key says which stream.
    receives=Flow(LIVE_EVENTS, topics.EVENTS, payload=RecordedEvent, group="gateway-<instance_id>"),
    also_receives=(
        Flow(DELTAS, topics.DELTAS, payload=AssistantDelta, group="gateway-deltas-<instance_id>"),
    ),
    sends=(
        Flow(
            "gateway-commands",
            topics.COMMANDS,
            "ProcessSession after a user message is accepted (also a side task's first).",
            ProcessSession,
        ),
        Flow(
            "gateway-cancel",
            topics.COMMANDS,
            "CancelSession when a running turn is cancelled (or its session deleted).",
            CancelSession,
        ),
        Flow(
            "gateway-compact",
            topics.COMMANDS,
            "CompactSession when compaction is asked for (POST /v1/sessions/{id}/compact).",
            CompactSession,
        ),
        events_flow(
            "gateway-events",
            "SessionCreated, UserMessageQueued, SessionPhaseChanged (CANCELLED) and "
            "QueuedMessagesDropped, appended by create_session, send_message and cancel; "
            "SideSessionCreated (source) and SessionForked (side task) by "
            "create_side_session; SessionSettingsChanged, SessionArchived, "
            "SessionUnarchived, SessionDeleted, SessionPromoted and SessionRead by the "
            "session-management routes.",
        ),
    ),
)


@functools.cache
def asyncapi_schema() -> dict[str, Any]:
    return build_document(CONTRACT)
