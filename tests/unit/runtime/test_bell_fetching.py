"""A belled consumer's chase: after records it fetches once more (all partitions, once the
records are handled); after a ring it keeps fetching until records come, for a while at
most; otherwise it waits for the bell, or the fallback: short near traffic, long when idle.
A consumer handed late records does not wait for its bell until an empty fetch."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from muster_runtime.messaging.local_broker.bell_fetching import Chase, Fallback, Lateness, gate_on_bell
from muster_runtime.messaging.local_broker.bells import Bell, Ringer

from tests.unit.runtime.fakes import Clock


def test_records_are_drained_with_one_more_fetch_then_the_consumer_waits_for_the_bell() -> None:
    clock = Clock()
    chase = Chase(clock)
    assert not chase.chasing(False)  # quiet: wait for the bell
    assert chase.chasing(True)  # records: fetch again at once
    assert chase.chasing(True)  # and again while records keep coming
    assert not chase.chasing(False)  # an empty answer after records: wait for the bell


def test_a_ring_is_chased_until_its_records_come_or_for_a_while_at_most() -> None:
    clock = Clock()
    chase = Chase(clock)
    chase.rung(True)  # a ring: the records may not be visible yet
    assert chase.chasing(False)
    clock.now = Chase.CHASE_S / 2
    assert chase.chasing(False)  # still nothing: keep fetching
    assert chase.chasing(True)  # the records came
    assert not chase.chasing(False)  # the chase ended with them
    chase.rung(True)
    clock.now += Chase.CHASE_S
    assert not chase.chasing(False)  # nothing came in time: the fallback covers it
    chase.rung(False)  # the fallback ended the wait: no reason to chase
    assert not chase.chasing(False)


class Stamped:
    """A record as `Lateness` reads it: its producer's timestamp."""

    def __init__(self, timestamp: float) -> None:
        self.timestamp = timestamp


class Assignment:
    active = True


