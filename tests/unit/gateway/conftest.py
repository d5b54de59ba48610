"""Fixtures for the gateway tests. Database tests run against a fresh, migrated database
on the server of $DATABASE_URL, or on an embedded one started for the test session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from muster_runtime.process.db import Pool, create_pool

from tests.databases import fresh_database_url


@pytest.fixture(scope="session")
async def database_url(postgres_server_url: str) -> AsyncIterator[str]:
    async with fresh_database_url(postgres_server_url, "gw_test") as url:
        yield url


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[Pool]:
    created: Any = await create_pool(database_url)
    yield created
    await created.close()
