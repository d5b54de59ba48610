"""The outbox, idempotent consumers and the dead-letter topic against real processes."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from .wsclient import Client, Rest, script

pytestmark = pytest.mark.e2e


async def test_harness_killed_mid_model_call_loses_nothing(cluster, alice: Client, alice_rest: Rest) -> None:
    created = await alice.ack("create_session", data={"content": script(
        {"content": "survived", "delay_ms": 4000},
    )})
    session_id = created["sessionId"]
    await alice.wait_phase(session_id, ("RUNNING",))
    old_pid = cluster.kill("harness", signal.SIGKILL)
    cluster.wait_restarted("harness", old_pid)
    assert await alice.wait_phase(session_id, timeout=90) == "COMPLETED"
    history = await alice_rest.messages(session_id)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT"]
    assert history[1]["content"] == "survived"
    # Recovery took the turn over (RESUMING in the log of record); clients only saw RUNNING.
    conn = await asyncpg.connect(cluster.database_url)
    try:
        phases = await conn.fetch(
            "SELECT payload->>'phase' AS phase FROM events WHERE stream_id = $1 AND type = 'SessionPhaseChanged' "
            "ORDER BY position",
            session_id,
        )
    finally:
        await conn.close()
    assert [p["phase"] for p in phases] == ["RUNNING", "RESUMING", "RUNNING", "COMPLETED"]
    assert alice.phases(session_id) == ["RUNNING", "RUNNING", "RUNNING", "COMPLETED"]


async def test_poison_command_goes_to_the_dead_letter_topic(cluster, alice: Client) -> None:
    marker = f"poison-{uuid.uuid4()}"
    producer = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            "muster.commands", json.dumps({"type": "ProcessSession", "session_id": marker}).encode(), key=marker.encode()
        )
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "muster.dlq", bootstrap_servers=cluster.kafka_bootstrap, group_id=f"test-{marker}",
        auto_offset_reset="earliest", fetch_max_wait_ms=20,
    )
    await consumer.start()
    try:
        async def find() -> dict[str, str]:
            async for record in consumer:
                body = json.loads(record.value)
                if marker in body["raw"]:
                    return dict(body)
            raise AssertionError("dead-letter topic ended")

        parked = await asyncio.wait_for(find(), 60)
    finally:
        await consumer.stop()
    assert parked["source_topic"] == "muster.commands" and parked["consumer"] == "harness"
    assert "session_id" in parked["error"]
    # The consumer went on: a new session still completes.
    session_id = await alice.run_turn(script({"content": "after poison"}))
    assert alice.phases(session_id)[-1] == "COMPLETED"
