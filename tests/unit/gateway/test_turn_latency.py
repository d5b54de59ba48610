"""The bound on turns in flight that follows the admitted turns' latency (`turn_latency`,
ADR 0041): what it measures from `muster.events` records, and how it moves, on an
injected clock; and the shedder refusing on the moved bound."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
from muster_gateway.overload import Shedder
from muster_gateway.overload_rule import Backlog, Thresholds
from muster_gateway.turn_latency import NO_CEILING, TurnLatency, p90

A, B, C = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222", "33333333-3333-3333-3333-333333333333"


def phase(session_id: str, phase: str) -> Any:
    value = {"kind": "event", "type": "SessionPhaseChanged", "payload": {"phase": phase}, "stream_id": session_id}
    return SimpleNamespace(key=session_id.encode(), value=orjson.dumps(value), timestamp=0)


def other(session_id: str) -> Any:
    value = {"kind": "event", "type": "AssistantMessageRecorded", "payload": {"content": "COMPLETED"}}
    return SimpleNamespace(key=session_id.encode(), value=orjson.dumps(value), timestamp=0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_p90_is_the_value_nine_in_ten_are_at_or_under() -> None:
    assert p90([float(v) for v in range(1, 11)]) == 9.0
    assert p90([5.0]) == 5.0


def test_a_turn_is_measured_from_its_admission_to_its_end_as_the_consumer_sees_it() -> None:
    clock = Clock()
    turns = TurnLatency(300, 20, clock)
    turns.started(A)
    turns.started(B)
    turns.started(C)
    assert turns.current(in_flight=3) == 20  # the decision that admitted the third saw 3
    clock.now = 0.5
    turns.observe([phase(A, "RUNNING"), other(A), phase(B, "WAITING_APPROVAL")])
    assert turns.tracks(A) and not turns.tracks(B)  # B waits for a person: not measured
    clock.now = 0.8
    turns.observe([phase(A, "COMPLETED"), phase(C, "FAILED"), phase(B, "COMPLETED")])
    assert not turns.tracks(A) and not turns.tracks(C)
    clock.now = 1.0
    # 800 ms for both measured turns, past the 300-ms target: 9/10 of the 3 seen in flight
    assert turns.current(in_flight=3) == 2


def test_the_bound_falls_to_nine_tenths_of_the_peak_in_flight_and_climbs_one_a_second() -> None:
    clock = Clock()
    turns = TurnLatency(300, 0, clock)  # no configured bound: no ceiling
    assert turns.current(in_flight=5) == NO_CEILING
    for n in range(20):
        turns.started(f"s{n}")
    assert turns.current(in_flight=20) == NO_CEILING  # the peak this second: 20
    clock.now = 1.0
    turns.observe([phase(f"s{n}", "COMPLETED") for n in range(20)])  # each took 1 s
    assert turns.current(in_flight=4) == 18  # 0.9 x 20, the second's peak
    # a second with no turn ending leaves it as it is
    clock.now = 2.0
    assert turns.current(in_flight=4) == 18
    # fast turns: one more a second
    for second in (3.0, 4.0):
        turns.started(A)
        clock.now = second - 0.9
        turns.observe([phase(A, "COMPLETED")])  # 100 ms
        clock.now = second
        assert turns.current(in_flight=1) == 18 + int(second) - 2


def test_the_bound_stays_between_one_and_the_configured_bound() -> None:
    clock = Clock()
    turns = TurnLatency(300, 3, clock)
    assert turns.current(in_flight=0) == 3
    turns.started(A)
    clock.now = 1.0
    turns.observe([phase(A, "COMPLETED")])
    assert turns.current(in_flight=1) == 1  # slow, and at least one
    for second in range(2, 8):
        turns.started(A)
        turns.observe([phase(A, "COMPLETED")])  # at once
        clock.now = float(second)
        turns.current(in_flight=0)
    assert turns.current(in_flight=0) == 3  # never past the configured bound


def test_forgets_the_oldest_of_too_many_turns_never_seen_ending() -> None:
    turns = TurnLatency(300, 0, Clock())
    for n in range(10_001):
        turns.started(f"s{n}")
    assert not turns.tracks("s0") and turns.tracks("s10000")


class Reads:
    def __init__(self, sample: Backlog) -> None:
        self.sample = sample

    async def __call__(self) -> Backlog:
        return self.sample


async def test_the_shedder_refuses_on_the_moved_bound() -> None:
    clock = Clock()
    shedder = Shedder(Reads(Backlog(0, 0, 0, running=6)), Thresholds(turn_latency_ms=300), clock=clock)
    assert shedder.latency is not None
    assert await shedder.retry_after_ms() is None  # no bound yet: 6 in flight admitted
    shedder.turn_started(A)
    clock.now = 1.5
    shedder.latency.observe([phase(A, "COMPLETED")])  # 1.5 s
    # the bound moves to 9/10 of the 6 in flight seen: 5, and 6 are under way
    assert await shedder.retry_after_ms() == 1_000
    assert shedder.latency.bound == 5
    # without a target, the same reads admit
    plain = Shedder(Reads(Backlog(0, 0, 0, running=6)), Thresholds(backlog=100), clock=clock)
    assert plain.latency is None and await plain.retry_after_ms() is None
