"""Absolute execution deadlines, on a cluster of its own with a short timeout."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from .conftest import Launch
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


async def test_execution_past_its_deadline_is_failed_and_the_parent_continues(launch: Launch) -> None:
    cluster = launch(MUSTER_EXECUTION_TIMEOUT_S="1", MUSTER_CANCEL_GRACE_S="0.5", MUSTER_RECONCILE_INTERVAL_S="0.5")
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    rest = Rest(cluster.gateway_url, cluster.tokens["alice"])
    try:
        session_id = await client.run_turn(script(
            {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "late", "delay_ms": 60000}))]},
            {"content": "handled the timeout"},
        ), timeout=60)
        assert client.phases(session_id)[-1] == "COMPLETED"
        history = await rest.messages(session_id)
        result = json.loads(next(m["content"] for m in history if m["role"] == "TOOL"))
        assert result["success"] is False and "timed out" in result["error"]
        assert history[-1]["content"] == "handled the timeout"
        (execution,) = (await rest.json(f"/v1/sessions/{session_id}/executions"))["items"]
        assert (execution["status"], execution["deliveryStatus"]) == ("FAILED", "DELIVERED")
        child = await rest.json(f"/v1/sessions/{result['child_session_id']}")
        assert child["phase"] == "CANCELLED"
    finally:
        await client.close()
        await rest.close()
        cluster.stop()


async def test_a_child_stops_at_its_deadline_and_fails_long_before_the_grace(launch: Launch) -> None:
    """Issue 12: a child that keeps working (a file per step) starts no model call and no
    tool after its deadline, and ends FAILED with the reason in `result` and `error` at
    once, not only when recovery's grace runs out (here 60 s)."""
    cluster = launch(MUSTER_EXECUTION_TIMEOUT_S="4", MUSTER_CANCEL_GRACE_S="60")
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    rest = Rest(cluster.gateway_url, cluster.tokens["alice"])
    try:
        steps = [{"tool_calls": [call("write_file", path=f"f{i}.txt", content=f"{i}\n")], "delay_ms": 500}
                 for i in range(40)]
        session_id = await client.run_turn(script(
            {"tool_calls": [call("delegate", agent_type="coder", task=script(*steps))]},
            {"content": "after the deadline"},
        ), timeout=40)
        history = await rest.messages(session_id)
        result = json.loads(next(m["content"] for m in history if m["role"] == "TOOL"))
        assert result["success"] is False
        assert result["error"] == result["result"] == "timed out: the execution passed its deadline"
        assert history[-1]["content"] == "after the deadline"
        (execution,) = (await rest.json(f"/v1/sessions/{session_id}/executions"))["items"]
        deadline, ended = (datetime.fromisoformat(execution[k].replace("Z", "+00:00")) for k in ("deadlineAt", "endedAt"))
        assert (execution["status"], execution["deliveryStatus"]) == ("FAILED", "DELIVERED")
        assert timedelta(0) <= ended - deadline < timedelta(seconds=10)  # the worker, not the 60 s grace
        child_id = result["child_session_id"]
        child = await rest.messages(child_id)
        assert all(datetime.fromisoformat(m["createdAt"].replace("Z", "+00:00")) <= deadline for m in child)
        started = [e for e in await events_of(cluster, child_id) if e["type"] == "tool_call_started"]
        written = sorted(p.name for p in (cluster.data_dir / "workspaces" / session_id).glob("f*.txt"))
        assert 0 < len(started) < 40 and len(written) == len(started)  # no tool ran unrecorded
    finally:
        await client.close()
        await rest.close()
        cluster.stop()


async def events_of(cluster: Any, session_id: str) -> list[dict[str, Any]]:
    """Every stored event of the session, replayed to a fresh subscriber."""
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        await client.ack("subscribe", session_id, {"afterPosition": 0})
        await client.wait_for(lambda: any(e["type"] == "session_status" and e["data"]["phase"] == "CANCELLED"
                                          for e in client.events[session_id]), timeout=10)
        return list(client.events[session_id])
    finally:
        await client.close()
