"""Fresh, migrated databases for database-level tests, on the test session's server."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from functools import partial
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from muster_runtime.process.db import Pool
from muster_runtime.store.migrate import upgrade
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory


@contextlib.asynccontextmanager
async def fresh_database_url(server: str, prefix: str = "test") -> AsyncIterator[str]:
    """A new database on `server`, migrated to head, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    url = urlunsplit(urlsplit(server)._replace(path="/" + name))
    try:
        await asyncio.to_thread(upgrade, url)  # Alembic runs its own event loop
        yield url
    finally:
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()


def uows(pool: Pool) -> UnitOfWorkFactory:
    """The factory of PostgreSQL units of work on `pool` that decisions take."""
    return partial(PostgresUnitOfWork, pool)
