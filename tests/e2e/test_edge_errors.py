"""Bad input gets a precise error; the socket and the services keep working."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


async def error_of(client: Client, raw: str | bytes) -> dict[str, str]:
    await client.send_raw(raw)
    frame = await client.next_unmatched()
    assert frame["type"] == "error", frame
    return dict(frame["data"])


async def test_malformed_frames_get_precise_errors_and_the_socket_stays_open(alice: Client) -> None:
    assert (await error_of(alice, "{not json"))["code"] == "bad_request"
    assert (await error_of(alice, "[1, 2]"))["code"] == "bad_request"
    unknown = await alice.request("teleport", data={})
    assert unknown["type"] == "error" and unknown["data"]["code"] == "unknown_type"
    assert "teleport" in unknown["data"]["message"]
    missing = await alice.request("send_message", data={"content": "x"})
    assert missing["data"]["code"] == "bad_request" and "sessionId" in missing["data"]["message"]
    no_content = await alice.request("send_message", "00000000-0000-0000-0000-000000000001", {})
    assert no_content["data"]["code"] == "bad_request" and "content" in no_content["data"]["message"]
    wrong_type = await alice.request("create_session", data={"content": 42})
    assert wrong_type["data"]["code"] == "bad_request" and "content" in wrong_type["data"]["message"]
    huge = json.dumps({"type": "create_session", "id": "big", "data": {"content": "x" * (1024 * 1024 + 10)}})
    too_large = await error_of(alice, huge)
    assert too_large["code"] == "too_large"
    pong = await alice.request("ping")
    assert pong["type"] == "pong"
    session_id = await alice.run_turn(script({"content": "still fine"}))
    assert alice.phases(session_id)[-1] == "COMPLETED"


async def test_paths_outside_the_workspace_are_refused(cluster, alice: Client, alice_rest: Rest) -> None:
    created = await alice.ack("create_session", data={})
    session_id = created["sessionId"]
    workspace = Path(cluster.data_dir) / "workspaces" / session_id
    workspace.mkdir(parents=True, exist_ok=True)
    os.symlink("/etc", workspace / "out")
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("read_file", path="../../etc/passwd")]},
        {"tool_calls": [call("read_file", path="/etc/passwd")]},
        {"tool_calls": [call("read_file", path="out/passwd")]},
        {"tool_calls": [call("write_file", path="out/evil", content="x")]},
        {"content": "refused"},
    )})
    assert await alice.wait_phase(session_id) == "COMPLETED"
    results = [json.loads(m["content"]) for m in await alice_rest.messages(session_id) if m["role"] == "TOOL"]
    assert [r["success"] for r in results] == [False] * 4
    assert "outside the workspace" in results[0]["error"]
    assert "absolute" in results[1]["error"]
    assert "outside the workspace" in results[2]["error"] and "outside the workspace" in results[3]["error"]
    assert not Path("/etc/evil").exists()
    assert "root:" not in json.dumps(results)


async def test_another_users_session_is_not_found_everywhere(alice: Client, bob: Client, bob_rest: Rest) -> None:
    session_id = await alice.run_turn(script({"content": "alice's secret"}))
    for path in ("", "/messages", "/executions"):
        response = await bob_rest.get(f"/v1/sessions/{session_id}{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    listed = await bob_rest.json("/v1/sessions")
    assert session_id not in {s["sessionId"] for s in listed["items"]}
    for type_, data in (("send_message", {"content": "hi"}), ("cancel", None), ("subscribe", {}),
                        ("unsubscribe", None), ("create_side_session", {"content": "x", "contextMode": "none"})):
        reply = await bob.request(type_, session_id, data)
        assert reply["type"] == "error" and reply["data"]["code"] in ("not_found", "unknown_type"), (type_, reply)
        if type_ != "create_side_session":
            assert reply["data"]["code"] == "not_found"
    assert bob.events.get(session_id, []) == []
    unknown = await bob_rest.get("/v1/sessions/00000000-0000-0000-0000-000000000000")
    assert unknown.status_code == 404 and unknown.json() == (await bob_rest.get(f"/v1/sessions/{session_id}")).json()


async def test_rest_requires_a_valid_token(cluster) -> None:
    anonymous = Rest(cluster.gateway_url, "wrong-token")
    try:
        response = await anonymous.get("/v1/sessions")
        assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
        assert (await anonymous.get("/healthz")).status_code == 200
        metrics = await anonymous.get("/metrics")
        assert metrics.status_code == 200 and "muster_" in metrics.text
    finally:
        await anonymous.close()
