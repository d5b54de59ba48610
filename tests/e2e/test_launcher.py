"""`muster run`: ready lines, supervision of services and infrastructure, clean shutdown."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import psutil
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from muster_launcher.postgres import services_url
from muster_launcher.tokens import parse_tokens_file
from muster_runtime.messaging.topics import partitions

from .conftest import Launch, Launcher

pytestmark = pytest.mark.e2e

LOCAL_INFRA = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL") or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")),
    reason="restarts or relies on the launcher's own PostgreSQL and broker",
)


async def topic_partitions(bootstrap: str) -> dict[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(list(partitions()))
        return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0}
    finally:
        await admin.close()


def test_prints_ready_lines(cluster: Launcher) -> None:
    port = cluster.env["MUSTER_GATEWAY_PORT"]
    assert f"gateway: http://127.0.0.1:{port}" in cluster.lines
    assert f"kafka: {cluster.kafka_bootstrap}" in cluster.lines
    assert "token: tok-alice" in cluster.lines  # the first token of MUSTER_TOKENS
    assert cluster.database_url.startswith("postgresql://")
    assert httpx.get(f"{cluster.gateway_url}/healthz", timeout=5).status_code == 200


async def test_topics_created_with_partitions(cluster: Launcher) -> None:
    assert await topic_partitions(cluster.kafka_bootstrap) == partitions()


async def test_database_migrated(cluster: Launcher) -> None:
    conn = await asyncpg.connect(cluster.database_url)
    try:
        assert await conn.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL")
    finally:
        await conn.close()


async def test_services_get_environment(cluster: Launcher) -> None:
    given = bool(os.environ.get("DATABASE_URL"))
    # The launcher's own PostgreSQL: the services use its Unix socket, people its TCP port.
    expected = cluster.database_url if given else services_url(cluster.data_dir, urlsplit(cluster.database_url).port or 0)
    assert given or "host=/" in expected
    for name in ("gateway", "harness", "subagent-worker", "recovery"):
        proc = psutil.Process(cluster.service_pid(name))
        assert f"muster-{name}" in " ".join(proc.cmdline())
        env = proc.environ()
        assert env["DATABASE_URL"] == expected
        assert env["KAFKA_BOOTSTRAP_SERVERS"] == cluster.kafka_bootstrap
        assert env["MUSTER_DATA_DIR"] == str(cluster.data_dir)
        assert env["MUSTER_GATEWAY_PORT"] == cluster.env["MUSTER_GATEWAY_PORT"]
        assert env["PYTHONUNBUFFERED"] == "1"
        tokens = parse_tokens_file(Path(env["MUSTER_TOKENS_FILE"]).read_text())
        assert tokens == {"tok-alice": "alice", "tok-bob": "bob"}
    conn = await asyncpg.connect(expected)  # the socket URL reaches the same database
    try:
        assert await conn.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL")
    finally:
        await conn.close()


def test_killed_service_is_restarted_infra_untouched(cluster: Launcher) -> None:
    infra = {name: cluster.service_pid(name) for name in ("postgres", "broker") if _supervised(cluster, name)}
    old = cluster.kill("harness")
    new = cluster.wait_restarted("harness", old)
    assert new != old
    assert any(line.startswith("supervisor: harness exited with -9, restarting in") for line in cluster.lines)
    assert {name: cluster.service_pid(name) for name in infra} == infra


def _supervised(cluster: Launcher, name: str) -> bool:
    try:
        cluster.service_pid(name)
    except LookupError:
        return False
    return True


@LOCAL_INFRA
async def test_broker_and_database_restart_on_same_ports(launch: Launch) -> None:
    launcher = launch()
    old = launcher.kill("broker")
    launcher.wait_restarted("broker", old)
    # Same address, and the topics are back although Tansu's memory storage was lost.
    assert await topic_partitions(launcher.kafka_bootstrap) == partitions()

    conn = await asyncpg.connect(launcher.database_url)
    await conn.execute("CREATE TABLE launcher_probe (x int); INSERT INTO launcher_probe VALUES (7)")
    await conn.close()
    old = launcher.kill("postgres")
    launcher.wait_restarted("postgres", old)
    conn = await asyncpg.connect(launcher.database_url)
    try:
        assert await conn.fetchval("SELECT x FROM launcher_probe") == 7
    finally:
        await conn.close()
    launcher.stop()


@LOCAL_INFRA
async def test_sigterm_stops_everything_and_data_persists(launch: Launch) -> None:
    first = launch()
    conn = await asyncpg.connect(first.database_url)
    await conn.execute("CREATE TABLE persist_probe (x int); INSERT INTO persist_probe VALUES (1)")
    await conn.close()
    took = first.stop(signal.SIGTERM)
    assert took < 20

    second = launch(data_dir=first.data_dir)
    assert second.token == first.token
    conn = await asyncpg.connect(second.database_url)
    try:
        assert await conn.fetchval("SELECT x FROM persist_probe") == 1
    finally:
        await conn.close()
    second.stop(signal.SIGINT)


@LOCAL_INFRA
async def test_restart_after_launcher_sigkill(launch: Launch) -> None:
    """A SIGKILLed launcher takes its children with it (parent-death signal) and the next
    run starts on the same data dir despite the stale postmaster.pid."""
    first = launch()
    children = first.descendants()
    first.stop(signal.SIGKILL)  # asserts the children are gone too
    assert children

    second = launch(data_dir=first.data_dir)
    conn = await asyncpg.connect(second.database_url)
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()
    second.stop()


def test_generated_dev_token_is_reused(launch: Launch) -> None:
    first = launch(MUSTER_TOKENS="")
    token = first.token
    assert (first.data_dir / "tokens").read_text() == f"{token}=dev\n"
    first.stop()
    second = launch(data_dir=first.data_dir, MUSTER_TOKENS="")
    assert second.token == token
    second.stop()
