"""The side-task routes in the assembled app: published in the OpenAPI document, and a
side task created over the WebSocket is listed and explained over REST."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from muster_gateway.bootstrap import build_app
from muster_runtime.process.settings import Settings

ALICE = {"Authorization": "Bearer ta"}
BOB = {"Authorization": "Bearer tb"}


@pytest.fixture
def client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    # The database is the session's, shared by the gateway tests, and no harness starts the
    # turns they create: shedding on that backlog's age would refuse these at random.
    settings = Settings(database_url=database_url, kafka_bootstrap_servers="", data_dir=tmp_path,
                        overload_backlog=0, overload_backlog_age_ms=0)
    app = build_app(settings, tokens={"ta": "alice", "tb": "bob"}, kafka=False)
    with TestClient(app) as test_client:
        yield test_client


def send(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send_text(json.dumps(frame))
    while True:
        reply: dict[str, Any] = ws.receive_json()
        if reply.get("id") == frame["id"]:
            return reply


def test_the_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"get"} <= set(paths["/v1/sessions/{session_id}/side-tasks"])
    assert {"get"} <= set(paths["/v1/sessions/{session_id}/context"])
    assert {"get"} <= set(paths["/v1/search"])
    assert {"get", "patch", "delete"} <= set(paths["/v1/sessions/{session_id}"])
    for action in ("archive", "unarchive", "promote", "read"):
        assert "post" in paths[f"/v1/sessions/{{session_id}}/{action}"]


def test_a_side_task_over_the_socket_is_listed_and_explained(client: TestClient) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        main = send(ws, {"type": "create_session", "id": "1"})["data"]["sessionId"]
        side = send(ws, {"type": "create_side_session", "id": "2", "sessionId": main,
                         "data": {"content": "look aside", "contextMode": "summary", "title": "aside"}})
        assert side["type"] == "ack", side
        bad = send(ws, {"type": "create_side_session", "id": "3", "sessionId": main,
                        "data": {"content": "x", "contextMode": "all"}})
        assert bad["data"]["code"] == "bad_request"
    side_id = side["data"]["sessionId"]
    items = client.get(f"/v1/sessions/{main}/side-tasks", headers=ALICE).json()["items"]
    assert [(i["sessionId"], i["title"], i["contextMode"]) for i in items] == [(side_id, "aside", "summary")]
    context = client.get(f"/v1/sessions/{side_id}/context", headers=ALICE).json()
    assert "not reported back" in context["system"] and context["messages"] == []
    assert [t["function"]["name"] for t in context["tools"]][:2] == ["read_file", "write_file"]  # the tools offered
    assert client.get(f"/v1/sessions/{side_id}/context", headers=BOB).status_code == 404
    assert client.get("/v1/search", params={"q": "x\x00"}, headers=ALICE).status_code == 400
