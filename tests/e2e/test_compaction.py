"""Compaction against the real processes, on a cluster with a 2,000-token budget: a main
session of 30 turns and a child followed up 20 times stay under it, every message stays
stored, and compaction on request is refused while a turn runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from muster_agent.context import SUMMARY_HEADING

from .conftest import Launch, Launcher
from .wsclient import Client, Rest, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BUDGET = 2000


@pytest.fixture
async def small(launch: Launch) -> AsyncIterator[Launcher]:
    cluster = launch(MUSTER_CONTEXT_TOKENS=str(BUDGET))
    yield cluster
    cluster.stop()


async def prompt_tokens(cluster: Launcher, session_id: str) -> list[int]:
    """What the model reported for each call of the session (the scripted model counts
    the request it was sent)."""
    conn = await asyncpg.connect(cluster.database_url)
    try:
        rows = await conn.fetch(
            "SELECT usage FROM messages WHERE session_id = $1 AND role = 'ASSISTANT' ORDER BY seq", session_id
        )
    finally:
        await conn.close()
    return [json.loads(r["usage"])["prompt_tokens"] for r in rows]


def compactions(client: Client, session_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in client.events[session_id] if e["type"] == "compaction_recorded"]


async def test_thirty_turns_stay_under_the_budget_and_keep_every_message(small: Launcher) -> None:
    client = await Client.connect(small.ws_url, small.tokens["alice"])
    rest = Rest(small.gateway_url, small.tokens["alice"])
    try:
        session_id = await client.run_turn("turn 0: " + "lorem ipsum " * 25)
        for i in range(1, 30):
            await client.ack("send_message", session_id, {"content": f"turn {i}: " + "lorem ipsum " * 25})
            await client.wait_phase(session_id, ("COMPLETED",), count=i + 1)
        reported = await prompt_tokens(small, session_id)
        assert len(reported) == 30 and max(reported) <= BUDGET, reported
        done = compactions(client, session_id)
        assert len(done) >= 3
        history = await rest.messages(session_id)
        assert [m["role"] for m in history] == ["USER", "ASSISTANT"] * 30  # all stored, none hidden
        seq_role = {m["seq"]: m["role"] for m in history}
        ids = {m["messageId"] for m in history}
        for compaction in done:
            assert compaction["boundaryMessageId"] in ids
            assert seq_role[compaction["boundarySeq"] + 1] == "USER"  # between turns, never inside one
            assert compaction["summary"].startswith("summary of ")
            assert compaction["tokensAfter"] < compaction["tokensBefore"]
        # What the model sees: the prompt, the latest summary, then the turns after its boundary.
        context = await rest.json(f"/v1/sessions/{session_id}/context")
        latest = done[-1]
        assert context["messages"][0] == {"role": "system", "content": SUMMARY_HEADING + latest["summary"]}
        after = [m for m in history if m["seq"] > latest["boundarySeq"]]
        assert [m["content"] for m in context["messages"][1:]] == [m["content"] for m in after]
        # A fork carries the compaction: the side task sees the same summary and what follows.
        side = await client.ack("create_side_session", session_id, {"content": "fork it", "contextMode": "fork"})
        await client.wait_phase(side["sessionId"])
        forked = await rest.json(f"/v1/sessions/{side['sessionId']}/context")
        assert forked["messages"][0] == context["messages"][0]
        assert [m["content"] for m in forked["messages"][1:]] == [
            *(m["content"] for m in after), "fork it", "You said: fork it"]
    finally:
        await client.close()
        await rest.close()


async def test_a_child_followed_up_twenty_times_stays_under_the_budget(small: Launcher) -> None:
    client = await Client.connect(small.ws_url, small.tokens["alice"])
    rest = Rest(small.gateway_url, small.tokens["alice"])
    words = "the child's answer " * 12
    try:
        session_id = await client.run_turn(script(
            {"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "run 1 " + words}))]},
            {"content": "delegated"},
        ))
        (child,) = [e["data"]["childSessionId"] for e in client.events[session_id]
                    if e["type"] == "subagent_session_created"]
        for run in range(2, 22):
            await client.ack("send_message", session_id, {"content": script(
                {"tool_calls": [call("delegate_followup", child_session_id=child,
                                     task=script({"content": f"run {run} " + words}))]},
                {"content": f"followed up {run}"},
            )})
            await client.wait_phase(session_id, ("COMPLETED",), count=run)
        results = [m for m in await rest.messages(session_id) if m["role"] == "TOOL"]
        assert len(results) == 21 and all('"success": true' in m["content"] for m in results)
        reported = await prompt_tokens(small, child)
        assert len(reported) == 21 and max(reported) <= BUDGET, reported
        await client.ack("subscribe", child, {"afterPosition": 0})
        await client.wait_for(lambda: bool(compactions(client, child)), timeout=10)
    finally:
        await client.close()
        await rest.close()


async def test_compaction_on_request_is_refused_while_running_and_done_when_idle(small: Launcher) -> None:
    client = await Client.connect(small.ws_url, small.tokens["alice"])
    headers = {"Authorization": f"Bearer {small.tokens['alice']}"}
    try:
        async with httpx.AsyncClient(base_url=small.gateway_url, headers=headers) as http:
            created = await client.ack("create_session", data={"content": script({"content": "slow", "delay_ms": 3000})})
            session_id = created["sessionId"]
            await client.wait_phase(session_id, ("RUNNING",))
            busy = await http.post(f"/v1/sessions/{session_id}/compact")
            assert busy.status_code == 409 and busy.json()["error"]["code"] == "conflict"
            await client.wait_phase(session_id)
            for i in range(2):
                await client.ack("send_message", session_id, {"content": f"more {i}"})
                await client.wait_phase(session_id, ("COMPLETED",), count=i + 2)
            accepted = await http.post(f"/v1/sessions/{session_id}/compact")
            assert accepted.status_code == 202, accepted.text
            await client.wait_for(lambda: bool(compactions(client, session_id)), timeout=20)
            (done,) = compactions(client, session_id)
            assert done["messagesCompacted"] == 4  # both earlier turns; the latest stays whole
            missing = await http.post("/v1/sessions/00000000-0000-0000-0000-000000000000/compact")
            assert missing.status_code == 404
            other = await http.post(f"/v1/sessions/{session_id}/compact",
                                    headers={"Authorization": f"Bearer {small.tokens['bob']}"})
            assert other.status_code == 404
    finally:
        await client.close()
