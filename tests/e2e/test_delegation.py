"""Delegation over Kafka: parallel children, follow-ups, the barrier, cancel and failure."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4, uuid5

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer
from muster_agent.delegation import NAMESPACE, execution_id_for
from muster_agent.models.scripted import tool_call_id
from muster_contracts.commands import ProcessSession, ResumeSession, RunExecution

from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


def child_task(name: str, delay_ms: int = 0, answer: str | None = None) -> str:
    return script(
        {"tool_calls": [call("write_file", path=name, content=f"written by {name}\n")], "delay_ms": delay_ms},
        {"content": answer or f"wrote {name}"},
    )


def tool_results(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in history if m["role"] == "TOOL"]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture
async def db(cluster):  # type: ignore[no-untyped-def]
    conn = await asyncpg.connect(cluster.database_url)
    yield conn
    await conn.close()


async def publish(cluster, topic: str, key: str, body: bytes, times: int = 1) -> None:  # type: ignore[no-untyped-def]
    producer = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)
    await producer.start()
    try:
        for _ in range(times):
            await producer.send_and_wait(topic, body, key=key.encode())
    finally:
        await producer.stop()


async def wait_processed(db: asyncpg.Connection, consumer: str, message_id: UUID, timeout: float = 30) -> None:
    async def poll() -> None:
        while not await db.fetchval(
            "SELECT true FROM processed_messages WHERE consumer = $1 AND message_id = $2", consumer, str(message_id)
        ):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


async def test_three_parallel_children_deliver_in_order_and_run_concurrently(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child_task(f"c{i}.txt", 1000)) for i in range(3)]},
        {"content": "all three delivered"},
    ))
    assert alice.phases(session_id)[-1] == "COMPLETED"
    history = await alice_rest.messages(session_id)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "TOOL", "TOOL", "ASSISTANT"]
    call_ids = [c["id"] for c in history[1]["toolCalls"]]
    assert [m["toolCallId"] for m in history[2:5]] == call_ids
    results = tool_results(history)
    assert [r["result"] for r in results] == ["wrote c0.txt", "wrote c1.txt", "wrote c2.txt"]
    # Each delivered TOOL message names the child it came from, stored and live.
    assert [m["sourceSessionId"] for m in history[2:5]] == [r["child_session_id"] for r in results]
    live = {e["data"]["messageId"]: e["data"] for e in alice.events[session_id] if e["type"] == "message"}
    assert [live[m["messageId"]]["sourceSessionId"] for m in history[2:5]] == [r["child_session_id"] for r in results]
    assert all("sourceSessionId" not in m for m in history if m["role"] != "TOOL")
    assert all(r["success"] and r["agent_type"] == "coder" and r["rounds"] == 2 and r["tool_calls"] == 1 for r in results)
    assert all(set(r["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"} for r in results)
    for i in range(3):
        assert (cluster.data_dir / "workspaces" / session_id / f"c{i}.txt").exists()

    executions = (await alice_rest.json(f"/v1/sessions/{session_id}/executions"))["items"]
    assert sorted(e["parentToolCallId"] for e in executions) == sorted(call_ids)
    assert {(e["status"], e["deliveryStatus"], e["invocationType"]) for e in executions} == {("COMPLETED", "DELIVERED", "DELEGATE")}
    # Concurrency from recorded times: three 1 s children inside one turn well under 3 s.
    turn = ts(history[-1]["createdAt"]) - ts(history[0]["createdAt"])
    assert turn.total_seconds() < 2.5, turn
    starts = [ts(e["startedAt"]) for e in executions]
    ends = [ts(e["endedAt"]) for e in executions]
    assert max(starts) < min(ends)  # all three were running at the same time

    kinds = [e["type"] for e in alice.events[session_id]]
    assert kinds.count("subagent_session_created") == 3
    created = [e["data"] for e in alice.events[session_id] if e["type"] == "subagent_session_created"]
    assert {c["toolCallId"] for c in created} == set(call_ids)
    assert all(c["parentSessionId"] == session_id and c["agentType"] == "coder" for c in created)
    delivered = [e["data"] for e in alice.events[session_id]
                 if e["type"] == "execution_status" and e["data"]["deliveryStatus"] == "DELIVERED"]
    assert len(delivered) == 3
    child = await alice_rest.json(f"/v1/sessions/{created[0]['childSessionId']}")
    assert (child["sessionType"], child["parentSessionId"], child["rootSessionId"]) == ("SUBAGENT", session_id, session_id)


async def test_followups_continue_the_childs_history_with_new_rounds(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child_task("f.txt", answer="first run"))]},
        {"content": "delegated"},
    ))
    child_id = tool_results(await alice_rest.messages(session_id))[0]["child_session_id"]
    for run, answer in ((2, "second run"), (3, "third run")):
        await alice.ack("send_message", session_id, {"content": script(
            {"tool_calls": [call("delegate_followup", child_session_id=child_id, task=script({"content": answer}))]},
            {"content": f"followed up {run}"},
        )})
        await alice.wait_phase(session_id, ("COMPLETED",), count=run)
        result = tool_results(await alice_rest.messages(session_id))[-1]
        # Every earlier round of the child completed, and this one too.
        assert (result["follow_up"], result["round"], result["completed_rounds"], result["result"]) == (
            True, run, run, answer)
        assert result["child_session_id"] == child_id and result["rounds"] == 1

    child_history = await alice_rest.messages(child_id)
    assert [(m["role"], m["content"]) for m in child_history if m["role"] == "ASSISTANT" and not m.get("toolCalls")] == [
        ("ASSISTANT", "first run"), ("ASSISTANT", "second run"), ("ASSISTANT", "third run")]
    assert [m["seq"] for m in child_history] == list(range(1, len(child_history) + 1))
    runs = (await alice_rest.json(f"/v1/sessions/{child_id}/executions", role="child"))["items"]
    assert sorted((e["invocationType"], e["status"]) for e in runs) == [
        ("DELEGATE", "COMPLETED"), ("FOLLOWUP", "COMPLETED"), ("FOLLOWUP", "COMPLETED")]


async def test_invalid_followups_each_get_their_error_and_create_nothing(
    alice: Client, bob: Client, alice_rest: Rest, db: asyncpg.Connection
) -> None:
    other_parent = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "other"}))]}, {"content": "ok"}))
    others_child = (await db.fetchval("SELECT child_session_id FROM executions WHERE parent_session_id = $1",
                                      UUID(other_parent)))
    bobs_parent = await bob.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "bob's"}))]}, {"content": "ok"}))
    bobs_child = await db.fetchval("SELECT child_session_id FROM executions WHERE parent_session_id = $1", UUID(bobs_parent))
    normal = await alice.run_turn(script({"content": "plain"}))

    session_id = (await alice.ack("create_session", data={}))["sessionId"]
    # The scripted model's first call gets tool-call ids derived from (session, user index 1,
    # step 0, position): so the slow child's id is known before the turn runs.
    slow_call = tool_call_id(session_id, 1, 0, 0)
    slow_child = uuid5(NAMESPACE, f"child:{execution_id_for(UUID(session_id), slow_call)}")
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=script({"content": "slow", "delay_ms": 1500})),
            call("delegate_followup", child_session_id=str(slow_child), task="again"),
            call("delegate_followup", task="no child id"),
            call("delegate_followup", child_session_id=str(uuid4()), task="unknown"),
            call("delegate_followup", child_session_id=normal, task="normal"),
            call("delegate_followup", child_session_id=str(others_child), task="not mine"),
            call("delegate_followup", child_session_id=str(bobs_child), task="bob's"),
            call("delegate", agent_type="no-such-agent", task="x"),
        ]},
        {"content": "validated"},
    )})
    assert await alice.wait_phase(session_id) == "COMPLETED"
    results = tool_results(await alice_rest.messages(session_id))
    errors = [r.get("error", "") for r in results if not r["success"]]
    assert len(errors) == 7, results
    running, missing, unknown, not_subagent, foreign_parent, other_user, bad_agent = errors
    assert "still running" in running
    assert "child_session_id" in missing and "task" in missing
    assert "not found" in unknown
    assert "not a subagent" in not_subagent
    assert "not delegated by this session" in foreign_parent
    # Another user's child is indistinguishable from one that does not exist.
    assert other_user == f"session {bobs_child} not found"
    assert "unknown agent type" in bad_agent and "coder" in bad_agent
    assert await db.fetchval("SELECT count(*) FROM executions WHERE parent_session_id = $1", UUID(session_id)) == 1
    for child in (others_child, bobs_child):
        assert await db.fetchval("SELECT count(*) FROM executions WHERE child_session_id = $1", child) == 1


async def test_duplicate_run_execution_and_replayed_steps_change_nothing(
    cluster, alice: Client, alice_rest: Rest, db: asyncpg.Connection
) -> None:
    session_id = (await alice.ack("create_session", data={}))["sessionId"]
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=child_task("once.txt", 1500))]},
        {"content": "done"},
    )})
    await alice.wait_for(lambda: any(e["type"] == "subagent_session_created" for e in alice.events[session_id]))
    # Replay the parent's step while it waits for its child: no second execution.
    replay = ProcessSession(session_id=UUID(session_id), reason="test-replay")
    await publish(cluster, "muster.commands", session_id, replay.model_dump_json().encode(), times=2)
    await wait_processed(db, "harness", replay.message_id)
    assert await alice.wait_phase(session_id) == "COMPLETED"

    execution = await db.fetchrow("SELECT * FROM executions WHERE parent_session_id = $1", UUID(session_id))
    run = RunExecution(execution_id=execution["execution_id"], child_session_id=execution["child_session_id"],
                       parent_session_id=UUID(session_id))
    await publish(cluster, "muster.delegations", str(run.child_session_id), run.model_dump_json().encode(), times=2)
    resume = ResumeSession(session_id=UUID(session_id))
    await publish(cluster, "muster.commands", session_id, resume.model_dump_json().encode(), times=2)
    await wait_processed(db, "subagent-worker", run.message_id)
    await wait_processed(db, "harness", resume.message_id)

    assert await db.fetchval("SELECT count(*) FROM executions WHERE parent_session_id = $1", UUID(session_id)) == 1
    child_history = await alice_rest.messages(str(execution["child_session_id"]))
    assert [m["role"] for m in child_history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    history = await alice_rest.messages(session_id)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]


async def test_cancelling_the_parent_cancels_children_and_suppresses_results(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    created = await alice.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "slow", "delay_ms": 60000}))
                        for _ in range(2)]},
        {"content": "must never be said"},
    )})
    session_id = created["sessionId"]
    await alice.wait_for(lambda: sum(e["type"] == "subagent_session_created" for e in alice.events[session_id]) == 2)
    children = [e["data"]["childSessionId"] for e in alice.events[session_id] if e["type"] == "subagent_session_created"]
    for child in children:
        await alice.ack("subscribe", child, {"afterPosition": 0})
        await alice.wait_phase(child, ("RUNNING",))
    assert (await alice.request("cancel", session_id))["type"] == "ack"
    for child in children:
        assert await alice.wait_phase(child, ("CANCELLED",), timeout=30) == "CANCELLED"
    await alice.wait_for(lambda: sum(
        e["type"] == "execution_status" and e["data"]["deliveryStatus"] == "SUPPRESSED" for e in alice.events[session_id]
    ) == 2, timeout=30)
    executions = (await alice_rest.json(f"/v1/sessions/{session_id}/executions"))["items"]
    assert {(e["status"], e["deliveryStatus"]) for e in executions} == {("CANCELLED", "SUPPRESSED")}
    assert (await alice_rest.json(f"/v1/sessions/{session_id}"))["phase"] == "CANCELLED"
    history = await alice_rest.messages(session_id)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT"]
    assert "CANCELLED" == alice.phases(session_id)[-1]


async def test_failed_child_yields_a_failure_result_and_the_parent_continues(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=script({"fail": "child broke"}))]},
        {"content": "noted the failure"},
    ))
    assert alice.phases(session_id)[-1] == "COMPLETED"
    history = await alice_rest.messages(session_id)
    failure = tool_results(history)[0]
    assert failure["success"] is False and failure["cancelled"] is False and "child broke" in failure["error"]
    assert failure["result"] == failure["error"]  # the reason in both (DESIGN §4)
    assert history[-1]["content"] == "noted the failure"