class Fetcher:
    """aiokafka's Fetcher as `gate_on_bell` sees it: one fetch task at a time, a fresh
    consume future per round, and the wait of the next request."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.sent = 0
        self._fetch_max_wait_ms = 5
        self._wait_consume_future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def _proc_fetch_request(self, assignment: Any, node_id: Any, request: Any) -> bool:
        self.sent += 1
        return self.answers.pop(0)

    def next_round(self) -> None:
        self._wait_consume_future = asyncio.get_running_loop().create_future()


async def test_after_records_the_rest_is_asked_for_with_them_once_handled(bells_dir: Path) -> None:
    bell = Bell.open(bells_dir, ["t"])
    fetcher = Fetcher([True, False])
    gate_on_bell(fetcher, bell, busy_ms=5, fallback_s=60.0, clock=Clock())
    try:
        assert await fetcher._proc_fetch_request(Assignment(), 0, None)  # records
        fetcher.next_round()
        # The next request leaves out the partitions whose records wait: it is not sent
        # until the consumer has handled them (or a ring).
        held = asyncio.ensure_future(fetcher._proc_fetch_request(Assignment(), 0, None))
        await asyncio.sleep(0)
        assert not held.done() and fetcher.sent == 1
        fetcher._wait_consume_future.set_result(None)  # handled
        assert await asyncio.wait_for(held, 5) is False
        assert fetcher.sent == 1
        fetcher.next_round()
        # Then one request for every partition goes out; empty, it waits for the bell.
        waiting = asyncio.ensure_future(fetcher._proc_fetch_request(Assignment(), 0, None))
        await asyncio.sleep(0)
        assert fetcher.sent == 2 and not waiting.done()
        fetcher._wait_consume_future.set_result(None)
        assert await asyncio.wait_for(waiting, 5) is False
    finally:
        bell.close()


async def test_after_records_a_ring_since_sends_the_next_request_at_once(bells_dir: Path) -> None:
    bell, ringer = Bell.open(bells_dir, ["t"]), Ringer(bells_dir)
    fetcher = Fetcher([True, True])
    gate_on_bell(fetcher, bell, busy_ms=5, fallback_s=60.0, clock=Clock())
    try:
        assert await fetcher._proc_fetch_request(Assignment(), 0, None)
        ringer.ring(["t"])
        await asyncio.wait_for(bell.wait_beyond(0, timeout_s=30), 5)
        fetcher.next_round()
        assert await fetcher._proc_fetch_request(Assignment(), 0, None)  # sent, not held
        assert fetcher.sent == 2
    finally:
        bell.close()
        ringer.close()


def test_a_consumer_is_behind_for_a_while_after_it_is_handed_late_records() -> None:
    wall = [0.0]
    lateness = Lateness(200, lambda: wall[0], 150, hold_ms=5_000)
    lateness.handed([Stamped(-5_000)])
    assert not lateness.behind  # history from before the consumer started: not behind
    wall[0] = 10_000.0
    lateness.handed([Stamped(9_850)])
    assert not lateness.behind  # 150 ms: a busy consumer's normal wait
    lateness.handed([Stamped(9_700)])
    assert lateness.behind  # 300 ms late
    wall[0] += 4_999
    lateness.handed([Stamped(wall[0] - 10)])
    assert lateness.behind  # on time again, but held: fetching on every ring would fall back
    wall[0] += 1
    assert not lateness.behind  # nothing late for the hold: back to the bell


async def test_a_consumer_behind_fetches_without_waiting_for_its_bell(bells_dir: Path) -> None:
    bell = Bell.open(bells_dir, ["t"])
    fetcher = Fetcher([True, False, True, True, True])
    wall = [0.0]
    lateness = Lateness(200, lambda: wall[0], 150, hold_ms=1_000)
    gate_on_bell(fetcher, bell, busy_ms=5, fallback_s=60.0, clock=Clock(), lateness=lateness)
    try:
        wall[0] = 10_000.0
        lateness.handed([Stamped(1_000)])  # handed records nine seconds old
        # Every request goes out at once, empty or not, the partitions with records waiting
        # or not: no ring, no handling waited for (gated, each would wait for the 60-s
        # fallback), each asking the broker to wait longer and send more at a time.
        for _ in range(3):
            await asyncio.wait_for(fetcher._proc_fetch_request(Assignment(), 0, None), 5)
            fetcher.next_round()
        assert fetcher.sent == 3 and fetcher._fetch_max_wait_ms == 150
        wall[0] += 1_000  # the hold is over
        # Gated again: after records, the next request waits to be handled.
        assert await fetcher._proc_fetch_request(Assignment(), 0, None)
        fetcher.next_round()
        held = asyncio.ensure_future(fetcher._proc_fetch_request(Assignment(), 0, None))
        await asyncio.sleep(0)
        assert not held.done() and fetcher.sent == 4
        held.cancel()
    finally:
        bell.close()


def test_the_fallback_is_short_near_traffic_and_long_once_idle() -> None:
    clock = Clock()
    fallback = Fallback(0.1, 1.0, idle_after_s=2.0, clock=clock)
    assert fallback.seconds == 0.1  # just started: a ringer may not know its bell yet
    clock.now = 2.0
    assert fallback.seconds == 1.0  # nothing for a while: idle
    fallback.active()  # a ring or records
    assert fallback.seconds == 0.1
    clock.now = 3.9
    assert fallback.seconds == 0.1
    clock.now = 4.0
    assert fallback.seconds == 1.0
    assert Fallback(0.5, 0.1, idle_after_s=2.0, clock=clock).idle_s == 0.5  # never shorter idle


class TimedBell(Bell):
    """A bell that records how long each wait was allowed, and returns at once (rung when
    `ring_next` says so)."""

    def __init__(self) -> None:
        super().__init__([])
        self.timeouts: list[float] = []
        self.ring_next = False

    async def wait_beyond(self, seen: int, timeout_s: float, *, unless: Any = None) -> None:
        self.timeouts.append(timeout_s)
        if self.ring_next:
            self.rings += 1


async def test_an_idle_consumer_falls_back_less_often_until_a_ring_or_records() -> None:
    clock, bell = Clock(), TimedBell()
    fetcher = Fetcher([False, False, False, True, False])
    gate_on_bell(fetcher, bell, busy_ms=5, fallback_s=0.1, idle_fallback_s=1.0, idle_after_s=2.0, clock=clock)

    async def fetch() -> bool:
        fetcher.next_round()
        return await fetcher._proc_fetch_request(Assignment(), 0, None)

    assert not await fetch()
    assert bell.timeouts[-1] == 0.1  # near its start
    clock.now = 2.5
    assert not await fetch()
    assert bell.timeouts[-1] == 1.0  # idle
    bell.ring_next = True
    assert not await fetch()  # rung while it waited
    bell.ring_next = False
    clock.now = 2.5 + Chase.CHASE_S
    assert await fetch()  # the ring's records: fetched once more at once
    assert not await fetch()
    assert bell.timeouts[-1] == 0.1  # traffic: back to the short fallback
