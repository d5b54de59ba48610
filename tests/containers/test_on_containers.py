"""The system on PostgreSQL and broker containers: a turn, the delegation barrier, and a
worker killed mid-execution and recovered. Everything reaches the containers through the
ports they publish on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import datetime

import asyncpg
import pytest

from tests.e2e.conftest import Launcher
from tests.e2e.recovery_support import kill_worker, statuses, wait_running_in_worker
from tests.e2e.wsclient import Client, Rest, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.containers]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def child(answer: str, delay_ms: int) -> str:
    return script({"content": answer, "delay_ms": delay_ms})


async def test_a_turn_is_recorded_in_the_postgres_container(ccluster: Launcher, cclient: Client, crest: Rest,
                                                           containers: dict[str, str]) -> None:
    session_id = await cclient.run_turn(script({"content": "hello from a container"}))
    assert cclient.phases(session_id)[-1] == "COMPLETED"
    history = await crest.messages(session_id)
    assert [(m["role"], m["content"]) for m in history][1:] == [("ASSISTANT", "hello from a container")]
    # The log of record is the container's database, reached through its published port.
    conn = await asyncpg.connect(containers["DATABASE_URL"])
    try:
        types = [r["type"] for r in await conn.fetch(
            "SELECT type FROM events WHERE stream_id = $1 ORDER BY position", session_id)]
        server = await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()
    assert types and len(types) == len([e for e in cclient.events[session_id] if "position" in e]), types
    assert server  # a PostgreSQL server answered (15 on the stand-in, 16 on the official image)


async def test_the_barrier_waits_for_every_child(cclient: Client, crest: Rest) -> None:
    session_id = await cclient.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child("slow child", 1500)),
                        call("delegate", agent_type="coder", task=child("fast child", 0))]},
        {"content": "both delivered"},
    ), timeout=90)
    assert cclient.phases(session_id)[-1] == "COMPLETED"
    history = await crest.messages(session_id)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "TOOL", "ASSISTANT"]
    # Results in tool-call order, though the fast child ended first.
    assert [m["toolCallId"] for m in history[2:4]] == [c["id"] for c in history[1]["toolCalls"]]
    assert [json.loads(m["content"])["result"] for m in history[2:4]] == ["slow child", "fast child"]
    executions = (await crest.json(f"/v1/sessions/{session_id}/executions"))["items"]
    assert {(e["status"], e["deliveryStatus"]) for e in executions} == {("COMPLETED", "DELIVERED")}
    # The parent's next model call came only after the last child ended.
    assert ts(history[-1]["createdAt"]) >= max(ts(e["endedAt"]) for e in executions)


async def test_a_worker_killed_mid_execution_is_recovered(ccluster: Launcher, cclient: Client, crest: Rest) -> None:
    created = await cclient.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child("survived", 3000))]},
        {"content": "parent done"},
    )})
    session_id = created["sessionId"]
    await wait_running_in_worker(ccluster, cclient, session_id)
    kill_worker(ccluster)
    assert await cclient.wait_phase(session_id, timeout=90) == "COMPLETED"
    # The takeover is announced as RUNNING again: clients never see RECOVERING.
    assert [s[1] for s in statuses(cclient, session_id)][:2] == ["RUNNING", "RUNNING"]
    history = await crest.messages(session_id)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert json.loads(history[2]["content"])["result"] == "survived"
    (execution,) = (await crest.json(f"/v1/sessions/{session_id}/executions"))["items"]
    assert (execution["status"], execution["deliveryStatus"]) == ("COMPLETED", "DELIVERED")
