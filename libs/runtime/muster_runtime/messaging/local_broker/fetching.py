"""The services' Kafka consumer: adaptive fetch wait, and commits behind the next batch.

The local broker (Tansu) cannot be trusted to answer a waiting fetch before
`fetch_max_wait_ms` elapses (it misses some arrivals: ADR 0024's amendment), so a consumer
sends it 1000 / `fetch_max_wait_ms` fetches a second whether or not anything arrives: with 5
ms, four idle consumer groups kept most of a core busy (them and Tansu). `FetchWait` keeps
the configured low wait while records arrived within `idle_after_s`, then raises it to
`idle_ms`; the first fetch that returns records brings it back down. Real Kafka answers a
waiting fetch as soon as data arrives, and runs with a long wait anyway.

The hook: aiokafka's Fetcher reads `self._fetch_max_wait_ms` each time it builds a
FetchRequest, and FastStream creates every subscriber's consumer through the broker
config's `builder` (a `partial(AIOKafkaConsumer, ...)` set when the broker connects).
`AdaptiveFetchBroker` swaps that builder for one making `AdaptiveConsumer`s with the same
options, which set the fetcher's wait after every `getmany`. No FastStream or aiokafka
code is patched; the one private attribute written is the fetcher's wait.

With a bells directory (`bells`), a consumer whose fetch wait is at most the bell's
fallback polls no more: after an empty fetch the next goes out when it is rung, or after
the fallback (`bell_fetching`); with `bell_relevant`, only by rings naming a key it accepts.

`AdaptiveConsumer.getmany` also keeps waiting (in `timeout_ms` slices) until records
arrive: FastStream's batch loop sleeps `batch_timeout_ms` after an empty `getmany`, and a
record arriving during that sleep waited for it. Stopping is unaffected: FastStream
cancels the consume task, and a stopped consumer raises `ConsumerStoppedError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from faststream.kafka import KafkaBroker

from muster_runtime.messaging.commits import CommitBehind
from muster_runtime.messaging.local_broker.bell_fetching import gate_on_bell
from muster_runtime.messaging.local_broker.bells import Bell, Relevant

Clock = Callable[[], float]


class FetchWait:
    """Decides a consumer's `fetch_max_wait_ms` from when it last received records."""

    def __init__(self, busy_ms: int, idle_ms: int, idle_after_s: float, *, now: float = 0.0) -> None:
        self.busy_ms = busy_ms
        # Against real Kafka the busy wait is already long (it answers early when data
        # arrives); never make an idle consumer poll faster than a busy one.
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


class AdaptiveConsumer(CommitBehind):
    """The services' consumer: its fetch wait follows `FetchWait`, its `getmany` with a
    timeout returns only records (or raises), re-deciding the wait every slice, and its
    commits overlap the next batch (`CommitBehind`)."""

    def __init__(
        self,
        *topics: str,
        idle_fetch_max_wait_ms: int,
        idle_after_s: float,
        clock: Clock = time.monotonic,
        bells_dir: Path | None = None,
        bell_fallback_s: float = 0.1,
        bell_relevant: Relevant | None = None,
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
        self._bell_relevant = bell_relevant
        self.bell: Bell | None = None

    async def start(self) -> None:
        await super().start()
        if self._bells_dir is None or self._fetcher is None:
            return
        self.bell = Bell.open(self._bells_dir, self.subscription(), self._bell_relevant)
        gate_on_bell(
            self._fetcher,
            self.bell,
            busy_ms=self.fetch_wait.busy_ms,
            fallback_s=self._bell_fallback_s,
            clock=self._clock,
        )

    async def stop(self) -> None:
        try:
            await super().stop()
        finally:
            if self.bell is not None:
                self.bell.close()
                self.bell = None

    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[Any, list[Any]]:
        while True:
            batch: dict[Any, list[Any]] = await super().getmany(
                *partitions, timeout_ms=timeout_ms, max_records=max_records
            )
            if self.fetch_wait.adaptive and self.bell is None:
                wait = self.fetch_wait.observe(sum(map(len, batch.values())), self._clock())
                # Set before yielding to the loop, so the fetcher's next request (it runs
                # once we yield) already uses it.
                fetcher = self._fetcher
                if fetcher is not None:
                    fetcher._fetch_max_wait_ms = wait
            if batch or timeout_ms <= 0:
                return batch


def adaptive_builder(
    builder: Callable[..., AIOKafkaConsumer],
    *,
    idle_fetch_max_wait_ms: int,
    idle_after_s: float,
    bells_dir: Path | None = None,
    bell_fallback_s: float = 0.1,
    bell_relevant: Relevant | None = None,
) -> Callable[..., AIOKafkaConsumer]:
    """FastStream's consumer factory, making `AdaptiveConsumer`s with the same options."""
    if not isinstance(builder, partial) or builder.func is not AIOKafkaConsumer:
        return builder  # not the factory we know: leave it alone
    return partial(
        AdaptiveConsumer,
        *builder.args,
        idle_fetch_max_wait_ms=idle_fetch_max_wait_ms,
        idle_after_s=idle_after_s,
        bells_dir=bells_dir,
        bell_fallback_s=bell_fallback_s,
        bell_relevant=bell_relevant,
        **builder.keywords,
    )


class AdaptiveFetchBroker(KafkaBroker):
    """A `KafkaBroker` whose subscribers consume through `AdaptiveConsumer`s. An idle wait
    not above the subscribers' `fetch_max_wait_ms` (e.g. 0) keeps their wait constant."""

    def __init__(
        self,
        *args: Any,
        idle_fetch_max_wait_ms: int = 0,
        idle_after_s: float = 2.0,
        bells_dir: Path | None = None,
        bell_fallback_s: float = 0.1,
        bell_relevant: Relevant | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._idle_wait_ms = idle_fetch_max_wait_ms
        self._idle_after_s = idle_after_s
        self._bells_dir = bells_dir
        self._bell_fallback_s = bell_fallback_s
        self._bell_relevant = bell_relevant

    async def _connect(self) -> Callable[..., AIOKafkaConsumer]:
        builder = await super()._connect()
        adapted = adaptive_builder(
            builder,
            idle_fetch_max_wait_ms=self._idle_wait_ms,
            idle_after_s=self._idle_after_s,
            bells_dir=self._bells_dir,
            bell_fallback_s=self._bell_fallback_s,
            bell_relevant=self._bell_relevant,
        )
        if adapted is not builder:
            # Subscribers read the config's builder when they start, after connecting.
            self.config.broker_config.builder = adapted
        return adapted
