"""Crash recovery against the real processes (issue acceptance 1-6, 8, 10, 12): SIGKILL and
SIGSTOP of the worker and of the recovery service at chosen moments. The cluster runs TWO
recovery instances throughout, and the last test checks the whole database for anything
delivered, resumed or created twice."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from .conftest import Launch, Launcher
from .wsclient import Client, Rest, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SLOW_CHILD_MS = 3000


@pytest.fixture(scope="module")
def rcluster(launch: Launch) -> Iterator[Launcher]:
    launcher = launch(MUSTER_RECOVERY_INSTANCES="2", MUSTER_LEASE_TTL_S="3", MUSTER_RECONCILE_INTERVAL_S="0.5")
    assert len(launcher.service_pids("recovery")) == 2
    yield launcher
    launcher.stop()


@pytest.fixture
async def client(rcluster: Launcher) -> AsyncIterator[Client]:
    c = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    yield c
    await c.close()


@pytest.fixture
async def rest(rcluster: Launcher) -> AsyncIterator[Rest]:
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


async def test_1_kill_during_a_first_delegate(rcluster: Launcher, client: Client, rest: Rest) -> None:
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "child done", "delay_ms": SLOW_CHILD_MS}))]},
        {"content": "parent done"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, client, sid)
    kill_worker(rcluster)
    assert await client.wait_phase(sid, timeout=90) == "COMPLETED"
    (eid, *_), *_ = statuses(client, sid)
    assert [s[1:] for s in statuses(client, sid) if s[0] == eid][:2] == [("RUNNING", "PENDING"), ("RECOVERING", "PENDING")]
    (created_child,) = [e["data"] for e in client.events[sid] if e["type"] == "subagent_session_created"]
    history = await rest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert len(history[1]["toolCalls"]) == 1
    result = json.loads(history[2]["content"])
    assert (result["result"], result["child_session_id"]) == ("child done", created_child["childSessionId"])
    (execution,) = (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]
    assert execution["executionId"] == created_child["executionId"] == eid
    assert (execution["status"], execution["deliveryStatus"]) == ("COMPLETED", "DELIVERED")
    assert await recoveries(rcluster, sid) == [1]
    # Observability: the takeover is logged step by step, without content or credentials.
    for line in (f"subagent_recovery_start execution={eid}", f"subagent_recovery_complete execution={eid}",
                 f"subagent_result_delivered execution={eid}", f"parent_recovery_start parent={sid}",
                 "subagent_recovery_scan executions="):
        rcluster.wait_line(re.escape(line), 0, timeout=5)
    service_lines = [line for line in rcluster.lines if re.match(r"^\[(gateway|harness|subagent-worker|recovery)", line)]
    assert not [line for line in service_lines if "child done" in line or "parent done" in line]
    assert not [line for line in service_lines if rcluster.tokens["alice"] in line]


async def test_2_kill_during_a_followup(rcluster: Launcher, client: Client, rest: Rest) -> None:
    sid = await client.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "first"}))]}, {"content": "ok"},
    ))
    (child,) = [e["data"]["childSessionId"] for e in client.events[sid] if e["type"] == "subagent_session_created"]
    await client.ack("send_message", sid, data={"content": script(
        {"tool_calls": [call("delegate_followup", child_session_id=child,
                             task=script({"content": "second", "delay_ms": SLOW_CHILD_MS}))]},
        {"content": "parent continues"},
    )})
    await wait_running_in_worker(rcluster, client, sid, count=2)
    kill_worker(rcluster)
    assert await client.wait_phase(sid, timeout=90, count=2) == "COMPLETED"
    history = await rest.messages(sid)
    assert history[-1]["content"] == "parent continues"
    results = [json.loads(m["content"]) for m in history if m["role"] == "TOOL"]
    assert [(r["result"], r.get("follow_up"), r.get("round")) for r in results] == [
        ("first", None, None), ("second", True, 2)]
    executions = (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]
    assert [e["invocationType"] for e in executions] == ["DELEGATE", "FOLLOWUP"]
    assert {e["childSessionId"] for e in executions} == {child}
    assert await recoveries(rcluster, sid) == [0, 1]


async def test_3_two_parallel_children_resume_in_parallel(rcluster: Launcher, client: Client, rest: Rest) -> None:
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "left", "delay_ms": SLOW_CHILD_MS})),
            call("delegate", agent_type="coder", task=script({"content": "right", "delay_ms": SLOW_CHILD_MS})),
        ]},
        {"content": "both in"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, client, sid, count=2)
    kill_worker(rcluster)
    await wait_status(client, sid, "RECOVERING", count=2, timeout=60)
    # The parent waits for both: nothing delivered until both are terminal.
    assert await client.wait_phase(sid, timeout=90) == "COMPLETED"
    seen = [s[1] for s in statuses(client, sid)]
    assert seen.index("DELIVERED" if "DELIVERED" in seen else "COMPLETED") > max(
        i for i, s in enumerate(seen) if s == "RECOVERING")
    delivered = [s for s in statuses(client, sid) if s[2] == "DELIVERED"]
    assert len(delivered) == 2
    results = [json.loads(m["content"])["result"] for m in await tool_results(rest, sid)]
    assert results == ["left", "right"]
    ended = [e["endedAt"] for e in (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]]
    assert await recoveries(rcluster, sid) == [1, 1]
    # Resumed in parallel: run one after the other, they would end >= one model delay apart.
    from datetime import datetime

    gap = abs((datetime.fromisoformat(ended[0]) - datetime.fromisoformat(ended[1])).total_seconds())
    assert gap < SLOW_CHILD_MS / 1000, ended


async def test_4_kill_mid_way_through_a_childs_tool_round(rcluster: Launcher, client: Client, rest: Rest) -> None:
    edits = 300
    child_task = script(
        {"tool_calls": [call("write_file", path="log.txt", content="END")]},
        {"tool_calls": [call("edit_file", path="log.txt", old_string="END", new_string=f"<{k}>END")
                        for k in range(edits)]},
        {"content": "edited"},
    )
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child_task)]}, {"content": "ok"},
    )})
    sid = created["sessionId"]
    log = Path(rcluster.data_dir) / "workspaces" / sid / "log.txt"

    await client.wait_for(lambda: any(e["type"] == "subagent_session_created" for e in client.events[sid]))
    (child,) = [e["data"]["childSessionId"] for e in client.events[sid] if e["type"] == "subagent_session_created"]
    await client.ack("subscribe", child, data={"afterPosition": 0})

    def edited_some() -> bool:
        return sum(e["type"] == "message" and e["data"]["role"] == "TOOL" for e in client.events[child]) >= 6

    await client.wait_for(edited_some, timeout=60)
    kill_worker(rcluster)
    assert await client.wait_phase(sid, timeout=120) == "COMPLETED"
    (result,) = [json.loads(m["content"]) for m in await tool_results(rest, sid)]
    assert result["result"] == "edited"
    markers = [int(k) for k in re.findall(r"<(\d+)>", log.read_text())]
    assert len(markers) == len(set(markers)), "an edit ran twice"
    assert markers == sorted(markers) and len(markers) >= edits - 1  # at most the interrupted one is missing
    child_history = await rest.messages(result["child_session_id"], includeDiscarded=1)
    discarded = [m for m in child_history if m["discarded"]]
    assert discarded and discarded[0]["role"] == "ASSISTANT"  # the cut round, then its results
    kept = [m for m in child_history if not m["discarded"]]
    assert [m["role"] for m in kept[:4]] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert len([m for m in kept if m["role"] == "TOOL"]) == 1 + edits


async def test_5_a_child_failing_on_resume_delivers_a_failure(rcluster: Launcher, client: Client, rest: Rest) -> None:
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script(
            {"tool_calls": [call("list_files")]},
            {"delay_ms": SLOW_CHILD_MS, "fail": "model unavailable"},
        ))]},
        {"content": "handled"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, client, sid)
    kill_worker(rcluster)
    assert await client.wait_phase(sid, timeout=90) == "COMPLETED"
    (result,) = [json.loads(m["content"]) for m in await tool_results(rest, sid)]
    assert result["success"] is False and "model unavailable" in result["error"]
    assert (await rest.messages(sid))[-1]["content"] == "handled"
    assert await recoveries(rcluster, sid) == [1]


async def test_6_kill_recovery_before_and_right_after_delivery(rcluster: Launcher, client: Client, rest: Rest) -> None:
    # Before: the recovery instances are frozen while the child finishes, then killed.
    rcluster.signal_all("recovery", signal.SIGSTOP)
    try:
        created = await client.ack("create_session", data={"content": script(
            {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "recorded"}))]},
            {"content": "after restart"},
        )})
        before = created["sessionId"]
        await wait_status(client, before, "COMPLETED")  # recorded, not delivered
        assert not any(s[2] == "DELIVERED" for s in statuses(client, before))
    finally:
        restart_recovery(rcluster)
    assert await client.wait_phase(before, timeout=60) == "COMPLETED"
    # Right after: kill them as soon as the delivery is seen.
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "delivered"}))]},
        {"content": "once"},
    )})
    after = created["sessionId"]
    await client.wait_for(lambda: any(s[2] == "DELIVERED" for s in statuses(client, after)))
    restart_recovery(rcluster)
    assert await client.wait_phase(after, timeout=60) == "COMPLETED"
    for sid, answer in ((before, "recorded"), (after, "delivered")):
        (result,) = [json.loads(m["content"]) for m in await tool_results(rest, sid)]
        assert result["result"] == answer
        assert [m["role"] for m in await rest.messages(sid)] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]


async def test_8_parent_cancelled_while_the_system_is_down(rcluster: Launcher, client: Client, rest: Rest) -> None:
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "never", "delay_ms": 60000})),
            call("delegate", agent_type="coder", task=script({"content": "never", "delay_ms": 60000})),
        ]},
        {"content": "must not be called"},
    )})
    sid = created["sessionId"]
    await wait_status(client, sid, "RUNNING", count=2)
    rcluster.signal_all("recovery", signal.SIGSTOP)
    rcluster.signal_all("subagent-worker", signal.SIGSTOP)
    await client.ack("cancel", sid)
    assert await client.wait_phase(sid, ("CANCELLED",)) == "CANCELLED"
    worker = rcluster.service_pids("subagent-worker")[0]
    rcluster.signal_all("subagent-worker", signal.SIGKILL)
    rcluster.wait_restarted("subagent-worker", worker)
    restart_recovery(rcluster)
    await client.wait_for(lambda: sum(s[2] == "SUPPRESSED" for s in statuses(client, sid)) >= 2, timeout=60)

    async def snapshot() -> tuple[Any, ...]:
        executions = (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]
        children = [(await rest.json(f"/v1/sessions/{e['childSessionId']}"))["phase"] for e in executions]
        session = await rest.json(f"/v1/sessions/{sid}")
        return (
            [(e["status"], e["deliveryStatus"]) for e in executions],
            children,
            session["phase"],
            [m["role"] for m in await rest.messages(sid)],
        )

    settled = await snapshot()
    assert settled == ([("CANCELLED", "SUPPRESSED")] * 2, ["CANCELLED"] * 2, "CANCELLED", ["USER", "ASSISTANT"])
    for _ in range(2):  # restart twice more: nothing changes
        restart_recovery(rcluster)
        assert await snapshot() == settled


async def test_10_children_ending_in_reverse_order_are_delivered_in_call_order(
    client: Client, rest: Rest
) -> None:
    sid = await client.run_turn(script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "slow first", "delay_ms": 1500})),
            call("delegate", agent_type="coder", task=script({"content": "quick second"})),
        ]},
        {"content": "ordered"},
    ), timeout=60)
    executions = (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]
    assert executions[1]["endedAt"] < executions[0]["endedAt"]
    results = [json.loads(m["content"])["result"] for m in await tool_results(rest, sid)]
    assert results == ["slow first", "quick second"]


async def test_broker_restarted_empty_loses_nothing(rcluster: Launcher, client: Client, rest: Rest) -> None:
    """Deliver 5: the local broker keeps messages in memory; killed and restarted empty, the
    event store re-issues what was lost and every turn still completes."""
    created = await client.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder",
                             task=script({"content": "through the outage", "delay_ms": SLOW_CHILD_MS}))]},
        {"content": "after the outage"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, client, sid)
    assert (await client.ack("send_message", sid, data={"content": "queued before the outage"}))["queued"] is True
    old = rcluster.kill("broker")
    rcluster.wait_restarted("broker", old)
    assert await client.wait_phase(sid, timeout=120, count=2) == "COMPLETED"
    history = await rest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT", "USER", "ASSISTANT"]
    assert json.loads(history[2]["content"])["result"] == "through the outage"
    assert (history[3]["content"], history[4]["content"]) == ("after the outage", "queued before the outage")


async def test_12_two_recovery_instances_duplicated_nothing(rcluster: Launcher) -> None:
    """After tests 1-10 ran with two recovery instances: the invariants over the database."""
    from chaos.checks_effects import check_5, check_6
    from chaos.checks_history import check_1, check_2, check_3
    from chaos.dbstate import load
    from chaos.run import json_codecs

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
