"""Overload shedding (issue 38, ADR 0041): while the cluster is saturated, new turns are
refused with `overloaded` and a retry hint instead of queueing without bound.

The signal is what the gateway can see cheaply: the backlog of work accepted and not yet
started (turns: input queued on a session no harness has started, the `ProcessSession`
commands not yet claimed; delegations: children no worker has started, the
`DelegateToSubagent` commands not yet claimed), its oldest entry's wait, the turns under
way, and how long the gateway waited for a database connection to read them. Delegations
count because with fan-out a turn starts at once and its children are where the work
waits; turns under way count because a bound on the work in flight is a bound on an
admitted turn's latency (Little's law), which a backlog that empties in bursts is not. One
read over the projections (`ClientReads.turn_backlog`), at most every `SAMPLE_EVERY_S`
whatever the request rate, shared by every request of the instance. The rule, a pure
function of a sample and the thresholds, is `overload_rule.shedding`.

Cancel, answers and LOCAL results are never shed: they end or unblock admitted work, so
admitting them is what drains the backlog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from muster_gateway.overload_rule import Backlog, Thresholds, over, shedding
from muster_gateway.turn_latency import TurnLatency

log = logging.getLogger("muster.gateway.overload")

# Often enough that a burst between two reads stays small; a read costs well under a
# millisecond and happens only when new turns are asked for.
SAMPLE_EVERY_S = 0.1
# Before refusing on an estimate that counts turns admitted since the read, read again if
# the read is older than this: at most this often while every new turn is refused.
CONFIRM_EVERY_S = 0.02
# Shedding has ended, for the log, once nothing was refused for this long.
QUIET_S = 5.0


@dataclass
class Episode:
    """Shedding since `started` (clock seconds): for the log."""

    started: float
    refused: int = 0
    last_refused: float = 0.0


Read = Callable[[], Awaitable[Backlog]]
Lag = Callable[[], float]


class Shedder:
    """The instance's view of the cluster's load: a sample at most every `every_s`, read
    once however many requests ask meanwhile, plus the turns this instance admitted since
    that read began (without them, a burst between two samples would be admitted whole
    and overshoot the backlog threshold by a sampling period's worth of arrivals). Those
    ended since the read are not known: a refusal on such an estimate is confirmed by a
    read at most `confirm_s` old. A failed read admits (the decision that follows meets
    the same failure and reports it)."""

    def __init__(
        self, read: Read, limits: Thresholds, *, every_s: float = SAMPLE_EVERY_S,
        clock: Callable[[], float] = time.monotonic, events_lag: Lag | None = None,
        confirm_s: float = CONFIRM_EVERY_S,
    ) -> None:  # fmt: skip
        self._read = read
        # With a latency target the bound on turns in flight follows the admitted turns'
        # latency, under the configured bound if there is one.
        self.latency = (
            TurnLatency(limits.turn_latency_ms, limits.running, clock) if limits.turn_latency_ms else None
        )
        self._events_lag = events_lag
        self.limits = limits
        self._every_s = every_s
        self._confirm_s = min(confirm_s, every_s)
        self._clock = clock
        self._sample: Backlog | None = None
        self._taken = float("-inf")
        self._lock = asyncio.Lock()
        self._admissions = 0  # turns admitted here, ever
        self._admissions_at_read = 0  # ... when the current sample's read began
        self._episode: Episode | None = None  # shedding, for the log

    async def retry_after_ms(self) -> int | None:
        """None while new turns are admitted (counted as admitted); else `overloaded`'s
        retry hint."""
        if self.limits.off:
            return None
        now = await self._estimate(self._every_s)
        if now is None:
            return None
        limits = self._limits(now)
        hint = shedding(now, limits)
        if hint is not None and self._admitted_since_read:
            # The estimate adds the turns admitted since the read but cannot subtract those
            # that ended since: a closed loop whose clients all saw their turns end in one
            # batch looked twice its size. Refuse only on a read that recent.
            now = await self._estimate(self._confirm_s)
            if now is None:
                return None
            limits = self._limits(now)
            hint = shedding(now, limits)
        if hint is None:
            self._admissions += 1
        self._log_episode(now, limits, hint)
        return hint

    def turn_started(self, session_id: str) -> None:
        """A turn admitted here was started (measured when a latency target is set)."""
        if self.latency is not None:
            self.latency.started(session_id)

    def _limits(self, now: Backlog) -> Thresholds:
        if self.latency is None:
            return self.limits
        return replace(self.limits, running=self.latency.current(now.running + now.turns))

    async def _estimate(self, max_age_s: float) -> Backlog | None:
        """A read no older than `max_age_s`, with the turns admitted since and the live
        events' lag now."""
        sample = await self.sample(max_age_s)
        if sample is None:
            return None
        lag = self._events_lag() if self._events_lag is not None else 0.0
        return replace(sample, turns=sample.turns + self._admitted_since_read, events_lag_ms=lag)

    @property
    def _admitted_since_read(self) -> int:
        """Turns admitted here since the current sample's read began: they may be missing
        from it (counted while a newer read is under way too)."""
        return self._admissions - self._admissions_at_read

    def _log_episode(self, now: Backlog, limits: Thresholds, hint: int | None) -> None:
        """One line when shedding starts (which threshold, and what was read) and one when
        it has ended (nothing refused for `QUIET_S`): what an operator needs to tell a
        saturated cluster from a tight setting. Under sustained load shedding flips with
        every read; those flips are one episode."""
        clock = self._clock()
        if hint is not None:
            if self._episode is None:
                log.warning(
                    "overload_shedding_started over=%s turns=%d delegations=%d running=%d "
                    "admitted_since_read=%d oldest_wait_ms=%.0f pool_wait_ms=%.0f events_lag_ms=%.0f "
                    "bound=%d",
                    over(now, limits), now.turns - self._admitted_since_read,
                    now.delegations, now.running, self._admitted_since_read, now.oldest_wait_ms,
                    now.pool_wait_ms, now.events_lag_ms, limits.running,
                )  # fmt: skip
                self._episode = Episode(clock)
            self._episode.refused += 1
            self._episode.last_refused = clock
        elif self._episode is not None and clock - self._episode.last_refused >= QUIET_S:
            episode, self._episode = self._episode, None
            log.warning(
                "overload_shedding_ended after_s=%.1f refused=%d",
                episode.last_refused - episode.started, episode.refused,
            )  # fmt: skip

    async def sample(self, max_age_s: float | None = None) -> Backlog | None:
        max_age_s = self._every_s if max_age_s is None else max_age_s
        if self._clock() - self._taken < max_age_s:
            return self._sample
        async with self._lock:
            if self._clock() - self._taken >= max_age_s:  # nobody read it meanwhile
                # Turns admitted from here on may be missing from the read: counted anew
                # once it is in.
                admissions = self._admissions
                try:
                    self._sample = await self._read()
                except Exception as exc:
                    log.warning("overload_sample_failed error=%s", type(exc).__name__)
                    self._sample = None
                self._taken = self._clock()
                self._admissions_at_read = admissions
        return self._sample
