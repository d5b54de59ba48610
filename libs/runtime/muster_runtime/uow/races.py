"""The errors by which a decision learns it lost a race with another writer of its stream,
whichever unit of work ran it: re-running it (it re-reads everything) is the answer.

PostgreSQL may also break a deadlock between two such writers by failing one of them;
the in-memory unit of work serialises its transactions and only ever raises the first."""

from __future__ import annotations

import asyncpg

from muster_runtime.store.eventstore import ConcurrencyError

LOST_RACES: tuple[type[Exception], ...] = (ConcurrencyError, asyncpg.DeadlockDetectedError)
