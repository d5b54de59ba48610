"""The retry policies keep the limits the hand-written loops had."""

from __future__ import annotations

import asyncio
import logging

import pytest
from muster_runtime.process import retrying
from tenacity import AsyncRetrying


class Flaky:
    """Fails with `error` the first `failures` calls, then returns the call count."""

    def __init__(self, failures: int, error: type[Exception] = ConnectionError) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"try {self.calls}")
        return self.calls


def recording(policy: AsyncRetrying) -> tuple[AsyncRetrying, list[float]]:
    """The policy with its pauses recorded instead of slept."""
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    policy.sleep = sleep
    return policy, pauses


async def test_until_reachable_doubles_to_five_seconds_and_gives_up_after_its_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("test.retrying")
    policy, pauses = recording(retrying.until_reachable(ConnectionError, within_s=20.0, log=log))
    flaky = Flaky(failures=100)
    with caplog.at_level(logging.WARNING, logger="test.retrying"), pytest.raises(ConnectionError):
        await retrying.call(policy, flaky)
    # 0.25+0.5+1+2+4+5+5+5 = 22.75: the ninth try sees 20 s of pauses and gives up.
    assert pauses == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert flaky.calls == 9
    assert [r.getMessage() for r in caplog.records][:2] == [
        "kafka_unreachable retry_in=0.25s",
        "kafka_unreachable retry_in=0.50s",
    ]


async def test_forever_backs_off_to_ten_seconds_and_returns_once_it_works() -> None:
    seen: list[str] = []

    def before_sleep(state: retrying.RetryCallState) -> None:
        seen.append(retrying.error_name(state))

    policy, pauses = recording(retrying.forever(ConnectionError, before_sleep=before_sleep))
    assert await retrying.call(policy, Flaky(failures=7)) == 8
    assert pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert seen == ["ConnectionError"] * 7


async def test_forever_lets_other_errors_and_cancellation_through() -> None:
    policy, pauses = recording(retrying.forever(ConnectionError, before_sleep=lambda _: None))
    with pytest.raises(KeyError):
        await retrying.call(policy, Flaky(failures=1, error=KeyError))
    assert pauses == []

    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await retrying.call(retrying.forever(Exception, before_sleep=lambda _: None), cancelled)


async def test_lost_race_tries_at_most_n_times_with_growing_jitter() -> None:
    policy, pauses = recording(retrying.lost_race(ConnectionError, attempts=6, jitter_step_s=0.005))
    flaky = Flaky(failures=100)
    with pytest.raises(ConnectionError, match="try 6"):
        await retrying.call(policy, flaky)
    assert flaky.calls == 6
    assert len(pauses) == 5
    assert all(0 <= pause <= 0.005 * n for n, pause in enumerate(pauses, start=1))


async def test_lost_race_without_jitter_retries_at_once() -> None:
    policy, pauses = recording(retrying.lost_race(ConnectionError, attempts=5))
    assert await retrying.call(policy, Flaky(failures=4)) == 5
    assert pauses == [0.0] * 4


async def test_until_ready_gives_up_after_its_time() -> None:
    flaky = Flaky(failures=1000)
    with pytest.raises(ConnectionError):
        await retrying.call(retrying.until_ready(ConnectionError, within_s=0.3, every_s=0.05), flaky)
    assert 3 <= flaky.calls <= 10


async def test_until_free_pauses_within_its_bounds() -> None:
    policy, pauses = recording(retrying.until_free(ConnectionError, within_s=60, low_s=0.02, high_s=0.2))
    assert await retrying.call(policy, Flaky(failures=20)) == 21
    assert all(0.02 <= pause <= 0.2 for pause in pauses)


async def test_unlimited_retries_as_often_as_it_takes() -> None:
    assert await retrying.call(retrying.unlimited(ConnectionError), Flaky(failures=50)) == 51
