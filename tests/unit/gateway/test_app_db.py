"""The assembled app (REST + WebSocket) against PostgreSQL, without Kafka: live delivery
then comes from subscribe-time catch-up and the hub's poller."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient
from muster_contracts.events import (
    DomainEvent,
    ExecutionDelivered,
    ExecutionFinished,
    ExecutionStarted,
    MessageRecorded,
    SessionPhaseChanged,
    TokenUsage,
    ToolCallSpec,
)
from muster_gateway.bootstrap import build_app
from muster_gateway.protocol import MAX_FRAME_BYTES
from muster_runtime.process.db import Pool
from muster_runtime.process.settings import Settings
from muster_runtime.store import eventstore
from starlette.websockets import WebSocketDisconnect

ALICE = {"Authorization": "Bearer ta"}
BOB = {"Authorization": "Bearer tb"}


@pytest.fixture
def client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    # The database is the session's, shared by the gateway tests, and no harness starts the
    # turns they create: shedding on that backlog's age would refuse these at random.
    settings = Settings(database_url=database_url, kafka_bootstrap_servers="",
                        data_dir=tmp_path, overload_backlog=0, overload_backlog_age_ms=0)
    app = build_app(settings, tokens={"ta": "alice", "tb": "bob"}, kafka=False)
    with TestClient(app) as test_client:
        yield test_client


def send(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send_text(json.dumps(frame))
    reply: dict[str, Any] = ws.receive_json()
    return reply


async def append(pool: Pool, session_id: str, *events: DomainEvent) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, session_id, list(events))


def test_unauthorized_socket_is_told_then_closed(client: TestClient) -> None:
    with client.websocket_connect("/v1/ws?token=wrong") as ws:
        assert ws.receive_json() == {
            "type": "error", "data": {"code": "unauthorized", "message": "missing or invalid token"}
        }
        with pytest.raises(WebSocketDisconnect) as info:
            ws.receive_json()
        assert info.value.code == 4401
    with client.websocket_connect("/v1/ws", headers=ALICE) as ws:  # header works too
        assert send(ws, {"type": "ping", "id": 1}) == {"type": "pong", "id": 1}


def test_create_session_acks_then_streams_its_events(client: TestClient) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        ack = send(ws, {"type": "create_session", "id": "c",
                        "data": {"content": "hello", "title": "T", "clientMessageId": "m1"}})
        assert ack["type"] == "ack" and ack["id"] == "c"
        sid = ack["data"]["sessionId"]
        created, queued = ws.receive_json(), ws.receive_json()
        assert (created["type"], created["sessionId"], created["data"]["title"]) == (
            "session_created", sid, "T"
        )
        assert queued["type"] == "message_queued" and queued["position"] > created["position"]
        assert queued["data"]["messageId"] == ack["data"]["messageId"]
        assert created["time"].endswith("Z")


def test_errors_keep_the_socket_open(client: TestClient) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        assert send(ws, {"type": "nope", "id": 1})["data"]["code"] == "unknown_type"
        ws.send_text("{")
        assert ws.receive_json()["data"]["code"] == "bad_request"
        big = {"type": "ping", "id": "big", "pad": "x" * MAX_FRAME_BYTES}
        reply = send(ws, big)
        assert reply == {"type": "error", "id": "big", "data": {
            "code": "too_large", "message": f"frame exceeds {MAX_FRAME_BYTES} bytes"}}
        reply = send(ws, {"type": "send_message", "id": 2, "sessionId": str(uuid4()),
                          "data": {"content": "x"}})
        assert reply["data"] == {"code": "not_found", "message": "session not found"}
        ws.send_bytes(b'{"type": "ping", "id": 3}')
        assert ws.receive_json() == {"type": "pong", "id": 3}


def test_subscribe_replays_after_position_then_goes_live(client: TestClient) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as owner, \
            client.websocket_connect("/v1/ws?token=ta") as watcher:
        sid = send(owner, {"type": "create_session", "data": {"content": "one"}})["data"][
            "sessionId"]
        first = [owner.receive_json(), owner.receive_json()]
        ack = send(watcher, {"type": "subscribe", "id": "s", "sessionId": sid,
                             "data": {"afterPosition": first[0]["position"]}})
        assert ack["type"] == "ack" and ack["id"] == "s"
        assert watcher.receive_json()["position"] == first[1]["position"]
        # twice: acknowledged, nothing replayed again
        assert send(watcher, {"type": "subscribe", "id": "s2", "sessionId": sid})["type"] == "ack"
        posted = send(owner, {"type": "send_message", "id": "m", "sessionId": sid,
                              "data": {"content": "two"}})
        assert posted["data"]["queued"] is True  # behind "one", which no harness started
        live = watcher.receive_json()  # arrives through the poller (no Kafka here)
        assert live["type"] == "message_queued" and live["data"]["content"] == "two"
        assert owner.receive_json() == live
        assert send(watcher, {"type": "unsubscribe", "id": "u", "sessionId": sid})["type"] == "ack"
        assert send(watcher, {"type": "ping", "id": "p"})["type"] == "pong"


def test_other_users_sessions_do_not_exist(client: TestClient) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        sid = send(ws, {"type": "create_session", "data": {}})["data"]["sessionId"]
    with client.websocket_connect("/v1/ws?token=tb") as ws:
        for frame_type in ("subscribe", "cancel", "unsubscribe"):
            reply = send(ws, {"type": frame_type, "id": 1, "sessionId": sid})
            assert reply["data"] == {"code": "not_found", "message": "session not found"}
    assert client.get(f"/v1/sessions/{sid}", headers=BOB).json() == {
        "error": {"code": "not_found", "message": "session not found"}}
    assert client.get(f"/v1/sessions/{sid}", headers=ALICE).status_code == 200
    assert sid not in json.dumps(client.get("/v1/sessions", headers=BOB).json())


async def test_rest_sessions_and_messages(client: TestClient, pool: Pool) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        sid = send(ws, {"type": "create_session", "data": {"title": "rest"}})["data"]["sessionId"]
    roles = ["USER", "ASSISTANT", "TOOL", "ASSISTANT", "USER", "ASSISTANT", "USER", "ASSISTANT"]
    ids = [uuid4() for _ in roles]
    events: list[DomainEvent] = [SessionPhaseChanged(phase="RESUMING")]
    for seq, (role, mid) in enumerate(zip(roles, ids, strict=True), start=1):
        events.append(MessageRecorded(
            message_id=mid, seq=seq, role=role, content=f"m{seq}",
            tool_calls=[ToolCallSpec(id="c", name="list_files", arguments=json.dumps({}))]
            if seq == 2 else None,
            tool_call_id="c" if role == "TOOL" else None,
        ))
    await append(pool, sid, *events)
    body = client.get(f"/v1/sessions/{sid}", headers=ALICE).json()
    assert body["phase"] == "RUNNING" and body["title"] == "rest" and body["sessionId"] == sid
    assert body["sessionType"] == "NORMAL" and body["rootSessionId"] == sid
    listed = client.get("/v1/sessions?type=NORMAL", headers=ALICE).json()["items"]
    assert listed[0]["sessionId"] == sid  # newest first

    page = client.get(f"/v1/sessions/{sid}/messages?rounds=2", headers=ALICE).json()
    assert [m["seq"] for m in page["items"]] == [5, 6, 7, 8] and page["nextBeforeSeq"] == 5
    older = client.get(f"/v1/sessions/{sid}/messages?rounds=2&beforeSeq=5",
                       headers=ALICE).json()
    assert [m["seq"] for m in older["items"]] == [1, 2, 3, 4] and older["nextBeforeSeq"] is None
    first, second, tool = older["items"][:3]
    assert "fileChanges" not in first and second["fileChanges"] == []
    assert second["toolCalls"][0]["function"] == {"name": "list_files", "arguments": "{}"}
    assert tool["toolCallId"] == "c" and "toolCalls" not in tool and tool["discarded"] is False

    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE messages SET discarded = true WHERE message_id = $1", ids[7])
    page = client.get(f"/v1/sessions/{sid}/messages?rounds=1", headers=ALICE).json()
    assert [m["seq"] for m in page["items"]] == [7]
    page = client.get(f"/v1/sessions/{sid}/messages?rounds=1&includeDiscarded=1",
                      headers=ALICE).json()
    assert [(m["seq"], m["discarded"]) for m in page["items"]] == [(7, False), (8, True)]
    assert client.get(f"/v1/sessions/{sid}/executions?role=child",
                      headers=ALICE).json() == {"items": []}


async def test_rest_executions(client: TestClient, pool: Pool) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        parent = send(ws, {"type": "create_session", "data": {}})["data"]["sessionId"]
    child, execution, start, asked, answered = uuid4(), uuid4(), uuid4(), uuid4(), uuid4()
    deadline = datetime.now(UTC) + timedelta(hours=1)
    await append(pool, str(execution), ExecutionStarted(
        execution_id=execution, parent_session_id=UUID(parent), parent_tool_call_id="call_1",
        parent_message_id=asked, child_session_id=child, user_id="alice",
        agent_type="coder", invocation_type="DELEGATE", task="do it", round=1,
        start_message_id=start, deadline_at=deadline,
    ), ExecutionFinished(status="COMPLETED", result="done", rounds=2, tool_calls=1,
                         usage=TokenUsage(prompt_tokens=10, completion_tokens=5)))
    (pending,) = client.get(f"/v1/sessions/{parent}/executions", headers=ALICE).json()["items"]
    assert (pending["deliveredAt"], pending["parentMessageId"], pending["toolMessageId"]) == (
        None, str(asked), None)
    await append(pool, str(execution), ExecutionDelivered(delivery_status="DELIVERED", tool_message_id=answered))
    items = client.get(f"/v1/sessions/{parent}/executions", headers=ALICE).json()["items"]
    assert len(items) == 1
    item = items[0]
    assert (item["executionId"], item["childSessionId"], item["parentToolCallId"]) == (
        str(execution), str(child), "call_1")
    assert (item["status"], item["deliveryStatus"], item["invocationType"]) == (
        "COMPLETED", "DELIVERED", "DELEGATE")
    assert (item["parentMessageId"], item["toolMessageId"]) == (str(asked), str(answered))
    assert item["endedAt"] <= item["deliveredAt"] and item["deliveredAt"].endswith("Z")
    assert item["usage"] == {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15}
    assert item["endedAt"].endswith("Z") and item["rounds"] == 2 and item["toolCalls"] == 1
    assert "error" not in item
    response = client.get(f"/v1/sessions/{parent}/executions", headers=BOB)
    assert response.status_code == 404
    response = client.get(f"/v1/sessions/{parent}/executions?role=sibling", headers=ALICE)
    assert response.status_code == 400


def test_rest_errors_have_one_shape(client: TestClient) -> None:
    assert client.get("/v1/sessions").json()["error"]["code"] == "unauthorized"
    assert client.get("/v1/sessions", headers=BOB).status_code == 200
    response = client.get("/v1/sessions?type=OTHER", headers=ALICE)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_request"
    response = client.get(f"/v1/sessions/{uuid4()}/messages?rounds=0", headers=ALICE)
    assert response.json() == {"error": {"code": "bad_request", "message": "rounds: must be >= 1"}}
    response = client.get("/v1/nowhere", headers=ALICE)
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    response = client.get("/v1/sessions/not-a-uuid", headers=ALICE)
    assert response.json()["error"] == {"code": "not_found", "message": "session not found"}


def test_health_metrics_and_specs_need_no_token(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        send(ws, {"type": "ping"})
        metrics = client.get("/metrics").text
        assert "muster_gateway_connections 1.0" in metrics
    assert 'muster_gateway_frames_total{type="ping"}' in metrics
    assert "/v1/sessions/{session_id}/messages" in client.get("/openapi.json").json()["paths"]
    assert client.get("/asyncapi.json").json()["asyncapi"].startswith("3.")


def test_a_request_without_a_valid_token_is_unauthorized_whatever_its_body(client: TestClient) -> None:
    """Found by the REST fuzzer: a body is parsed before the route's dependencies, so a
    malformed body with a garbage token answered bad_request instead of unauthorized."""
    for headers in ({"Authorization": "Bearer garbage"}, {}):
        answer = client.patch("/v1/sessions/b4716549-ea75-4843-8a41-74396d357fdc", content=b"{not json",
                              headers={**headers, "Content-Type": "application/json"})
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "unauthorized"
    with_token = client.patch("/v1/sessions/b4716549-ea75-4843-8a41-74396d357fdc", content=b"{not json",
                              headers={**ALICE, "Content-Type": "application/json"})
    assert with_token.status_code == 400 and with_token.json()["error"]["code"] == "bad_request"
