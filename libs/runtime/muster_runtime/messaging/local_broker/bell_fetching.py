"""A consumer's fetches gated on its bell (`bells`): after an empty fetch, the next goes
out when the consumer is rung, once it has handled its buffered records, or after the
fallback (`Fallback`: short near traffic, long when idle), instead of every
`fetch_max_wait_ms`. A consumer given a `Lateness` (one that reads a whole busy topic: the
gateway's, all of `muster.events`) does not wait for its bell while it is behind: under
sustained load, fetching on every ring, it fell seconds behind while an ungated one kept
up (ADR 0026's amendment).

The hook: aiokafka's Fetcher runs one task per fetch (send, then store what came back; True
when records did), and sends no other fetch to that broker while it runs. That task is
wrapped on the fetcher instance (`aiokafka_hooks.wrap_fetch`), so waiting for the bell
inside it holds the next fetch back. No aiokafka code is patched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from muster_runtime.messaging.consuming import produced_since
from muster_runtime.messaging.local_broker.aiokafka_hooks import (
    Fetch,
    consumed_signal,
    set_fetch_wait,
    wrap_fetch,
)
from muster_runtime.messaging.local_broker.bells import Bell

Clock = Callable[[], float]
log = logging.getLogger("muster.kafka.fetching")


class Chase:
    """When a consumer fetches again at once rather than wait for the bell.

    After records it fetches once more (more may have come meanwhile; an empty answer ends
    it). After a ring it keeps fetching until records come, for at most `CHASE_S`: the local
    broker acknowledges a record a little before a fetch can return it (a few milliseconds
    on a busy machine), so a fetch sent on a ring can come back empty; the bell's fallback
    covers a record slower than that. Records end the chase: the next publication rings
    again, so a consumer does not keep the broker answering empty fetches in between."""

    CHASE_S = 0.025

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until = 0.0

    def chasing(self, fetched: bool) -> bool:
        """After a fetch: whether to fetch again at once rather than wait for the bell."""
        if fetched:
            self._until = 0.0  # records came: a ring, if any, has been answered
            return True
        return self._clock() < self._until

    def rung(self, rung: bool) -> None:
        if rung:
            self._until = self._clock() + self.CHASE_S


class Fallback:
    """How long a consumer nobody rings waits before it fetches anyway.

    The fallback covers a ring that never comes: a publisher outside the cluster, a record
    slower to show than the chase, a consumer too new for a ringer's listing. Those happen
    around traffic, so near a ring or records the wait is `busy_s`; after `idle_after_s`
    of neither it is `idle_s`, so an idle cluster does not keep the broker answering empty
    fetches ten times a second per consumer (the first record after idling, unrung, may
    wait up to `idle_s`)."""

    def __init__(self, busy_s: float, idle_s: float, idle_after_s: float, clock: Clock) -> None:
        self.busy_s = busy_s
        self.idle_s = max(idle_s, busy_s)
        self.idle_after_s = idle_after_s
        self._clock = clock
        # A consumer starts busy: a ringer may not have listed its bell yet.
        self._active_at = clock()

    def active(self) -> None:
        """A ring or records: traffic is here."""
        self._active_at = self._clock()

    @property
    def seconds(self) -> float:
        if self._clock() - self._active_at < self.idle_after_s:
            return self.busy_s
        return self.idle_s


class Lateness:
    """Whether a consumer is behind: the newest record of a batch it was handed was produced
    more than `after_ms` before (records carry their producer's wall-clock time), within
    the last `hold_ms`. While behind it does not wait for its bell and fetches with
    `wait_ms`: the local broker's cost per fetch that finds records grows with its log, and
    a busy consumer that fetches on every ring sends it many small ones. One that is behind
    asks for more at a time, less often, and keeps doing so for the hold, since going back
    to fetching on every ring as soon as it has caught up puts it behind again.
    """

    def __init__(self, after_ms: float, wall_ms: Clock, wait_ms: int, hold_ms: float = 30_000) -> None:
        self.after_ms = after_ms
        self.wait_ms = wait_ms
        self.hold_ms = hold_ms
        self._wall_ms = wall_ms
        self._started_ms = wall_ms()
        self._late_at = float("-inf")  # when it was last handed a late record

    def handed(self, records: Iterable[Any]) -> None:
        """A batch's records from one partition (`consuming.produced_since`: history from
        before the consumer started does not count)."""
        live = produced_since(records, self._started_ms)
        if not live:
            return
        now, newest_ms = self._wall_ms(), max(live)
        if now - newest_ms > self.after_ms:
            if not self.behind:
                log.info("consumer_behind lag_ms=%d", now - newest_ms)
            self._late_at = now

    @property
    def behind(self) -> bool:
        return self._wall_ms() - self._late_at < self.hold_ms


def gate_on_bell(
    fetcher: Any,
    bell: Bell,
    *,
    busy_ms: int,
    fallback_s: float,
    clock: Clock,
    idle_fallback_s: float | None = None,
    idle_after_s: float = 2.0,
    lateness: Lateness | None = None,
) -> None:
    """Make `fetcher` wait for `bell` between fetches (see the module's docstring), except
    while `lateness` says it is behind."""
    chase = Chase(clock)
    fallback = Fallback(fallback_s, idle_fallback_s or fallback_s, idle_after_s, clock)
    # The rings counted before the last fetch, when it brought records.
    after_records: int | None = None

    async def wait_for_bell(seen: int, consumed: Any) -> None:
        # Cancelled when the fetcher closes or the assignment goes, as the fetch itself
        # is: like it, end quietly (the fetcher awaits it unguarded).
        with contextlib.suppress(asyncio.CancelledError):
            await bell.wait_beyond(seen, fallback.seconds, unless=consumed)
        rung = bell.rings > seen
        chase.rung(rung)
        if rung:
            fallback.active()
        # The fetch sent on a ring should come straight back if its records are not
        # visible yet: the chase then asks again.
        set_fetch_wait(fetcher, 1 if rung else busy_ms)

    def gated(fetch: Fetch) -> Fetch:
        return lambda assignment, node_id, request: fetch_or_wait(fetch, assignment, node_id, request)

    async def fetch_or_wait(fetch: Fetch, assignment: Any, node_id: Any, request: Any) -> bool:
        nonlocal after_records
        # Set when the consumer has handled buffered records: the fetcher then has
        # partitions to ask for again, and must not be held here.
        consumed = consumed_signal(fetcher)
        before, after_records = after_records, None
        if lateness is not None and lateness.behind:
            # Records wait in the log: fetch them at the broker's pace, not the bell's.
            set_fetch_wait(fetcher, lateness.wait_ms)
            return bool(await fetch(assignment, node_id, request))
        if before is not None and bell.rings == before and assignment.active:
            # Records came and nothing was rung since: this request leaves out the
            # partitions whose records wait to be handled. Ask for every partition at once
            # when they have been (or on a ring), not for the rest now and those after.
            await wait_for_bell(before, consumed)
            return False
        seen = bell.rings  # rung later: records may have come after the broker looked
        fetched: bool = await fetch(assignment, node_id, request)
        if fetched:
            after_records = seen
            fallback.active()
        if chase.chasing(fetched) or not assignment.active:
            set_fetch_wait(fetcher, busy_ms)
            return fetched
        await wait_for_bell(seen, consumed)
        return fetched

    wrap_fetch(fetcher, gated)
