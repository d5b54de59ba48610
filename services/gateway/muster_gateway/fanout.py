"""Live subscriptions: Kafka brings the next event or rings the doorbell, the event store
fills any gap.

A `muster.events` record carries a stored event with its position and stream version. A
subscriber whose cursor the record directly follows takes it as it is (`offer`): the record
was published after its commit, so it is the log of record's row. For anyone else — a
record missed, late or out of order, or a subscriber further back — the record only says
"stream S moved": the hub reads `events` past the lowest subscriber cursor and hands each
subscriber the rows past its own cursor, in stream order. Every hand-out is the version
right after the cursor and every cursor only advances over rows it was handed, so a
subscriber sees no gap and no duplicate, whatever Kafka does (late, duplicated, lost, or
replayed from the start).

Cursors are `(position, stream_version)`: clients speak positions, but the hub queries by
version, which the `(stream_id, stream_version)` unique index serves directly. Within one
stream both grow together: version v+1 is written only after v committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from muster_gateway.frames import event_frame

log = logging.getLogger("muster.gateway.fanout")

RECORDED_KEPT = 16  # ASSISTANT message ids remembered per watched session
EARLY_KEPT = 1_000  # pieces held per subscriber until the events before them reach it


@dataclass
class Cursor:
    position: int  # last position handed to the subscriber (or the one it said it has)
    version: int  # the stream version of that position


@dataclass(frozen=True)
class EventRow:
    position: int
    version: int
    recorded_at: datetime
    type: str
    schema_version: int
    payload: dict[str, Any]


# (session id, after version, limit) → rows with a greater version, ascending
Fetch = Callable[[str, int, int], Awaitable[Sequence[EventRow]]]
# The latest version of each of these streams (absent: none stored yet), for the poller.
Versions = Callable[[list[str]], Awaitable[Mapping[str, int]]]
# Streams asked about in one read of the poller's.
POLL_CHUNK = 1_000


class Sink(Protocol):
    def push(self, frame: dict[str, Any]) -> bool:
        """Queue a frame for the client; False when the client is gone or too far behind."""
        ...


class Hub:
    def __init__(
        self,
        fetch: Fetch,
        *,
        batch: int = 500,
        poll_interval_s: float = 5.0,
        on_pushed: Callable[[int], None] = lambda count: None,
        versions: Versions | None = None,
    ) -> None:
        self._fetch = fetch
        self._versions = versions
        self._batch = batch
        self._poll_interval_s = poll_interval_s
        self._on_pushed = on_pushed
        self._subs: dict[str, dict[Sink, Cursor]] = {}
        self._pumps: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        # Per watched session, the ASSISTANT messages lately known recorded: a delta of one
        # of them is stale (ADR 0039) and goes to nobody.
        self._recorded: dict[str, deque[str]] = {}
        # Per watched session and subscriber, pieces that came ahead of events before them
        # (`muster.deltas` and `muster.events` are not ordered with each other): held until
        # the subscriber's cursor reaches the version the piece names.
        self._early: dict[str, dict[Sink, list[tuple[int, dict[str, Any]]]]] = {}

    def is_subscribed(self, sink: Sink, session_id: str) -> bool:
        return sink in self._subs.get(session_id, {})

    def is_watched(self, session_id: str) -> bool:
        return session_id in self._subs

    def subscription_count(self) -> int:
        return sum(len(subs) for subs in self._subs.values())

    def subscribe(self, sink: Sink, session_id: str, cursor: Cursor) -> None:
        """Start delivering events past `cursor`. Already subscribed: keep the old cursor, so
        a second subscribe neither repeats events nor skips ones still on their way."""
        self._subs.setdefault(session_id, {}).setdefault(sink, cursor)
        self.ring(session_id)  # catch up from the store right away, not at the next event

    def unsubscribe(self, sink: Sink, session_id: str) -> None:
        subs = self._subs.get(session_id)
        if subs is not None:
            subs.pop(sink, None)
            self._early.get(session_id, {}).pop(sink, None)
            if not subs:
                del self._subs[session_id]
                self._recorded.pop(session_id, None)
                self._early.pop(session_id, None)

    def drop(self, sink: Sink) -> None:
        for session_id in [sid for sid, subs in self._subs.items() if sink in subs]:
            self.unsubscribe(sink, session_id)

    def ring(self, session_id: str) -> None:
        """Session `session_id` may have new events. Cheap for sessions nobody watches here;
        coalesced for those that are watched: one fetch in flight, re-run if rung again."""
        if session_id not in self._subs:
            return
        self._dirty.add(session_id)
        if session_id not in self._pumps:
            self._pumps[session_id] = asyncio.create_task(self._pump(session_id))

    def offer(self, session_id: str, row: EventRow) -> None:
        """A stored event as published on `muster.events`: handed out at once to the
        subscribers it directly follows, the store read for those it is ahead of."""
        subs = self._subs.get(session_id)
        if not subs:
            return
        self._note_recorded(session_id, row)
        following = [(sink, cursor) for sink, cursor in subs.items() if cursor.version == row.version - 1]
        if following:
            self._hand_out(session_id, row, following)
        if any(cursor.version < row.version - 1 for cursor in self._subs.get(session_id, {}).values()):
            self.ring(session_id)

    async def _pump(self, session_id: str) -> None:
        try:
            while session_id in self._dirty:
                self._dirty.discard(session_id)
                await self._deliver(session_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The poller rings every watched session again, so a failed read is retried.
            self._dirty.discard(session_id)
            log.warning("fanout_fetch_failed session_id=%s error=%s", session_id, type(exc).__name__)
        finally:
            self._pumps.pop(session_id, None)

    async def _deliver(self, session_id: str) -> None:
        while True:
            subs = self._subs.get(session_id)
            if not subs:
                return
            low = min(cursor.version for cursor in subs.values())
            rows = await self._fetch(session_id, low, self._batch)
            # Only subscribers present before the read, at or past `low`, can take these
            # rows without a gap; one that joined meanwhile further back rang us again.
            eligible = [
                (sink, cursor)
                for sink, cursor in self._subs.get(session_id, {}).items()
                if cursor.version >= low
            ]
            for row in rows:
                self._hand_out(session_id, row, eligible)
            if len(rows) < self._batch:
                return

    def _note_recorded(self, session_id: str, row: EventRow) -> None:
        if row.type != "MessageRecorded" or session_id not in self._subs:
            return
        message_id = row.payload.get("message_id")
        if message_id is not None:
            known = self._recorded.setdefault(session_id, deque(maxlen=RECORDED_KEPT))
            if str(message_id) not in known:
                known.append(str(message_id))

    def delta(self, session_id: str, data: dict[str, Any], after_version: int = 0) -> None:
        """An answer's piece as streamed (`assistant_delta`, ADR 0039): to every subscriber of
        the session once it has the events up to `after_version` (held till then), in arrival
        order; none once its message is known recorded, so a piece never follows its durable
        message. Never stored, never replayed."""
        subs = self._subs.get(session_id)
        if not subs or data["messageId"] in self._recorded.get(session_id, ()):
            return
        behind = False
        for sink, cursor in list(subs.items()):
            held = self._early.get(session_id, {}).get(sink)
            if cursor.version >= after_version and not held:
                self._push_delta(session_id, sink, data)
            else:
                queue = self._early.setdefault(session_id, {}).setdefault(sink, [])
                if len(queue) < EARLY_KEPT:  # beyond: a preview lost, the message follows
                    queue.append((after_version, data))
                behind = True
        if behind:
            self.ring(session_id)  # the events before it are in the store: fetch them now

    def _push_delta(self, session_id: str, sink: Sink, data: dict[str, Any]) -> None:
        if not sink.push({"type": "assistant_delta", "sessionId": session_id, "data": data}):
            self.drop(sink)

    def _release(self, session_id: str, sink: Sink, cursor: Cursor) -> None:
        """Hand a subscriber the pieces it was held from, now that its cursor moved."""
        early = self._early.get(session_id)
        queue = early.get(sink) if early else None
        if not queue:
            return
        recorded = self._recorded.get(session_id, ())
        while queue and queue[0][0] <= cursor.version:
            _, data = queue.pop(0)
            if data["messageId"] not in recorded:
                self._push_delta(session_id, sink, data)
                if not self.is_subscribed(sink, session_id):
                    return

    def _hand_out(self, session_id: str, row: EventRow, eligible: list[tuple[Sink, Cursor]]) -> None:
        self._note_recorded(session_id, row)
        frame: dict[str, Any] | None = None
        rendered = False
        pushed = 0
        for sink, cursor in eligible:
            seen = row.version <= cursor.version or row.position <= cursor.position
            if seen or not self.is_subscribed(sink, session_id):
                continue
            if not rendered:
                frame, rendered = self._render(session_id, row), True
            if frame is not None:
                if not sink.push(frame):
                    self.drop(sink)
                    continue
                pushed += 1
            # Skipped (unknown) event types advance the cursor too: they are "delivered".
            cursor.position, cursor.version = row.position, row.version
            self._release(session_id, sink, cursor)
        if pushed:
            self._on_pushed(pushed)

    @staticmethod
    def _render(session_id: str, row: EventRow) -> dict[str, Any] | None:
        return event_frame(
            session_id, row.position, row.recorded_at, row.type, row.schema_version, row.payload
        )

    async def run_poller(self) -> None:
        """Safety net for lost doorbells (the local broker keeps messages in memory)."""
        while True:
            await asyncio.sleep(self._poll_interval_s)
            await self.poll()

    async def poll(self) -> None:
        """Ring every watched session that has events past a subscriber's cursor. With
        `versions`, one read per `POLL_CHUNK` sessions finds them, so a gateway watching
        thousands of finished sessions does not read each one's events every period (it
        did: 600 reads a second after a burst of 3,000 turns); without it, or when that
        read fails, every watched session is rung."""
        watched = list(self._subs)
        if self._versions is None:
            behind = watched
        else:
            behind = []
            for start in range(0, len(watched), POLL_CHUNK):
                chunk = watched[start : start + POLL_CHUNK]
                try:
                    latest = await self._versions(chunk)
                except Exception as exc:
                    log.warning("fanout_poll_failed sessions=%d error=%s", len(chunk), type(exc).__name__)
                    behind += chunk
                    continue
                behind += [sid for sid in chunk if latest.get(sid, 0) > self._lowest_cursor(sid)]
        for session_id in behind:
            self.ring(session_id)

    def _lowest_cursor(self, session_id: str) -> int:
        """The version the furthest-behind subscriber has (0 once nobody is left, so a
        session unsubscribed meanwhile is rung, which then ignores it)."""
        return min((cursor.version for cursor in self._subs.get(session_id, {}).values()), default=0)

    async def close(self) -> None:
        pumps = list(self._pumps.values())
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        self._subs.clear()
        self._recorded.clear()
        self._early.clear()
