"""Recovery's two ports, the unit of work and the scans, on one implementation or the other:
`ports` runs a test in memory, then on a fresh migrated PostgreSQL database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from muster_recovery.memory_scans import MemoryScans
from muster_recovery.postgres_scans import PostgresScans
from muster_recovery.scan_port import RecoveryScans
from muster_runtime.process.db import create_pool
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from tests.databases import fresh_database_url


@dataclass(frozen=True)
class Ports:
    uows: UnitOfWorkFactory
    scans: RecoveryScans


def in_memory() -> tuple[MemoryStore, Ports]:
    store = MemoryStore()
    return store, Ports(store.uow, MemoryScans(store))


@pytest.fixture(params=["memory", "postgres"])
async def ports(request: pytest.FixtureRequest, postgres_server_url: str) -> AsyncIterator[Ports]:
    if request.param == "memory":
        yield in_memory()[1]
        return
    async with fresh_database_url(postgres_server_url, "scans") as url:
        pool: Any = await create_pool(url)
        try:
            yield Ports(partial(PostgresUnitOfWork, pool), PostgresScans(pool))
        finally:
            await pool.close()
