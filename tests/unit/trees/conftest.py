"""Side-task trees against PostgreSQL. Each module gets a database of its own: its tests
compare a replay of the whole log with the live tables, which rows that other modules
write directly (as older versions did) would make differ."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from muster_runtime.process.db import Pool, create_pool

from tests.databases import fresh_database_url


@pytest.fixture(scope="module")
async def pool(postgres_server_url: str) -> AsyncIterator[Pool]:
    async with fresh_database_url(postgres_server_url, "tree_test") as url:
        created: Any = await create_pool(url)
        yield created
        await created.close()
