"""The local broker's consumer: an adaptive fetch wait, or fetches gated on a bell.

The local broker (Tansu) cannot be trusted to answer a waiting fetch before
`fetch_max_wait_ms` elapses (it misses some arrivals: ADR 0024's amendment), so a consumer
sends it 1000 / `fetch_max_wait_ms` fetches a second whether or not anything arrives: with 5
ms, four idle consumer groups kept most of a core busy (them and Tansu). `FetchWait` keeps
the configured low wait while records arrived within `idle_after_s`, then raises it to
`idle_ms`; the first fetch that returns records brings it back down. It is set on the
fetcher after every `getmany` slice (`aiokafka_hooks.set_fetch_wait`, ADR 0035).

With a bells directory (`bells`), a consumer whose fetch wait is at most the bell's
fallback polls no more: after an empty fetch the next goes out when it is rung, or after
the fallback (`bell_fetching`: `bell_idle_fallback_s` once idle); with `bell_relevant`,
only by rings naming a key it accepts.

Real Kafka answers a waiting fetch as soon as data arrives: its consumers are plain
`ServiceConsumer`s (`tuning`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from muster_runtime.messaging.consumer import ServiceConsumer, consumer_builder
from muster_runtime.messaging.local_broker.aiokafka_hooks import fetcher_of, set_fetch_wait
from muster_runtime.messaging.local_broker.bell_fetching import Lateness, gate_on_bell
from muster_runtime.messaging.local_broker.bells import Bell, Relevant

Clock = Callable[[], float]

# A consumer with `catch_up` handed records this long after they were produced is behind:
# far above what a consumer that keeps up sees at saturation (tens of ms), so a loaded
# cluster's consumers stay on their bells.
BEHIND_MS = 500


class FetchWait:
    """Decides a consumer's `fetch_max_wait_ms` from when it last received records."""

    def __init__(self, busy_ms: int, idle_ms: int, idle_after_s: float, *, now: float = 0.0) -> None:
        self.busy_ms = busy_ms
        # Never make an idle consumer poll faster than a busy one.
        self.idle_ms = max(idle_ms, busy_ms)
        self.idle_after_s = idle_after_s
        # A consumer starts busy: it may have a backlog to catch up on.
        self._last_records_at = now

    def observe(self, records: int, now: float) -> int:
        """Note a `getmany` that returned `records` records; the wait for the next fetch."""
        if records:
            self._last_records_at = now
        return self.wait_ms(now)

    def wait_ms(self, now: float) -> int:
        if now - self._last_records_at < self.idle_after_s:
            return self.busy_ms
        return self.idle_ms

    @property
    def adaptive(self) -> bool:
        return self.idle_ms > self.busy_ms


class AdaptiveConsumer(ServiceConsumer):
    """A consumer of the local broker: its fetch wait follows `FetchWait`, or, with a
    bells directory, its fetches wait for its bell."""

    def __init__(
        self,
        *topics: str,
        idle_fetch_max_wait_ms: int,
        idle_after_s: float,
        clock: Clock = time.monotonic,
        bells_dir: Path | None = None,
        bell_fallback_s: float = 0.1,
        bell_idle_fallback_s: float | None = None,
        bell_relevant: Relevant | None = None,
        catch_up: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(*topics, **options)
        self._clock = clock
        busy_ms = int(options.get("fetch_max_wait_ms", 500))
        self.fetch_wait = FetchWait(busy_ms, idle_fetch_max_wait_ms, idle_after_s, now=clock())
        # A consumer that asked to wait longer than the fallback (recovery's backstop) does
        # not care for latency: it keeps polling at its own pace.
        self._bells_dir = bells_dir if busy_ms <= bell_fallback_s * 1000 else None
        self._bell_fallback_s = bell_fallback_s
        self._bell_idle_fallback_s = bell_idle_fallback_s
        self._bell_relevant = bell_relevant
        self.bell: Bell | None = None
        # With `catch_up`, records handed over `BEHIND_MS` after they were produced put the
        # consumer behind: it then fetches with a wait of one and a half fallbacks
        # (bell_fetching.Lateness). For a consumer of a whole busy topic (the gateway's).
        self.lateness = (
            Lateness(BEHIND_MS, lambda: time.time() * 1000, int(1.5 * bell_fallback_s * 1000))
            if catch_up
            else None
        )

    async def start(self) -> None:
        await super().start()
        fetcher = fetcher_of(self)
        if self._bells_dir is None or fetcher is None:
            return
        self.bell = Bell.open(self._bells_dir, self.subscription(), self._bell_relevant)
        gate_on_bell(
            fetcher,
            self.bell,
            busy_ms=self.fetch_wait.busy_ms,
            fallback_s=self._bell_fallback_s,
            idle_fallback_s=self._bell_idle_fallback_s,
            idle_after_s=self.fetch_wait.idle_after_s,
            clock=self._clock,
            lateness=self.lateness,
        )

    async def stop(self) -> None:
        try:
            await super().stop()
        finally:
            if self.bell is not None:
                self.bell.close()
                self.bell = None

    def after_getmany(self, batch: dict[Any, list[Any]]) -> None:
        if self.bell is not None:
            if self.lateness is not None:
                for records in batch.values():  # late on any partition: behind
                    self.lateness.handed(records)
            return
        if not self.fetch_wait.adaptive:
            return
        wait = self.fetch_wait.observe(sum(map(len, batch.values())), self._clock())
        fetcher = fetcher_of(self)
        if fetcher is not None:
            set_fetch_wait(fetcher, wait)


def adaptive_builder(
    builder: Callable[..., AIOKafkaConsumer],
    *,
    idle_fetch_max_wait_ms: int,
    idle_after_s: float,
    bells_dir: Path | None = None,
    bell_fallback_s: float = 0.1,
    bell_idle_fallback_s: float | None = None,
    bell_relevant: Relevant | None = None,
    catch_up: bool = False,
) -> Callable[..., AIOKafkaConsumer]:
    """FastStream's consumer factory, making `AdaptiveConsumer`s with the same options."""
    return consumer_builder(
        builder,
        AdaptiveConsumer,
        idle_fetch_max_wait_ms=idle_fetch_max_wait_ms,
        idle_after_s=idle_after_s,
        bells_dir=bells_dir,
        bell_fallback_s=bell_fallback_s,
        bell_idle_fallback_s=bell_idle_fallback_s,
        bell_relevant=bell_relevant,
        catch_up=catch_up,
    )
