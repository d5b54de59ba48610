"""Correlation and causation ids of what the gateway writes: a frame that posts input roots
the turn at that input; any other writing frame is the root of what it writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from muster_contracts.events import SessionPhaseChanged
from muster_gateway.bootstrap import build_app
from muster_runtime.process.db import Pool
from muster_runtime.process.settings import Settings
from muster_runtime.store import eventstore


@pytest.fixture
def client(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    # The database is the session's, shared by the gateway tests, and no harness starts the
    # turns they create: shedding on that backlog's age would refuse these at random.
    settings = Settings(database_url=database_url, kafka_bootstrap_servers="", data_dir=tmp_path,
                        overload_backlog=0, overload_backlog_age_ms=0)
    app = build_app(settings, tokens={"ta": "alice"}, kafka=False)
    with TestClient(app) as test_client:
        yield test_client


def send(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send_text(json.dumps(frame))
    while True:  # the session's own events stream to the creating socket too
        reply: dict[str, Any] = ws.receive_json()
        if reply.get("id") == frame.get("id"):
            return reply


async def metadata_of(pool: Pool, session_id: str) -> dict[str, dict[str, Any]]:
    rows = await pool.fetch("SELECT type, metadata FROM events WHERE stream_id = $1", session_id)
    return {r["type"]: r["metadata"] for r in rows}


async def commands_of(pool: Pool, session_id: str) -> dict[str, dict[str, Any]]:
    rows = await pool.fetch("SELECT payload FROM outbox WHERE key = $1 AND payload IS NOT NULL", session_id)
    return {r["payload"]["type"]: r["payload"] for r in rows}


async def test_a_turn_is_rooted_at_its_input_and_a_cancel_at_its_frame(client: TestClient, pool: Pool) -> None:
    with client.websocket_connect("/v1/ws?token=ta") as ws:
        ack = send(ws, {"type": "create_session", "id": "c", "data": {"content": "hello"}})["data"]
        sid, first = ack["sessionId"], ack["messageId"]
        meta = await metadata_of(pool, sid)
        assert meta["SessionCreated"]["correlation_id"] == meta["SessionCreated"]["causation_id"] == first
        assert meta["UserMessageQueued"]["correlation_id"] == first
        process = (await commands_of(pool, sid))["ProcessSession"]
        assert process["correlation_id"] == process["causation_id"] == first

        async with pool.acquire() as conn, conn.transaction():  # as if the harness ran the turn
            await eventstore.append(conn, sid, [SessionPhaseChanged(phase="RUNNING")])
        assert send(ws, {"type": "cancel", "id": "x", "sessionId": sid})["type"] == "ack"
    cancel = (await commands_of(pool, sid))["CancelSession"]
    rows = await pool.fetch("SELECT event_id, metadata FROM events WHERE stream_id = $1 AND type = 'SessionPhaseChanged' ORDER BY position", sid)
    frame_root = rows[-1]["metadata"]["correlation_id"]
    # One root for the whole decision: the event and the command name the same one, which
    # is neither the event nor the command itself.
    assert rows[-1]["metadata"]["causation_id"] == frame_root
    assert cancel["correlation_id"] == cancel["causation_id"] == frame_root
    assert frame_root not in (str(rows[-1]["event_id"]), cancel["message_id"], first)
