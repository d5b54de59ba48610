"""A bound on turns in flight that follows the turns' latency (ADR 0041's amendment).

A fixed bound on turns in flight (`MUSTER_OVERLOAD_RUNNING`) holds an admitted turn's
latency near the bound over the throughput (Little's law) only while the throughput holds.
When the cluster slows under a long burst (the local broker's cost grows with its log, the
refusals themselves take CPU) the same bound means longer turns. With a latency target
(`MUSTER_OVERLOAD_TURN_LATENCY_MS`) the gateway measures the turns it admitted, from the
admission to the turn's end as its live consumer hands it over (what the client sees), and
moves its bound the way TCP moves its window: each second whose 90th percentile is past the
target, the bound becomes nine tenths of the most turns that were in flight that second;
each second within it, one more, up to the configured bound. Turns that wait for a person
or for their LOCAL client are not measured: they wait for someone, not for the cluster.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from muster_runtime.uow.phases import ACTIVE_PHASES, WAITING_PHASES

WINDOW_S = 1.0
DECREASE = 0.9
FLOOR = 1
MAX_TRACKED = 10_000  # turns admitted and not yet seen ending (the oldest are forgotten)
NO_CEILING = 1_000_000
PHASE_CHANGED = b'"SessionPhaseChanged"'


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


class TurnLatency:
    def __init__(self, target_ms: float, ceiling: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.target_ms = target_ms
        self.ceiling = ceiling if ceiling > 0 else NO_CEILING
        self.bound = self.ceiling
        self._clock = clock
        self._started: OrderedDict[str, float] = OrderedDict()
        self._window_from = clock()
        self._latencies: list[float] = []  # of the turns that ended this window, ms
        self._peak = 0  # the most turns in flight a decision saw this window

    def started(self, session_id: str) -> None:
        """This gateway admitted a turn of `session_id`."""
        self._started[session_id] = self._clock()
        self._started.move_to_end(session_id)
        while len(self._started) > MAX_TRACKED:
            self._started.popitem(last=False)

    def tracks(self, session_id: str) -> bool:
        return session_id in self._started

    def observe(self, records: Iterable[Any]) -> None:
        """A batch of `muster.events` records (key: stream id): the turns it shows ending."""
        for record in records:
            if not record.key or not record.value or PHASE_CHANGED not in record.value:
                continue
            session_id = record.key.decode(errors="replace")
            if session_id not in self._started:
                continue
            phase = _phase(record.value)
            if phase in WAITING_PHASES:
                del self._started[session_id]  # it waits for someone: not measured
            elif phase is not None and phase not in ACTIVE_PHASES:
                self._latencies.append(1000 * (self._clock() - self._started.pop(session_id)))

    def current(self, in_flight: int) -> int:
        """The bound now, for a decision that sees `in_flight` turns; moved once a window."""
        if self._clock() - self._window_from >= WINDOW_S:
            self._move()  # on what the window before saw
        self._peak = max(self._peak, in_flight)
        return self.bound

    def _move(self) -> None:
        if self._latencies and p90(self._latencies) > self.target_ms:
            self.bound = max(FLOOR, int(DECREASE * min(self.bound, self._peak)))
        elif self._latencies:
            self.bound = min(self.ceiling, self.bound + 1)
        self._window_from, self._latencies, self._peak = self._clock(), [], 0


def _phase(value: bytes) -> str | None:
    try:
        record: Any = orjson.loads(value)
        phase = record["payload"]["phase"] if record.get("type") == "SessionPhaseChanged" else None
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    return phase if isinstance(phase, str) else None
