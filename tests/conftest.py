"""Suite-wide fixtures: a PostgreSQL server for database-level tests — the one of
$DATABASE_URL when given, else an embedded one started for this test session."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
async def postgres_server_url() -> AsyncIterator[str]:
    """URL of a server on which tests may create and drop their own databases."""
    given = os.environ.get("DATABASE_URL")
    if given:
        from tests.databases import drop_templates

        yield given
        await drop_templates(given)
        return
    from muster_launcher import postgres

    # Outside pytest's temp tree: a second pytest run on the machine (another worktree)
    # cleans that tree up, and would delete this server's data under it.
    data_dir = Path(tempfile.mkdtemp(prefix="muster-unit-pg-"))
    port = _free_port()
    spec = postgres.postgres_spec(data_dir, port)
    assert spec.prepare is not None
    await spec.prepare()
    proc = subprocess.Popen(spec.argv, user=spec.user, cwd=spec.cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await postgres.wait_ready(port)
        yield postgres.postgres_url(port, "postgres")
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 15)
        shutil.rmtree(data_dir, ignore_errors=True)
