"""A belled consumer's chase: after records it fetches once more; after a ring it keeps
fetching until records come, for a while at most; otherwise it waits for the bell."""

from __future__ import annotations

from muster_runtime.bell_fetching import Chase

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
