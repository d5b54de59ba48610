"""Crash recovery against the real processes, results (issue acceptance 6, 8, 10, 12 and
broker loss): the recovery instances and the broker are stopped and killed around
deliveries; the last test checks the whole database for anything done twice."""

from __future__ import annotations

import json
import signal
from typing import Any

import asyncpg
import pytest

from .conftest import Launcher
from .recovery_support import (
    SLOW_CHILD_MS,
    restart_recovery,
    statuses,
    tool_results,
    wait_running_in_worker,
    wait_status,
)
from .wsclient import Client, Rest, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_6_kill_recovery_before_and_right_after_delivery(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    # Before: the recovery instances are frozen while the child finishes, then killed. The
    # last child's worker settles the barrier itself (ADR 0011): the parent goes on.
    rcluster.signal_all("recovery", signal.SIGSTOP)
    try:
        created = await rclient.ack("create_session", data={"content": script(
            {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "recorded"}))]},
            {"content": "after restart"},
        )})
        before = created["sessionId"]
        assert await rclient.wait_phase(before, timeout=60) == "COMPLETED"
        assert [s[1:] for s in statuses(rclient, before)][-1] == ("COMPLETED", "DELIVERED")
    finally:
        restart_recovery(rcluster)
    # Right after: kill them as soon as the delivery is seen.
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "delivered"}))]},
        {"content": "once"},
    )})
    after = created["sessionId"]
    await rclient.wait_for(lambda: any(s[2] == "DELIVERED" for s in statuses(rclient, after)))
    restart_recovery(rcluster)
    assert await rclient.wait_phase(after, timeout=60) == "COMPLETED"
    for sid, answer in ((before, "recorded"), (after, "delivered")):
        (result,) = [json.loads(m["content"]) for m in await tool_results(rrest, sid)]
        assert result["result"] == answer
        assert [m["role"] for m in await rrest.messages(sid)] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]


async def test_8_parent_cancelled_while_the_system_is_down(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "never", "delay_ms": 60000})),
            call("delegate", agent_type="coder", task=script({"content": "never", "delay_ms": 60000})),
        ]},
        {"content": "must not be called"},
    )})
    sid = created["sessionId"]
    await wait_status(rclient, sid, "RUNNING", count=2)
    rcluster.signal_all("recovery", signal.SIGSTOP)
    rcluster.signal_all("subagent-worker", signal.SIGSTOP)
    await rclient.ack("cancel", sid)
    assert await rclient.wait_phase(sid, ("CANCELLED",)) == "CANCELLED"
    worker = rcluster.service_pids("subagent-worker")[0]
    rcluster.signal_all("subagent-worker", signal.SIGKILL)
    rcluster.wait_restarted("subagent-worker", worker)
    restart_recovery(rcluster)
    await rclient.wait_for(lambda: sum(s[2] == "SUPPRESSED" for s in statuses(rclient, sid)) >= 2, timeout=60)

    async def snapshot() -> tuple[Any, ...]:
        executions = (await rrest.json(f"/v1/sessions/{sid}/executions"))["items"]
        children = [(await rrest.json(f"/v1/sessions/{e['childSessionId']}"))["phase"] for e in executions]
        session = await rrest.json(f"/v1/sessions/{sid}")
        return (
            [(e["status"], e["deliveryStatus"]) for e in executions],
            children,
            session["phase"],
            [m["role"] for m in await rrest.messages(sid)],
        )

    settled = await snapshot()
    assert settled == ([("CANCELLED", "SUPPRESSED")] * 2, ["CANCELLED"] * 2, "CANCELLED", ["USER", "ASSISTANT"])
    for _ in range(2):  # restart twice more: nothing changes
        restart_recovery(rcluster)
        assert await snapshot() == settled


async def test_10_children_ending_in_reverse_order_are_delivered_in_call_order(
    rclient: Client, rrest: Rest
) -> None:
    sid = await rclient.run_turn(script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "slow first", "delay_ms": 1500})),
            call("delegate", agent_type="coder", task=script({"content": "quick second"})),
        ]},
        {"content": "ordered"},
    ), timeout=60)
    executions = (await rrest.json(f"/v1/sessions/{sid}/executions"))["items"]
    assert executions[1]["endedAt"] < executions[0]["endedAt"]
    results = [json.loads(m["content"])["result"] for m in await tool_results(rrest, sid)]
    assert results == ["slow first", "quick second"]


async def test_broker_restarted_empty_loses_nothing(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    """Deliver 5: the local broker keeps messages in memory; killed and restarted empty, the
    event store re-issues what was lost and every turn still completes."""
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder",
                             task=script({"content": "through the outage", "delay_ms": SLOW_CHILD_MS}))]},
        {"content": "after the outage"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, rclient, sid)
    assert (await rclient.ack("send_message", sid, data={"content": "queued before the outage"}))["queued"] is True
    old = rcluster.kill("broker")
    rcluster.wait_restarted("broker", old)
    assert await rclient.wait_phase(sid, timeout=120, count=2) == "COMPLETED"
    history = await rrest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT", "USER", "ASSISTANT"]
    assert json.loads(history[2]["content"])["result"] == "through the outage"
    assert (history[3]["content"], history[4]["content"]) == ("after the outage", "queued before the outage")


async def test_12_two_recovery_instances_duplicated_nothing(rcluster: Launcher) -> None:
    """After tests 1-10 ran with two recovery instances: the invariants over the database."""
    from chaos.checks_effects import check_5, check_6
    from chaos.checks_history import check_1, check_2, check_3
    from chaos.clients import json_codecs
    from chaos.dbstate import load

    conn = await asyncpg.connect(rcluster.database_url)
    try:
        await json_codecs(conn)
        db = await load(conn)
        delivered = await conn.fetch(
            "SELECT stream_id, count(*) AS n FROM events WHERE type = 'ExecutionDelivered' GROUP BY stream_id"
        )
        resumed = await conn.fetch(
            "SELECT stream_id, count(*) AS n FROM events WHERE type = 'ExecutionRecovering' GROUP BY stream_id"
        )
    finally:
        await conn.close()
    assert db.executions, "tests 1-10 created executions"
    for check in (check_1(db), check_2(db), check_3(db), check_5(db), check_6(db)):
        assert check.status == "PASS", (check.number, check.name, check.offending)
    assert all(r["n"] == 1 for r in delivered) and len(delivered) == len(db.executions)
    assert all(r["n"] == 1 for r in resumed) and resumed
