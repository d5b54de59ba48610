"""The in-memory twin checked against PostgreSQL, read model for read model (issue 35):
the same histories are played on both units of work, through their operations as real
decisions make them, and every row the twin keeps must equal PostgreSQL's projection row,
column for column. PostgreSQL is the reference: a difference is a bug of the twin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from tests.databases import fresh_database_url
from tests.unit.runtime.twin_decisions import one_statement_decisions
from tests.unit.runtime.twin_histories import histories
from tests.unit.runtime.twin_reads import every_read
from tests.unit.runtime.twin_streams import History, delegated_turn, play, side_tasks
from tests.unit.runtime.twin_tables import (
    KEYS,
    Rows,
    differences,
    postgres_tables,
    ticking_clock,
    twin_tables,
)


@pytest.fixture(scope="module")
async def database(postgres_server_url: str) -> AsyncIterator[Pool]:
    """One database for the module: each history has ids of its own, and only its rows
    are compared, so histories need no fresh database each (hypothesis plays dozens)."""
    async with fresh_database_url(postgres_server_url, "twin") as url:
        pool: Any = await create_pool(url)
        try:
            yield pool
        finally:
            await pool.close()


@pytest.fixture(scope="module", autouse=True)
def clock() -> Iterator[None]:
    with ticking_clock():
        yield


async def played_on_both(database: Pool, history: History) -> tuple[dict[str, Rows], dict[str, Rows]]:
    store = MemoryStore()
    twin_outcomes = await play(store.uow, history)
    outcomes = await play(lambda: PostgresUnitOfWork(database), history)
    assert twin_outcomes == outcomes, "decisions differ (twin, postgres)"
    reads = differences(
        await every_read(store.uow, history), await every_read(lambda: PostgresUnitOfWork(database), history)
    )
    assert not reads, "reads differ (twin != postgres):\n" + "\n".join(reads)
    twin = twin_tables(store, history.sessions, history.executions)
    return twin, await postgres_tables(database, history.sessions, history.executions)


def assert_same_read_models(twin: dict[str, Rows], postgres: dict[str, Rows]) -> None:
    rows = differences({t: {str(k): r for k, r in twin[t].items()} for t in KEYS},
                       {t: {str(k): r for k, r in postgres[t].items()} for t in KEYS})  # fmt: skip
    assert not rows, "read models differ (twin != postgres):\n" + "\n".join(rows)


async def test_a_delegated_turn_and_its_side_tasks_project_the_same_rows(database: Pool) -> None:
    history = History()
    ids = delegated_turn(history)
    side_tasks(history, ids["parent"], skipped=[ids["stale"]])
    twin, postgres = await played_on_both(database, history)
    assert all(postgres[table] for table in KEYS), "every read model gets rows"
    assert_same_read_models(twin, postgres)


async def test_the_one_statement_decisions_decide_and_project_alike(database: Pool) -> None:
    history = History()
    one_statement_decisions(history)
    twin, postgres = await played_on_both(database, history)
    assert_same_read_models(twin, postgres)


@settings(max_examples=30, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
async def test_generated_histories_project_the_same_rows(database: Pool, history: History) -> None:
    twin, postgres = await played_on_both(database, history)
    assert_same_read_models(twin, postgres)
