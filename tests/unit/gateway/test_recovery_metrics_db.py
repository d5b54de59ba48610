"""Recovery figures on `GET /metrics`, summed from the projections of a fresh migrated
PostgreSQL at scrape time; and the endpoint still answering when the database does not."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient
from muster_gateway.bootstrap import build_app
from muster_gateway.context import Gateway
from muster_gateway.metrics import Metrics
from muster_gateway.postgres_reads import PostgresReads
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.process.settings import Settings
from prometheus_client.parser import text_string_to_metric_families

from tests.databases import fresh_database_url

T = datetime(2026, 1, 1, tzinfo=UTC)
RECOVERY_FAMILIES = {"muster_recoveries", "muster_lease_expiries", "muster_result_deliveries",
                     "muster_results_suppressed", "muster_executions"}


@pytest.fixture
async def database(postgres_server_url: str) -> AsyncIterator[str]:
    """A database of the test's own: the suite's shared one holds other tests' rows."""
    async with fresh_database_url(postgres_server_url, "gw_metrics") as url:
        yield url


@pytest.fixture
async def own_pool(database: str) -> AsyncIterator[Pool]:
    created: Any = await create_pool(database, min_size=1, max_size=2)
    yield created
    await created.close()


async def session_row(pool: Pool, recoveries: int) -> UUID:
    session_id = uuid4()
    await pool.execute(
        """INSERT INTO sessions (session_id, user_id, session_type, root_session_id, agent_type, phase,
               version, created_at, updated_at, recoveries)
           VALUES ($1, 'alice', 'NORMAL', $1, 'general', 'RUNNING', 1, $2, $2, $3)""",
        session_id, T, recoveries)
    return session_id


async def execution_row(pool: Pool, parent: UUID, status: str, delivery: str, recoveries: int = 0,
                        lease_expiries: int = 0) -> None:
    await pool.execute(
        """INSERT INTO executions (execution_id, parent_session_id, parent_tool_call_id, child_session_id,
               user_id, agent_type, invocation_type, task, round, status, delivery_status,
               started_at, deadline_at, version, recoveries, lease_expiries)
           VALUES ($1, $2, $3, $4, 'alice', 'coder', 'DELEGATE', 't', 1, $5, $6, $7, $7, 1, $8, $9)""",
        uuid4(), parent, f"call-{uuid4()}", uuid4(), status, delivery, T, recoveries, lease_expiries)


def samples(text: bytes | str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a Prometheus text page."""
    body = text.decode() if isinstance(text, bytes) else text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def recovery_figures(text: bytes | str) -> dict[str, float]:
    """The recovery samples, keyed by name and (its only) label value: `muster_executions:RUNNING`."""
    return {":".join([name, *(v for _, v in labels)]): value for (name, labels), value in samples(text).items()
            if name.removesuffix("_total") in RECOVERY_FAMILIES}


ZEROS = {
    "muster_recoveries_total:execution": 0, "muster_recoveries_total:session": 0,
    "muster_lease_expiries_total": 0, "muster_result_deliveries_total": 0, "muster_results_suppressed_total": 0,
    "muster_executions:RUNNING": 0, "muster_executions:RECOVERING": 0, "muster_executions:COMPLETED": 0,
    "muster_executions:FAILED": 0, "muster_executions:CANCELLED": 0,
}


async def test_figures_are_the_projections_sums_at_scrape_time(own_pool: Pool) -> None:
    metrics = Metrics()
    assert recovery_figures(await metrics.scrape(PostgresReads(own_pool))) == ZEROS  # every status, even unseen

    parent = await session_row(own_pool, recoveries=2)
    await session_row(own_pool, recoveries=1)
    await execution_row(own_pool, parent, "COMPLETED", "DELIVERED", recoveries=2, lease_expiries=1)
    await execution_row(own_pool, parent, "COMPLETED", "DELIVERED")
    await execution_row(own_pool, parent, "CANCELLED", "SUPPRESSED", recoveries=1, lease_expiries=1)
    await execution_row(own_pool, parent, "FAILED", "PENDING", recoveries=1)
    await execution_row(own_pool, parent, "RECOVERING", "PENDING", recoveries=3, lease_expiries=2)
    await execution_row(own_pool, parent, "RUNNING", "PENDING")
    await execution_row(own_pool, parent, "RUNNING", "PENDING")

    text = await metrics.scrape(PostgresReads(own_pool))
    assert recovery_figures(text) == ZEROS | {
        "muster_recoveries_total:execution": 7, "muster_recoveries_total:session": 3,
        "muster_lease_expiries_total": 4, "muster_result_deliveries_total": 2, "muster_results_suppressed_total": 1,
        "muster_executions:RUNNING": 2, "muster_executions:RECOVERING": 1, "muster_executions:COMPLETED": 2,
        "muster_executions:FAILED": 1, "muster_executions:CANCELLED": 1,
    }
    assert "# TYPE muster_recoveries_total counter" in text.decode()
    assert "# TYPE muster_executions gauge" in text.decode()

    # Figures come from the database at each scrape: a takeover recorded since shows at once.
    await own_pool.execute("UPDATE executions SET status = 'RECOVERING', recoveries = recoveries + 1, "
                           "lease_expiries = lease_expiries + 1 WHERE status = 'RUNNING'")
    after = recovery_figures(await metrics.scrape(PostgresReads(own_pool)))
    assert after["muster_recoveries_total:execution"] == 9 and after["muster_lease_expiries_total"] == 6
    assert (after["muster_executions:RUNNING"], after["muster_executions:RECOVERING"]) == (0, 3)


async def test_a_closed_pool_leaves_only_the_in_process_metrics(
    own_pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    metrics.frame("ping")
    assert recovery_figures(await metrics.scrape(PostgresReads(own_pool)))  # figures while the database answers
    await own_pool.close()
    with caplog.at_level(logging.WARNING, logger="muster.gateway.metrics"):
        text = await metrics.scrape(PostgresReads(own_pool))
    assert recovery_figures(text) == {}  # no stale figures from the scrape before
    assert samples(text)[("muster_gateway_frames_total", (("type", "ping"),))] == 1
    assert [r.getMessage().split()[0] for r in caplog.records] == ["recovery_metrics_unavailable"]
    assert recovery_figures(await Metrics().scrape(None)) == {}  # before the lifespan: no pool


@pytest.fixture
def client(database: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=database, kafka_bootstrap_servers="", data_dir=tmp_path)
    with TestClient(build_app(settings, tokens={"ta": "alice"}, kafka=False)) as test_client:
        yield test_client


def test_the_endpoint_serves_them_without_a_token_and_survives_a_broken_pool(client: TestClient) -> None:
    gateway: Gateway = client.app.state.gateway  # type: ignore[attr-defined]
    assert client.portal is not None and isinstance(gateway.reads, PostgresReads)
    pool = gateway.reads.pool
    parent = client.portal.call(session_row, pool, 1)
    client.portal.call(execution_row, pool, parent, "COMPLETED", "DELIVERED", 2, 1)

    reply = client.get("/metrics")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    figures = recovery_figures(reply.text)
    assert (figures["muster_recoveries_total:session"], figures["muster_recoveries_total:execution"],
            figures["muster_lease_expiries_total"], figures["muster_executions:COMPLETED"]) == (1, 2, 1, 1)

    client.portal.call(pool.close)  # the database is gone for this process
    reply = client.get("/metrics")
    assert reply.status_code == 200
    assert recovery_figures(reply.text) == {}
    assert ("muster_gateway_connections", ()) in samples(reply.text)
