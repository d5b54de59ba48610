"""A belled consumer's chase: it keeps fetching for a moment after records or a ring."""

from __future__ import annotations

from muster_runtime.bell_fetching import Chase

from tests.unit.runtime.fakes import Clock


def test_a_consumer_chases_records_and_rings_for_a_while_then_waits_for_the_bell() -> None:
    clock = Clock()
    chase = Chase(clock)
    assert not chase.chasing(False)  # quiet: wait for the bell
    assert chase.chasing(True)  # records: fetch again at once
    clock.now = Chase.CHASE_S / 2
    assert chase.chasing(False)  # an empty fetch right after records: keep fetching
    clock.now = 1.0
    assert not chase.chasing(False)
    chase.rung(True)  # a ring: the records may not be visible yet
    assert chase.chasing(False)
    clock.now = 1.0 + Chase.CHASE_S
    assert not chase.chasing(False)
    chase.rung(False)  # the fallback ended the wait: no reason to chase
    assert not chase.chasing(False)
