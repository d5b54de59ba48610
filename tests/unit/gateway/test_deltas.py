"""`assistant_delta` at the gateway (ADR 0039): pieces of watched sessions go to their
subscribers in order, never after their message, never from before the consumer started."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from aiokafka.structs import ConsumerRecord
from muster_contracts.deltas import encode_delta
from muster_gateway.fanout import Cursor, EventRow, Hub
from muster_gateway.live_events import forward_deltas

AT = datetime(2026, 1, 1, tzinfo=UTC)
STARTED_MS = 1_000_000.0


class Sink:
    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def push(self, frame: dict[str, Any]) -> bool:
        self.frames.append(frame)
        return True


async def _no_rows(session_id: str, after: int, limit: int) -> list[EventRow]:
    return []


def record(
    session_id: str, message_id: str, index: int, text: str, ms: float = STARTED_MS + 1, after: int = 0
) -> Any:
    value = encode_delta(session_id, message_id, index, text, ms / 1000, after)
    return ConsumerRecord(
        topic="muster.deltas", partition=0, offset=index, timestamp=int(ms), timestamp_type=0,
        key=session_id.encode(), value=value, checksum=None, serialized_key_size=36,
        serialized_value_size=len(value), headers=(),
    )


def recorded(message_id: str, version: int) -> EventRow:
    payload = {"message_id": message_id, "seq": 2, "role": "ASSISTANT", "content": "Hello"}
    return EventRow(version, version, AT, "MessageRecorded", 3, payload)


async def test_pieces_go_to_every_subscriber_in_order_without_position() -> None:
    hub = Hub(_no_rows)
    one, two, other = Sink(), Sink(), Sink()
    sid, mid = str(uuid4()), str(uuid4())
    hub.subscribe(one, sid, Cursor(0, 0))
    hub.subscribe(two, sid, Cursor(0, 0))
    hub.subscribe(other, str(uuid4()), Cursor(0, 0))
    forward_deltas([record(sid, mid, 0, "Hel"), record(sid, mid, 1, "lo")], hub, STARTED_MS)
    expected = [
        {"type": "assistant_delta", "sessionId": sid, "data": {"messageId": mid, "index": 0, "text": "Hel"}},
        {"type": "assistant_delta", "sessionId": sid, "data": {"messageId": mid, "index": 1, "text": "lo"}},
    ]
    assert one.frames == expected == two.frames
    assert other.frames == []
    await hub.close()


async def test_no_piece_after_its_message_was_seen_recorded() -> None:
    hub = Hub(_no_rows)
    sink = Sink()
    sid, mid = str(uuid4()), str(uuid4())
    hub.subscribe(sink, sid, Cursor(0, 0))
    forward_deltas([record(sid, mid, 0, "Hel")], hub, STARTED_MS)
    hub.offer(sid, recorded(mid, 1))
    forward_deltas([record(sid, mid, 1, "lo")], hub, STARTED_MS)  # late: dropped
    assert [f["type"] for f in sink.frames] == ["assistant_delta", "message"]
    # The next message's pieces still flow.
    forward_deltas([record(sid, str(uuid4()), 0, "Next")], hub, STARTED_MS)
    assert sink.frames[-1]["data"]["text"] == "Next"
    await hub.close()


async def test_records_from_before_the_consumer_started_are_not_replayed() -> None:
    hub = Hub(_no_rows)
    sink = Sink()
    sid, mid = str(uuid4()), str(uuid4())
    hub.subscribe(sink, sid, Cursor(0, 0))
    forward_deltas([record(sid, mid, 0, "old", ms=STARTED_MS - 5000)], hub, STARTED_MS)
    assert sink.frames == []
    await hub.close()


async def test_unwatched_sessions_and_malformed_records_are_skipped() -> None:
    hub = Hub(_no_rows)
    sink = Sink()
    sid = str(uuid4())
    hub.subscribe(sink, sid, Cursor(0, 0))
    bad = dataclasses.replace(record(sid, "m", 0, "x"), value=b'{"messageId": 1}')
    keyless = dataclasses.replace(record(sid, "m", 0, "x"), key=None)
    forward_deltas([record(str(uuid4()), "m", 0, "x"), bad, keyless], hub, STARTED_MS)
    assert sink.frames == []
    await hub.close()


def user_turn(version: int) -> EventRow:
    """An event of the turn the answer belongs to: it must reach a client before the answer."""
    return EventRow(version, version, AT, "SessionPhaseChanged", 1, {"phase": "RUNNING"})


async def test_a_piece_ahead_of_the_events_before_it_waits_for_them() -> None:
    """`muster.deltas` may overtake `muster.events`: a piece that names version 3 reaches a
    subscriber at version 1 only after events 2 and 3, in arrival order, never twice."""
    store: list[EventRow] = []

    async def fetch(session_id: str, after: int, limit: int) -> list[EventRow]:
        return [row for row in store if row.version > after][:limit]

    hub = Hub(fetch)
    behind, current = Sink(), Sink()
    sid, mid = str(uuid4()), str(uuid4())
    hub.subscribe(behind, sid, Cursor(1, 1))
    hub.subscribe(current, sid, Cursor(3, 3))
    forward_deltas([record(sid, mid, 0, "Hel", after=3), record(sid, mid, 1, "lo", after=3)], hub, STARTED_MS)
    assert [f["data"]["text"] for f in current.frames] == ["Hel", "lo"]
    assert behind.frames == []  # its events 2 and 3 are not out yet
    store.extend([user_turn(2), user_turn(3)])
    hub.offer(sid, user_turn(2))
    hub.offer(sid, user_turn(3))
    kinds = [(f["type"], f.get("position") or f["data"].get("text")) for f in behind.frames]
    assert kinds == [("session_status", 2), ("session_status", 3), ("assistant_delta", "Hel"), ("assistant_delta", "lo")]
    await hub.close()


async def test_held_pieces_of_a_message_recorded_meanwhile_are_dropped() -> None:
    hub = Hub(_no_rows)
    sink = Sink()
    sid, mid = str(uuid4()), str(uuid4())
    hub.subscribe(sink, sid, Cursor(1, 1))
    forward_deltas([record(sid, mid, 0, "Hel", after=2)], hub, STARTED_MS)
    hub.offer(sid, user_turn(2))
    hub.offer(sid, recorded(mid, 3))
    forward_deltas([record(sid, mid, 1, "lo", after=2)], hub, STARTED_MS)
    assert [f["type"] for f in sink.frames] == ["session_status", "assistant_delta", "message"]
    await hub.close()
