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

# Per server, a database migrated to head once per test session: each fresh database is a
# copy of it (`CREATE DATABASE … TEMPLATE`, a file copy), not a run of every migration.
_templates: dict[str, str] = {}


async def _template(server: str) -> str:
    name = _templates.get(server)
    if name is None:
        name = f"template_{uuid.uuid4().hex[:12]}"
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f"CREATE DATABASE {name}")
        finally:
            await admin.close()
        await asyncio.to_thread(upgrade, _url(server, name))  # Alembic runs its own event loop
        _templates[server] = name
    return name


def _url(server: str, name: str) -> str:
    return urlunsplit(urlsplit(server)._replace(path="/" + name))


async def drop_templates(server: str) -> None:
    """At the end of the test session: the templates made on `server`."""
    name = _templates.pop(server, None)
    if name is not None:
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()


@contextlib.asynccontextmanager
async def fresh_database_url(server: str, prefix: str = "test") -> AsyncIterator[str]:
    """A new database on `server`, migrated to head, dropped afterwards."""
    template = await _template(server)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server)
    try:
        # Nobody may be connected to a template while it is copied (Alembic's engine may
        # still hold its connection when the first copy is made).
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", template
        )
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    finally:
        await admin.close()
    try:
        yield _url(server, name)
    finally:
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()


def uows(pool: Pool) -> UnitOfWorkFactory:
    """The factory of PostgreSQL units of work on `pool` that decisions take."""
    return partial(PostgresUnitOfWork, pool)
