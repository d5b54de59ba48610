"""Restart delays: exponential while a child keeps crashing, reset once it ran stably."""

from __future__ import annotations

import pytest
from muster_launcher.backoff import Backoff


def test_doubles_up_to_the_maximum() -> None:
    backoff = Backoff(initial=0.5, factor=2, maximum=4, stable_after=30)
    assert [backoff.delay(uptime=1) for _ in range(6)] == [0.5, 1, 2, 4, 4, 4]


def test_long_uptime_resets_the_delay() -> None:
    backoff = Backoff(initial=0.5, maximum=10, stable_after=30)
    for _ in range(4):
        backoff.delay(uptime=0.1)
    assert backoff.delay(uptime=30) == 0.5
    assert backoff.delay(uptime=0.1) == 1


def test_reset() -> None:
    backoff = Backoff()
    backoff.delay(0)
    backoff.delay(0)
    backoff.reset()
    assert backoff.delay(0) == backoff.initial


@pytest.mark.parametrize("kwargs", [{"initial": 0}, {"factor": 0.5}, {"initial": 5, "maximum": 1}])
def test_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)
