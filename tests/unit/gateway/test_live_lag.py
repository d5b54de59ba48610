"""The live-event consumer's lag (`live_lag.py`): the age of each batch's oldest record when
it is handed over, history older than the consumer not counted, the largest of the last
`HELD_S` held, none once batches that late stop."""

from __future__ import annotations

from dataclasses import dataclass

from muster_gateway.live_lag import HELD_S, LiveLag


@dataclass
class Rec:
    timestamp: int | None  # the producer's, wall-clock ms


def test_the_lag_is_the_oldest_records_age_when_its_batch_is_handed_over() -> None:
    now = [1_000.0]
    lag = LiveLag(clock=lambda: now[0])
    now[0] = 1_010.0
    # Caught up by the end of the batch, but its first record reached clients 2 s late.
    lag.observe([Rec(1_008_000), Rec(1_009_750), Rec(1_009_990)])
    assert lag.lag_ms() == 2_000.0
    now[0] = 1_011.0
    lag.observe([Rec(1_008_500)])  # later still
    assert lag.lag_ms() == 2_500.0


def test_history_from_before_the_consumer_started_is_not_lag() -> None:
    now = [1_000.0]
    lag = LiveLag(clock=lambda: now[0])
    lag.observe([Rec(1_000), Rec(999_999)])  # a new group reading the log from its start
    lag.observe([Rec(None)])
    assert lag.lag_ms() == 0.0
    now[0] = 1_000.5
    lag.observe([Rec(1_000), Rec(1_000_400)])  # history, then a live record: only it counts
    assert lag.lag_ms() == 100.0


def test_a_late_batch_is_held_over_the_live_ones_after_it_then_lets_go() -> None:
    now = [1_000.0]
    lag = LiveLag(clock=lambda: now[0])
    now[0] = 1_005.0
    lag.observe([Rec(1_002_000)])  # three seconds behind
    now[0] = 1_005.1
    lag.observe([Rec(1_005_090)])  # caught up a moment later: the 3 s still count
    assert lag.lag_ms() == 3_000.0
    now[0] = 1_005.0 + HELD_S
    assert lag.lag_ms() == 0.0  # nothing as late since
    lag.observe([Rec(int(now[0] * 1000) - 20)])
    assert lag.lag_ms() == 20.0
