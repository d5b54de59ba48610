"""`work`, the unit-of-work fixture the contract suites share (both implementations),
`pool`, a pool on a fresh migrated database, `spans`, tracing into memory, and
`bells_dir`, a directory for fetch bells."""

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from muster_runtime.process.db import Pool, create_pool

from tests.databases import fresh_database_url
from tests.unit.runtime.spans import spans  # noqa: F401
from tests.unit.runtime.uow_harness import work  # noqa: F401


@pytest.fixture
async def pool(postgres_server_url: str) -> AsyncIterator[Pool]:
    async with fresh_database_url(postgres_server_url, "runtime") as url:
        created: Any = await create_pool(url)
        try:
            yield created
        finally:
            await created.close()


@pytest.fixture
def bells_dir() -> Iterator[Path]:
    # Short: an AF_UNIX address holds 107 bytes, and pytest's tmp paths can be long.
    directory = Path(tempfile.mkdtemp(prefix="bells-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
