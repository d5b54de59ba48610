"""Fixtures for the gateway tests. Database tests run against a fresh, migrated database
on the server of $DATABASE_URL, or on an embedded one started for the test session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from muster_runtime.db import Pool, create_pool
from muster_runtime.migrate import upgrade


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@pytest.fixture(scope="session")
async def database_url(postgres_server_url: str) -> AsyncIterator[str]:
    server = postgres_server_url
    name = f"gw_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    url = _with_database(server, name)
    await asyncio.to_thread(upgrade, url)  # Alembic runs its own event loop
    yield url
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[Pool]:
    created: Any = await create_pool(database_url)
    yield created
    await created.close()
