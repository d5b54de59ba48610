"""Absolute execution deadlines, on a cluster of its own with a short timeout."""

from __future__ import annotations

import json

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
