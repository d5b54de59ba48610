"""The retry policies of muster, on tenacity (ADR 0018).

Each loop that rides out a restart or a lost race names here what it retries, how long it
waits between tries and when it gives up; tenacity does the looping. Policies are
factories: every call starts with a fresh count and a fresh clock.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_exponential,
    wait_fixed,
    wait_none,
    wait_random,
)
from tenacity import RetryCallState as RetryCallState  # re-exported for before_sleep hooks

T = TypeVar("T")
Errors = type[BaseException] | tuple[type[BaseException], ...]
BeforeSleep = Callable[[RetryCallState], None]


def failure(state: RetryCallState) -> BaseException | None:
    """The exception the last attempt raised (for log lines)."""
    return state.outcome.exception() if state.outcome is not None else None


def error_name(state: RetryCallState) -> str:
    return type(failure(state)).__name__


def stop_after_waiting(seconds: float) -> Callable[[RetryCallState], bool]:
    """Give up once the pauses so far add up to `seconds` (time spent trying not counted)."""

    def stop(state: RetryCallState) -> bool:
        return state.idle_for >= seconds

    return stop


def until_reachable(errors: Errors, *, within_s: float, log: logging.Logger) -> AsyncRetrying:
    """Connecting to a broker that may be restarting: 0.25 s doubling to 5 s, given up
    after `within_s` of pauses, each pause logged as `kafka_unreachable`."""

    def before_sleep(state: RetryCallState) -> None:
        log.warning("kafka_unreachable retry_in=%.2fs", state.upcoming_sleep)

    return AsyncRetrying(
        retry=retry_if_exception_type(errors),
        wait=wait_exponential(multiplier=0.25, max=5.0),
        stop=stop_after_waiting(within_s),
        before_sleep=before_sleep,
        reraise=True,
    )


def forever(errors: Errors, *, before_sleep: BeforeSleep) -> AsyncRetrying:
    """A long-lived loop restarted after a transient failure (a database restart…):
    0.5 s doubling to 10 s, never giving up; other errors (and cancellation) propagate."""
    return AsyncRetrying(
        retry=retry_if_exception_type(errors),
        wait=wait_exponential(multiplier=0.5, max=10.0),
        stop=stop_never,
        before_sleep=before_sleep,
        reraise=True,
    )


def _growing_jitter(step_s: float) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        return random.uniform(0, step_s * state.attempt_number)

    return wait


def lost_race(errors: Errors, *, attempts: int, jitter_step_s: float = 0.0) -> AsyncRetrying:
    """A decision that lost a race on its stream, re-run from scratch (it re-reads
    everything): up to `attempts` tries, pausing a random 0..`jitter_step_s`*n seconds
    after the n-th (none when 0), then the last error propagates."""
    return AsyncRetrying(
        retry=retry_if_exception_type(errors),
        wait=_growing_jitter(jitter_step_s) if jitter_step_s > 0 else wait_none(),
        stop=stop_after_attempt(attempts),
        reraise=True,
    )


def until_ready(errors: Errors, *, within_s: float, every_s: float = 0.1) -> AsyncRetrying:
    """A local server that is still starting: try every `every_s` until `within_s` has
    passed since the first try, then the last error propagates."""
    return AsyncRetrying(
        retry=retry_if_exception_type(errors),
        wait=wait_fixed(every_s),
        stop=stop_after_delay(within_s),
        reraise=True,
    )


def until_free(errors: Errors, *, within_s: float, low_s: float, high_s: float) -> AsyncRetrying:
    """Locks held by others: a random pause between `low_s` and `high_s` (so competing
    waiters spread out), given up `within_s` after the first try."""
    return AsyncRetrying(
        retry=retry_if_exception_type(errors),
        wait=wait_random(low_s, high_s),
        stop=stop_after_delay(within_s),
        reraise=True,
    )


def unlimited(errors: Errors, *, before_sleep: BeforeSleep | None = None) -> AsyncRetrying:
    """Retry at once, as often as it takes (each try re-reads what it decides on)."""
    return AsyncRetrying(
        retry=retry_if_exception_type(errors),
        wait=wait_none(),
        stop=stop_never,
        before_sleep=before_sleep,
        reraise=True,
    )


async def call(policy: AsyncRetrying, fn: Callable[[], Awaitable[T]]) -> T:
    """`await fn()` under `policy`: its result, or the error the policy gave up on."""
    async for attempt in policy:
        with attempt:
            return await fn()
    raise AssertionError("unreachable: the policy re-raises when it gives up")
