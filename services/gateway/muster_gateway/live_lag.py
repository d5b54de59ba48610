"""How far behind the gateway's live-event consumer reads `muster.events`: the age, when it
was handed over, of the oldest record of each batch (its producer's timestamp), which is
how late that record reached the gateway and the clients waiting for it.

Clients see a session's events only as fast as this consumer reads them: a turn that
completed in the database is not done for its client until the gateway hands out its
`COMPLETED`. On a saturated cluster the broker can fall behind in serving this consumer
(the local broker's cost grows with its log, ADR 0026) while turns keep completing on time,
so a client's latency grows without any backlog of work to show it. The overload rule
sheds new turns while this lag is past its threshold (`MUSTER_OVERLOAD_EVENTS_LAG_MS`,
ADR 0041): fewer new turns, fewer records, and the consumer catches up.

Records produced before this consumer started are history a new group reads first (its
group is new with each instance): they say nothing about live delivery and are not counted.
The largest lag of the last `HELD_S` is what counts: a consumer catching up hands over one
batch of old records and the next of new ones a moment later, and shedding that flickered
off between the two would admit a burst into a consumer still behind. After `HELD_S`
without a batch as late, the reading is the latest batch's, or 0 without any: the consumer
is rung or polls for new records, so none waits behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from muster_runtime.messaging.consuming import produced_since

HELD_S = 2.0


class LiveLag:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock  # wall-clock seconds: record timestamps are wall-clock ms
        self._started_ms = clock() * 1000
        self._lag_ms = 0.0
        self._seen_at = float("-inf")

    def observe(self, records: Iterable[Any]) -> None:
        """A batch the consumer was handed (records with a `timestamp` in ms)."""
        live = produced_since(records, self._started_ms)
        if not live:
            return
        now = self._clock()
        lag = max(0.0, now * 1000 - min(live))
        if lag >= self.lag_ms():
            self._lag_ms, self._seen_at = lag, now

    def lag_ms(self) -> float:
        """The largest lag seen in the last `HELD_S`, 0 without any."""
        return self._lag_ms if self._clock() - self._seen_at < HELD_S else 0.0
