from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from muster_gateway.fanout import Cursor, EventRow, Hub

AT = datetime(2025, 1, 1, tzinfo=UTC)


class Store:
    """An in-memory `events` table for one or more streams, with a controllable fetch."""

    def __init__(self) -> None:
        self.rows: dict[str, list[EventRow]] = {}
        self.position = 0
        self.fetches = 0
        self.gate: asyncio.Event | None = None
        self.fail = False

    def append(self, stream: str, kind: str = "SessionPhaseChanged") -> EventRow:
        self.position += 1
        version = len(self.rows.get(stream, [])) + 1
        payload = {"phase": "RUNNING"} if kind == "SessionPhaseChanged" else {}
        row = EventRow(self.position, version, AT, kind, 1, payload)
        self.rows.setdefault(stream, []).append(row)
        return row

    async def fetch(self, stream: str, after_version: int, limit: int) -> list[EventRow]:
        self.fetches += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError("database down")
        return [r for r in self.rows.get(stream, []) if r.version > after_version][:limit]


class Sink:
    def __init__(self, accept: int = 1_000_000) -> None:
        self.frames: list[dict[str, Any]] = []
        self.accept = accept

    def push(self, frame: dict[str, Any]) -> bool:
        if len(self.frames) >= self.accept:
            return False
        self.frames.append(frame)
        return True

    def positions(self) -> list[int]:
        return [f["position"] for f in self.frames]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Wait for `condition`, yielding to the hub between looks (no fixed sleep)."""
    async def watch() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(watch(), within)


async def test_replay_then_live_in_order() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch)
    for _ in range(3):
        store.append("s")
    hub.subscribe(sink, "s", Cursor(1, 1))
    await settle()
    assert sink.positions() == [2, 3]
    store.append("other")
    store.append("s")
    hub.ring("s")
    await settle()
    assert sink.positions() == [2, 3, 5]
    assert {f["sessionId"] for f in sink.frames} == {"s"}


async def test_subscribing_twice_does_not_duplicate() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch)
    store.append("s")
    hub.subscribe(sink, "s", Cursor(0, 0))
    await settle()
    hub.subscribe(sink, "s", Cursor(0, 0))
    store.append("s")
    hub.ring("s")
    hub.ring("s")
    await settle()
    assert sink.positions() == [1, 2]


async def test_rings_coalesce_while_a_fetch_is_in_flight() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch)
    store.gate = asyncio.Event()
    hub.subscribe(sink, "s", Cursor(0, 0))
    await settle()
    for _ in range(10):
        store.append("s")
        hub.ring("s")
    store.gate.set()
    await settle()
    assert store.fetches == 2  # the one in flight, then one re-run for all the rings
    assert sink.positions() == list(range(1, 11))


async def test_joining_behind_an_in_flight_fetch_leaves_no_gap() -> None:
    store, early, late = Store(), Sink(), Sink()
    hub = Hub(store.fetch)
    for _ in range(5):
        store.append("s")
    hub.subscribe(early, "s", Cursor(4, 4))
    store.gate = asyncio.Event()
    await settle()  # fetch from version 4 is now blocked
    hub.subscribe(late, "s", Cursor(1, 1))
    store.gate.set()
    await settle()
    assert early.positions() == [5]
    assert late.positions() == [2, 3, 4, 5]


async def test_unknown_types_advance_the_cursor_silently() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch)
    store.append("s", "FromTheFuture")
    store.append("s")
    hub.subscribe(sink, "s", Cursor(0, 0))
    await settle()
    assert sink.positions() == [2]


async def test_batches_are_followed_to_the_end() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch, batch=3)
    for _ in range(10):
        store.append("s")
    hub.subscribe(sink, "s", Cursor(0, 0))
    await settle()
    assert sink.positions() == list(range(1, 11))


async def test_a_sink_that_refuses_is_dropped_and_others_continue() -> None:
    store, slow, fine = Store(), Sink(accept=1), Sink()
    hub = Hub(store.fetch)
    for _ in range(3):
        store.append("s")
    hub.subscribe(slow, "s", Cursor(0, 0))
    hub.subscribe(fine, "s", Cursor(0, 0))
    await settle()
    assert slow.positions() == [1] and not hub.is_subscribed(slow, "s")
    assert fine.positions() == [1, 2, 3]


async def test_unsubscribe_and_failures() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch, poll_interval_s=0.01)
    poller = asyncio.create_task(hub.run_poller())
    try:
        hub.subscribe(sink, "s", Cursor(0, 0))
        store.fail = True
        store.append("s")
        hub.ring("s")
        await settle()
        assert sink.positions() == []
        store.fail = False  # the poller retries without another doorbell
        await until(lambda: sink.positions() == [1])
        hub.unsubscribe(sink, "s")
        store.append("s")
        hub.ring("s")
        await settle()
        assert sink.positions() == [1] and hub.subscription_count() == 0
    finally:
        poller.cancel()
        await hub.close()


async def test_an_offered_event_that_follows_the_cursor_needs_no_read() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch)
    store.append("s")
    hub.subscribe(sink, "s", Cursor(1, 1))
    await settle()
    reads = store.fetches
    for _ in range(3):
        hub.offer("s", store.append("s"))
    assert sink.positions() == [2, 3, 4]  # handed out at once, in order
    await settle()
    assert store.fetches == reads


async def test_an_offered_event_past_a_gap_is_served_from_the_store() -> None:
    store, sink = Store(), Sink()
    hub = Hub(store.fetch)
    hub.subscribe(sink, "s", Cursor(0, 0))
    await settle()
    store.append("s")  # its record is late
    second = store.append("s")
    hub.offer("s", second)
    assert sink.positions() == []  # not past the missing version 1
    await settle()
    assert sink.positions() == [1, 2]
    hub.offer("s", second)  # the late or repeated record: already seen
    hub.offer("s", store.rows["s"][0])
    await settle()
    assert sink.positions() == [1, 2]


async def test_offers_serve_each_subscriber_from_its_own_cursor() -> None:
    store, ahead, behind = Store(), Sink(), Sink()
    hub = Hub(store.fetch)
    for _ in range(3):
        store.append("s")
    hub.subscribe(ahead, "s", Cursor(3, 3))
    hub.subscribe(behind, "s", Cursor(1, 1))
    await settle()
    assert behind.positions() == [2, 3]
    store.gate = asyncio.Event()  # the store read the next gap needs is held up
    fourth = store.append("s")
    hub.offer("s", fourth)
    assert ahead.positions() == [4] and behind.positions() == [2, 3, 4]
    hub.unsubscribe(behind, "s")
    hub.subscribe(behind, "s", Cursor(1, 1))  # rejoins further back: needs the store
    hub.offer("s", store.append("s"))
    assert ahead.positions() == [4, 5]
    store.gate.set()
    await settle()
    assert behind.positions() == [2, 3, 4, 2, 3, 4, 5]
    assert ahead.positions() == [4, 5]


async def test_offers_for_unwatched_streams_are_ignored() -> None:
    store = Store()
    hub = Hub(store.fetch)
    hub.offer("nobody", store.append("nobody"))
    await settle()
    assert store.fetches == 0 and not hub.is_watched("nobody")


async def test_the_poller_rings_only_sessions_with_events_past_a_cursor() -> None:
    store, sink = Store(), Sink()
    asked: list[list[str]] = []

    async def versions(ids: list[str]) -> dict[str, int]:
        asked.append(list(ids))
        return {sid: len(store.rows[sid]) for sid in ids if sid in store.rows}

    hub = Hub(store.fetch, versions=versions)
    for sid in ("done", "behind", "empty"):
        hub.subscribe(sink, sid, Cursor(0, 0))
    store.append("done")
    hub.ring("done")
    await until(lambda: sink.positions() == [1])
    fetches = store.fetches
    store.append("behind")  # its doorbell lost
    await hub.poll()
    await until(lambda: sink.positions() == [1, 2])
    assert sorted(asked[-1]) == ["behind", "done", "empty"]  # one read for all of them
    assert store.fetches == fetches + 1  # only "behind" was read
    await hub.close()


async def test_the_poller_rings_every_session_when_the_versions_read_fails() -> None:
    store, sink = Store(), Sink()

    async def versions(ids: list[str]) -> dict[str, int]:
        raise OSError("database down")

    hub = Hub(store.fetch, versions=versions)
    hub.subscribe(sink, "s", Cursor(0, 0))
    await settle()
    store.append("s")
    await hub.poll()
    await until(lambda: sink.positions() == [1])
    await hub.close()
