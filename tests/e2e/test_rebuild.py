"""Invariant 7 on the running system: projections replayed from the events equal the live
ones after a delegated turn with file writes, and `muster rebuild` on the live database
changes nothing a client can see."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from .conftest import MUSTER, Launcher
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e

TABLES = ("sessions", "messages", "session_inputs", "tool_runs", "executions", "file_changes")


async def muster_rebuild(*args: str, **env: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER), "rebuild", *args, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


def statuses(output: str) -> dict[str, str]:
    rows = [line.split() for line in output.splitlines()]
    return {row[0]: row[-1] for row in rows if row and row[0] in TABLES}


async def test_replayed_projections_equal_the_live_ones_and_a_rebuild_keeps_them(
    cluster: Launcher, alice: Client, alice_rest: Rest
) -> None:
    child = script({"tool_calls": [call("write_file", path="child.txt", content="from the child\n")]},
                   {"tool_calls": [call("edit_file", path="child.txt", old_string="child", new_string="kid")]},
                   {"content": "child done"})
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="parent.txt", content="parent\n"),
                        call("delegate", agent_type="coder", task=child),
                        call("delegate", agent_type="coder", task=script({"content": "second child"}))]},
        {"content": "all delivered"},
    ))
    assert alice.phases(session_id)[-1] == "COMPLETED"
    before = await alice_rest.messages(session_id)
    assert any(m.get("fileChanges") for m in before)

    code, output = await muster_rebuild("--check", DATABASE_URL=cluster.database_url)
    assert code == 0, output
    assert statuses(output) == dict.fromkeys(TABLES, "equal"), output
    print("\n" + output)

    code, output = await muster_rebuild(DATABASE_URL=cluster.database_url)
    assert code == 0, output
    rate = re.search(r"^events/s: (\d+)$", output, re.M)
    assert rate is not None, output
    print(output)
    code, output = await muster_rebuild("--check", DATABASE_URL=cluster.database_url)
    assert code == 0 and set(statuses(output).values()) == {"equal"}, output
    assert await alice_rest.messages(session_id) == before

    # The system keeps working on the rebuilt tables.
    again = await alice.run_turn(script({"content": "after the rebuild"}))
    assert alice.phases(again)[-1] == "COMPLETED"


async def test_the_local_database_is_found_without_database_url(cluster: Launcher) -> None:
    if os.environ.get("DATABASE_URL") or "DATABASE_URL" in cluster.env:
        pytest.skip("the cluster uses an external PostgreSQL")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER), "rebuild", "--check", env={**env, "MUSTER_DATA_DIR": str(cluster.data_dir)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    assert set(statuses(out.decode()).values()) == {"equal"}
