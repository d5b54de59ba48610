"""The crash-recovery e2e modules' cluster and clients (fixtures, imported by conftest)
and the waits and kills they share."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from .wsclient import Client, Rest

if TYPE_CHECKING:
    from .conftest import Launch, Launcher

SLOW_CHILD_MS = 3000


# The crash-recovery modules share one cluster with TWO recovery instances (session-scoped,
# so their final duplicate check sees everything they did).
@pytest.fixture(scope="session")
def rcluster(launch: Launch) -> Iterator[Launcher]:
    launcher = launch(MUSTER_RECOVERY_INSTANCES="2", MUSTER_LEASE_TTL_S="3", MUSTER_RECONCILE_INTERVAL_S="0.5")
    assert len(launcher.service_pids("recovery")) == 2
    yield launcher
    launcher.stop()


@pytest.fixture
async def rclient(rcluster: Launcher) -> AsyncIterator[Client]:
    c = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    yield c
    await c.close()


@pytest.fixture
async def rrest(rcluster: Launcher) -> AsyncIterator[Rest]:
    r = Rest(rcluster.gateway_url, rcluster.tokens["alice"])
    yield r
    await r.close()


def statuses(client: Client, session_id: str) -> list[tuple[str, str, str]]:
    return [
        (e["data"]["executionId"], e["data"]["status"], e["data"]["deliveryStatus"])
        for e in client.events[session_id]
        if e["type"] == "execution_status"
    ]


async def wait_status(client: Client, session_id: str, status: str, count: int = 1, timeout: float = 60) -> None:
    await client.wait_for(lambda: sum(s[1] == status for s in statuses(client, session_id)) >= count, timeout)


async def wait_running_in_worker(cluster: Launcher, client: Client, session_id: str, count: int = 1) -> None:
    """Until the worker has started running `count` executions of the session (not just
    been sent them), so a kill interrupts a run."""
    await wait_status(client, session_id, "RUNNING", count)
    for eid in [s[0] for s in statuses(client, session_id) if s[1] == "RUNNING"][-count:]:
        cluster.wait_line(f"execution_run_start execution={eid}", 0, timeout=30)


def kill_worker(cluster: Launcher) -> None:
    old = cluster.kill("subagent-worker")
    cluster.wait_restarted("subagent-worker", old)


def restart_recovery(cluster: Launcher) -> None:
    """SIGKILL every recovery instance and wait until each has reconciled again."""
    mark = cluster.mark()
    old = cluster.signal_all("recovery", signal.SIGKILL)
    cluster.wait_line(r"^\[recovery(-\d+)?\] .*recovery_ready", mark, count=len(old), timeout=90)


async def tool_results(rest: Rest, session_id: str) -> list[dict[str, Any]]:
    return [m for m in await rest.messages(session_id) if m["role"] == "TOOL"]


async def recoveries(cluster: Launcher, session_id: str) -> list[int]:
    conn = await asyncpg.connect(cluster.database_url)
    try:
        rows = await conn.fetch(
            "SELECT recoveries FROM executions WHERE parent_session_id = $1 ORDER BY started_at", session_id
        )
    finally:
        await conn.close()
    return [r["recoveries"] for r in rows]
