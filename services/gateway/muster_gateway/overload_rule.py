"""The overload rule (ADR 0041): what a sample of the cluster's load holds (`Backlog`),
the thresholds a deployment sets (`Thresholds`), and `shedding`, a pure function of the two
that says whether new turns are refused and with what retry hint. The sampler that feeds it
is `overload.Shedder`."""

from __future__ import annotations

from dataclasses import dataclass

from muster_runtime.process.settings import Settings

MIN_RETRY_AFTER_MS = 1_000
MAX_RETRY_AFTER_MS = 30_000


@dataclass(frozen=True)
class Backlog:
    """A sample: turns and delegations accepted and not yet started, the oldest one's wait,
    and how long reading them waited for a database connection."""

    turns: int
    oldest_wait_ms: float
    pool_wait_ms: float = 0.0
    delegations: int = 0
    running: int = 0  # turns under way (not subagents): running or waiting for children
    events_lag_ms: float = 0.0  # this gateway's live-event consumer behind (`live_lag`)

    @property
    def waiting(self) -> int:
        return self.turns + self.delegations


@dataclass(frozen=True)
class Thresholds:
    """Past any of them new turns are shed; 0 turns one off."""

    backlog: int = 0
    backlog_age_ms: int = 0
    pool_wait_ms: int = 0
    running: int = 0  # turns under way plus turns not yet started
    events_lag_ms: int = 0  # the live-event consumer's lag
    turn_latency_ms: int = 0  # the admitted turns' latency target: moves the bound (`turn_latency`)

    @classmethod
    def of(cls, settings: Settings) -> Thresholds:
        return cls(
            settings.overload_backlog,
            settings.overload_backlog_age_ms,
            settings.overload_pool_wait_ms,
            settings.overload_running,
            settings.overload_events_lag_ms,
            settings.overload_turn_latency_ms,
        )

    @property
    def off(self) -> bool:
        return not (
            self.backlog
            or self.backlog_age_ms
            or self.pool_wait_ms
            or self.running
            or self.events_lag_ms
            or self.turn_latency_ms
        )


def over(sample: Backlog, limits: Thresholds) -> str | None:
    """The first threshold `sample` is past (its setting's name, for the log), or None."""
    old = sample.waiting > 0 and sample.oldest_wait_ms >= limits.backlog_age_ms
    rules = (
        ("backlog", limits.backlog > 0 and sample.waiting >= limits.backlog),
        ("backlog_age_ms", limits.backlog_age_ms > 0 and old),
        ("pool_wait_ms", limits.pool_wait_ms > 0 and sample.pool_wait_ms >= limits.pool_wait_ms),
        ("running", limits.running > 0 and sample.running + sample.turns >= limits.running),
        ("events_lag_ms", limits.events_lag_ms > 0 and sample.events_lag_ms >= limits.events_lag_ms),
    )
    return next((name for name, past in rules if past), None)


def shedding(sample: Backlog, limits: Thresholds) -> int | None:
    """None: admit new turns. Else the retry hint in ms: the oldest waiting turn's wait
    or the live events' lag, whichever is longer (what a turn admitted now would wait
    behind), between 1 s and 30 s."""
    if over(sample, limits) is None:
        return None
    wait = max(sample.oldest_wait_ms, sample.events_lag_ms)
    return int(min(MAX_RETRY_AFTER_MS, max(MIN_RETRY_AFTER_MS, wait)))
