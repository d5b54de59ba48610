"""The container end-to-end suite: PostgreSQL and the broker in Docker containers started
with testcontainers (tests/e2e/containers.py), the four services run by `muster run`
against them through DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS.

Without a Docker engine (or without the images `make images` builds) every test here is
skipped, and the run says why in one line of its summary: never silently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

# The e2e suite's launcher fixtures, registered here too (a sibling conftest's are not visible).
from tests.e2e.conftest import Launch, Launcher, infrastructure, launch  # noqa: F401
from tests.e2e.containers import container_infrastructure, engine_problem
from tests.e2e.wsclient import Client, Rest

_problem: list[str] = []  # filled once, at collection


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if "tests/containers/" in item.nodeid]
    if not mine:
        return
    problem = engine_problem()
    if problem is None:
        return
    _problem.append(problem)
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=f"container tests: {problem}"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line for this suite in the summary: how many ran on containers, or why none did."""
    if _problem:
        terminalreporter.write_line(f"container tests SKIPPED: {_problem[0]}", yellow=True, bold=True)
        return
    counts = {outcome: sum(1 for r in terminalreporter.stats.get(outcome, [])
                           if "tests/containers/" in getattr(r, "nodeid", "") and r.when in ("call", "setup"))
              for outcome in ("passed", "failed", "error", "skipped")}
    if any(counts.values()):
        terminalreporter.write_line("container tests: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))


@pytest.fixture(scope="session")
def containers() -> Iterator[dict[str, str]]:
    with container_infrastructure() as env:
        yield env


@pytest.fixture(scope="session")
def ccluster(launch: Launch, containers: dict[str, str]) -> Iterator[Launcher]:  # noqa: F811
    """`muster run` on the containers (short leases, so a kill is recovered quickly)."""
    launcher = launch(**containers, MUSTER_LEASE_TTL_S="3", MUSTER_RECONCILE_INTERVAL_S="0.5")
    # The launcher started no PostgreSQL and no broker of its own: the containers serve.
    assert "127.0.0.1:" in launcher.database_url and launcher.kafka_bootstrap == containers["KAFKA_BOOTSTRAP_SERVERS"]
    yield launcher
    launcher.stop()


@pytest.fixture
async def cclient(ccluster: Launcher) -> AsyncIterator[Client]:
    client = await Client.connect(ccluster.ws_url, ccluster.tokens["alice"])
    yield client
    await client.close()


@pytest.fixture
async def crest(ccluster: Launcher) -> AsyncIterator[Rest]:
    rest = Rest(ccluster.gateway_url, ccluster.tokens["alice"])
    yield rest
    await rest.close()
