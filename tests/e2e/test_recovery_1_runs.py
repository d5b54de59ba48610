"""Crash recovery against the real processes, runs (issue acceptance 1-5): the worker is
SIGKILLed while children run; the cluster has two recovery instances throughout (see
`recovery_support`). The acceptance map is in docs/crash-recovery.md."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from .conftest import Launcher
from .recovery_support import (
    SLOW_CHILD_MS,
    kill_worker,
    recoveries,
    statuses,
    tool_results,
    wait_running_in_worker,
    wait_status,
)
from .wsclient import Client, Rest, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_1_kill_during_a_first_delegate(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "child done", "delay_ms": SLOW_CHILD_MS}))]},
        {"content": "parent done"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, rclient, sid)
    kill_worker(rcluster)
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    (eid, *_), *_ = statuses(rclient, sid)
    # The takeover is announced, but clients never see RECOVERING: the run is still running.
    assert [s[1:] for s in statuses(rclient, sid) if s[0] == eid][:2] == [("RUNNING", "PENDING"), ("RUNNING", "PENDING")]
    assert "RECOVERING" not in {s[1] for s in statuses(rclient, sid)}
    (created_child,) = [e["data"] for e in rclient.events[sid] if e["type"] == "subagent_session_created"]
    history = await rrest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert len(history[1]["toolCalls"]) == 1
    result = json.loads(history[2]["content"])
    assert (result["result"], result["child_session_id"]) == ("child done", created_child["childSessionId"])
    (execution,) = (await rrest.json(f"/v1/sessions/{sid}/executions"))["items"]
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


async def test_2_kill_during_a_followup(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    sid = await rclient.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "first"}))]}, {"content": "ok"},
    ))
    (child,) = [e["data"]["childSessionId"] for e in rclient.events[sid] if e["type"] == "subagent_session_created"]
    await rclient.ack("send_message", sid, data={"content": script(
        {"tool_calls": [call("delegate_followup", child_session_id=child,
                             task=script({"content": "second", "delay_ms": SLOW_CHILD_MS}))]},
        {"content": "parent continues"},
    )})
    await wait_running_in_worker(rcluster, rclient, sid, count=2)
    kill_worker(rcluster)
    assert await rclient.wait_phase(sid, timeout=90, count=2) == "COMPLETED"
    history = await rrest.messages(sid)
    assert history[-1]["content"] == "parent continues"
    results = [json.loads(m["content"]) for m in history if m["role"] == "TOOL"]
    assert [(r["result"], r.get("follow_up"), r.get("round")) for r in results] == [
        ("first", None, None), ("second", True, 2)]
    executions = (await rrest.json(f"/v1/sessions/{sid}/executions"))["items"]
    assert [e["invocationType"] for e in executions] == ["DELEGATE", "FOLLOWUP"]
    assert {e["childSessionId"] for e in executions} == {child}
    assert await recoveries(rcluster, sid) == [0, 1]


async def test_3_two_parallel_children_resume_in_parallel(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "left", "delay_ms": SLOW_CHILD_MS})),
            call("delegate", agent_type="coder", task=script({"content": "right", "delay_ms": SLOW_CHILD_MS})),
        ]},
        {"content": "both in"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, rclient, sid, count=2)
    kill_worker(rcluster)
    # Both taken over (announced as RUNNING again: clients never see RECOVERING).
    await wait_status(rclient, sid, "RUNNING", count=4, timeout=60)
    # The parent waits for both: nothing delivered until both are terminal.
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    seen = [s[1:] for s in statuses(rclient, sid)]
    assert "RECOVERING" not in {status for status, _ in seen}
    first_delivery = next(i for i, (_, delivery) in enumerate(seen) if delivery == "DELIVERED")
    assert first_delivery > max(i for i, (status, _) in enumerate(seen) if status == "RUNNING")
    delivered = [s for s in statuses(rclient, sid) if s[2] == "DELIVERED"]
    assert len(delivered) == 2
    results = [json.loads(m["content"])["result"] for m in await tool_results(rrest, sid)]
    assert results == ["left", "right"]
    ended = [e["endedAt"] for e in (await rrest.json(f"/v1/sessions/{sid}/executions"))["items"]]
    assert await recoveries(rcluster, sid) == [1, 1]
    # Resumed in parallel: run one after the other, they would end >= one model delay apart.

    gap = abs((datetime.fromisoformat(ended[0]) - datetime.fromisoformat(ended[1])).total_seconds())
    assert gap < SLOW_CHILD_MS / 1000, ended


async def test_4_kill_mid_way_through_a_childs_tool_round(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    edits = 300
    child_task = script(
        {"tool_calls": [call("write_file", path="log.txt", content="END")]},
        {"tool_calls": [call("edit_file", path="log.txt", old_string="END", new_string=f"<{k}>END")
                        for k in range(edits)]},
        {"content": "edited"},
    )
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child_task)]}, {"content": "ok"},
    )})
    sid = created["sessionId"]
    log = Path(rcluster.data_dir) / "workspaces" / sid / "log.txt"

    await rclient.wait_for(lambda: any(e["type"] == "subagent_session_created" for e in rclient.events[sid]))
    (child,) = [e["data"]["childSessionId"] for e in rclient.events[sid] if e["type"] == "subagent_session_created"]
    await rclient.ack("subscribe", child, data={"afterPosition": 0})

    def edited_some() -> bool:
        return sum(e["type"] == "message" and e["data"]["role"] == "TOOL" for e in rclient.events[child]) >= 6

    await rclient.wait_for(edited_some, timeout=60)
    kill_worker(rcluster)
    assert await rclient.wait_phase(sid, timeout=120) == "COMPLETED"
    (result,) = [json.loads(m["content"]) for m in await tool_results(rrest, sid)]
    assert result["result"] == "edited"
    markers = [int(k) for k in re.findall(r"<(\d+)>", log.read_text())]
    assert len(markers) == len(set(markers)), "an edit ran twice"
    assert markers == sorted(markers) and len(markers) >= edits - 1  # at most the interrupted one is missing
    child_history = await rrest.messages(result["child_session_id"], includeDiscarded=1)
    discarded = [m for m in child_history if m["discarded"]]
    assert discarded and discarded[0]["role"] == "ASSISTANT"  # the cut round, then its results
    kept = [m for m in child_history if not m["discarded"]]
    assert [m["role"] for m in kept[:4]] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert len([m for m in kept if m["role"] == "TOOL"]) == 1 + edits


async def test_5_a_child_failing_on_resume_delivers_a_failure(rcluster: Launcher, rclient: Client, rrest: Rest) -> None:
    created = await rclient.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script(
            {"tool_calls": [call("list_files")]},
            {"delay_ms": SLOW_CHILD_MS, "fail": "model unavailable"},
        ))]},
        {"content": "handled"},
    )})
    sid = created["sessionId"]
    await wait_running_in_worker(rcluster, rclient, sid)
    kill_worker(rcluster)
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    (result,) = [json.loads(m["content"]) for m in await tool_results(rrest, sid)]
    assert result["success"] is False and "model unavailable" in result["error"]
    assert (await rrest.messages(sid))[-1]["content"] == "handled"
    assert await recoveries(rcluster, sid) == [1]
