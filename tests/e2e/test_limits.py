"""Per-user limits through a running cluster (DESIGN §7, ADR 0041), on a private cluster
with low limits: sockets over the limit refused with 429, messages over the rate refused
with `rate_limited`, running trees over the quota refused with `quota_exceeded`; cancel
always admitted, nothing already started affected, and another user's turn completes
while the first one is refused. And overload shedding, on another one: with the harness
frozen, turns pile up unstarted until new ones are refused with `overloaded`; cancel is
admitted, and once the harness runs again every admitted turn completes once; with the bound
on turns in flight, turns that run (slowly) are enough to shed new ones until they end; with
the live events' lag, a gateway reading them late sheds new turns until it reads live again."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from .conftest import TOKENS, Launch, Launcher
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e

USERS = {**TOKENS, "carol": "tok-carol", "dave": "tok-dave"}
MAX_RUNNING = 1
MAX_SOCKETS = 2
PER_MINUTE = 4  # one message back every 15 s: far longer than each test's own steps


@pytest.fixture(scope="module")
def limited(launch: Launch) -> Iterator[Launcher]:
    cluster = launch(
        MUSTER_TOKENS=",".join(f"{token}={user}" for user, token in USERS.items()),
        MUSTER_USER_MAX_RUNNING=str(MAX_RUNNING),
        MUSTER_USER_MAX_SOCKETS=str(MAX_SOCKETS),
        MUSTER_USER_MESSAGES_PER_MINUTE=str(PER_MINUTE),
    )
    yield cluster
    cluster.stop()


async def refused_handshake(cluster: Launcher, user: str) -> InvalidStatus | None:
    """The handshake's refusal, or None when the socket was accepted (and closed again)."""
    try:
        async with connect(f"{cluster.ws_url}?token={USERS[user]}", open_timeout=15):
            return None
    except InvalidStatus as refused:
        return refused


async def error_data(client: Client, type_: str, session_id: str | None = None,
                     data: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await client.request(type_, session_id, data)
    assert reply["type"] == "error", reply
    return dict(reply["data"])


async def test_sockets_over_the_limit_are_refused_with_429(limited: Launcher) -> None:
    held = [await Client.connect(limited.ws_url, USERS["alice"]) for _ in range(MAX_SOCKETS)]
    try:
        refused = await refused_handshake(limited, "alice")
        assert refused is not None, "a socket over the limit was accepted"
        assert refused.response.status_code == 429
        assert int(refused.response.headers["Retry-After"]) >= 1
        assert b"quota_exceeded" in refused.response.body
        # Another user is not counted against alice's sockets; alice's own still work.
        assert await refused_handshake(limited, "bob") is None
        assert all([(await c.request("ping"))["type"] == "pong" for c in held])
        # A closed socket frees its place (the gateway counts it closed when it sees the close).
        await held.pop().close()
        deadline = time.monotonic() + 15
        while await refused_handshake(limited, "alice") is not None:
            assert time.monotonic() < deadline, "a closed socket's place was never freed"
            await asyncio.sleep(0.1)  # polling for the condition
    finally:
        for client in held:
            await client.close()


async def test_running_trees_over_the_quota_are_refused_and_another_user_is_not(limited: Launcher) -> None:
    alice = await Client.connect(limited.ws_url, USERS["alice"])
    bob = await Client.connect(limited.ws_url, USERS["bob"])
    try:
        slow = await alice.ack("create_session", data={"content": script({"content": "slow", "delay_ms": 60_000})})
        running = slow["sessionId"]
        await alice.wait_phase(running, ("RUNNING",))
        refused = await error_data(alice, "create_session", data={"content": script({"content": "more"})})
        assert refused["code"] == "quota_exceeded" and refused["retryAfterMs"] > 0, refused
        # Another user's turn runs to its end meanwhile.
        done = await bob.run_turn(script({"content": "bob's turn"}))
        assert bob.phases(done)[-1] == "COMPLETED"
        # Nothing alice started is touched: her running session takes a queued message...
        queued = await alice.ack("send_message", running, {"content": "after this"})
        assert queued["queued"] is True
        assert alice.phases(running)[-1] == "RUNNING"
        # ...and cancel is always admitted; the tree it ends frees the quota.
        await alice.ack("cancel", running)
        await alice.wait_phase(running, ("CANCELLED",))
        admitted = await alice.ack("create_session", data={"content": script({"content": "now"})})
        await alice.wait_phase(admitted["sessionId"])
        assert alice.phases(admitted["sessionId"])[-1] == "COMPLETED"
    finally:
        await alice.close()
        await bob.close()


async def test_messages_over_the_rate_are_refused_with_retry_after(limited: Launcher) -> None:
    carol = await Client.connect(limited.ws_url, USERS["carol"])
    dave = await Client.connect(limited.ws_url, USERS["dave"])
    rest = Rest(limited.gateway_url, USERS["carol"])
    try:
        first = (await carol.ack("create_session", data={}))["sessionId"]
        admitted, refused = 1, None
        while refused is None and admitted < PER_MINUTE + 2:
            reply = await carol.request("create_session", data={})
            if reply["type"] == "ack":
                admitted += 1
            else:
                refused = dict(reply["data"])
        assert refused is not None, f"{admitted} messages admitted at {PER_MINUTE} a minute"
        assert admitted >= PER_MINUTE
        assert refused["code"] == "rate_limited" and 0 < refused["retryAfterMs"] <= 60_000 // PER_MINUTE
        # The socket stays open, cancel is admitted, and REST refuses work with 429.
        assert (await carol.request("ping"))["type"] == "pong"
        await carol.ack("cancel", first)
        response: httpx.Response = await rest.http.post(f"/v1/sessions/{first}/compact")
        assert response.status_code == 429, response.text
        assert int(response.headers["Retry-After"]) >= 1
        assert response.json()["error"]["code"] == "rate_limited"
        assert response.json()["error"]["retryAfterMs"] > 0
        # Another user is not slowed: dave's turn completes while carol is refused.
        done = await dave.run_turn(script({"content": "dave's turn"}))
        assert dave.phases(done)[-1] == "COMPLETED"
        still = await error_data(carol, "send_message", first, {"content": "again"})
        assert still["code"] == "rate_limited"
    finally:
        await rest.close()
        await carol.close()
        await dave.close()


async def admitted_again(client: Client) -> None:
    """Once the load is gone, a new turn is admitted (after `overloaded` refusals while the
    gateway's sample still shows it) and completes."""
    deadline = time.monotonic() + 30
    while (reply := await client.request("create_session", data={"content": script({"content": "y"})}))[
        "type"
    ] != "ack":
        assert reply["data"]["code"] == "overloaded" and time.monotonic() < deadline, reply
        await asyncio.sleep(0.2)  # polling for the condition
    assert await client.wait_phase(reply["data"]["sessionId"]) == "COMPLETED"


BACKLOG = 3


@pytest.fixture(scope="module")
def saturable(launch: Launch) -> Iterator[Launcher]:
    cluster = launch(MUSTER_OVERLOAD_BACKLOG=str(BACKLOG))
    yield cluster
    cluster.stop()


async def test_new_turns_are_shed_while_the_backlog_is_over_its_threshold(saturable: Launcher) -> None:
    alice = await Client.connect(saturable.ws_url, TOKENS["alice"])
    bob = await Client.connect(saturable.ws_url, TOKENS["bob"])
    frozen = saturable.signal_all("harness", signal.SIGSTOP)
    assert frozen
    try:
        waiting = [
            (alice, (await alice.ack("create_session", data={"content": script({"content": f"queued {n}"})}))[
                "sessionId"
            ])
            for n in range(BACKLOG)
        ]
        # The gateway samples the backlog ten times a second: refused once it has seen it.
        deadline = time.monotonic() + 15
        while (reply := await bob.request("create_session", data={"content": script({"content": "x"})}))[
            "type"
        ] == "ack":
            assert time.monotonic() < deadline, "new turns were still admitted over the backlog"
            waiting.append((bob, reply["data"]["sessionId"]))  # admitted before the sample: it runs too
            await asyncio.sleep(0.1)  # polling for the condition
        shed = dict(reply["data"])
        assert shed["code"] == "overloaded" and shed["retryAfterMs"] >= 1000, shed
        # The operator is told which threshold sheds (the first test on this cluster).
        await asyncio.to_thread(saturable.wait_line, "overload_shedding_started over=backlog ", 0, 1, 10)
        # Cancel is always admitted (and drops what it cancels from the backlog).
        cancelled = waiting.pop(0)[1]
        await alice.ack("cancel", cancelled)
        assert (await alice.request("ping"))["type"] == "pong"
    finally:
        saturable.signal_all("harness", signal.SIGCONT)
    # Every admitted turn completes, once; the cancelled one never ran.
    for client, sid in waiting:
        assert await client.wait_phase(sid, timeout=90) == "COMPLETED"
        assert client.phases(sid).count("COMPLETED") == 1
    assert "RUNNING" not in alice.phases(cancelled)
    await admitted_again(bob)  # drained
    await alice.close()
    await bob.close()


async def test_delegations_no_worker_has_started_count_in_the_backlog(saturable: Launcher) -> None:
    """With fan-out a turn starts at once and its children wait for a worker: those count."""
    alice = await Client.connect(saturable.ws_url, TOKENS["alice"])
    bob = await Client.connect(saturable.ws_url, TOKENS["bob"])
    frozen = saturable.signal_all("subagent-worker", signal.SIGSTOP)
    assert frozen
    parent = script({"tool_calls": [call("delegate", agent_type="coder", task=script({"content": "child"}))]},
                    {"content": "parent done"})
    try:
        # One turn, BACKLOG children: the turn itself is started (its harness runs it).
        calls = [call("delegate", agent_type="coder", task=script({"content": f"child {n}"})) for n in range(BACKLOG)]
        fanned = (await alice.ack(
            "create_session", data={"content": script({"tool_calls": calls}, {"content": "all done"})}
        ))["sessionId"]
        admitted: list[str] = []
        deadline = time.monotonic() + 20
        while (reply := await bob.request("create_session", data={"content": parent}))["type"] == "ack":
            assert time.monotonic() < deadline, "new turns were still admitted over the delegations' backlog"
            admitted.append(reply["data"]["sessionId"])  # admitted before the sample: it runs too
            await asyncio.sleep(0.1)  # polling for the condition
        assert reply["data"]["code"] == "overloaded", reply
        # Its turn started: the children are what wait.
        await alice.wait_for(lambda: alice.phases(fanned)[-1:] == ["RUNNING"], 15)
    finally:
        saturable.signal_all("subagent-worker", signal.SIGCONT)
    assert await alice.wait_phase(fanned, timeout=90) == "COMPLETED"
    for sid in admitted:
        assert await bob.wait_phase(sid, timeout=90) == "COMPLETED"
    await admitted_again(bob)  # drained
    await alice.close()
    await bob.close()


IN_FLIGHT = 4


@pytest.fixture(scope="module")
def bounded(launch: Launch) -> Iterator[Launcher]:
    """Only the bound on turns in flight: the backlog's thresholds stay off."""
    cluster = launch(MUSTER_OVERLOAD_RUNNING=str(IN_FLIGHT))
    yield cluster
    cluster.stop()


async def test_turns_under_way_count_against_the_bound_on_turns_in_flight(bounded: Launcher) -> None:
    """Nothing waits to start: the turns run (each in a 6-s model call), and as many as the
    bound are enough to shed new ones, which are admitted again once they end."""
    alice = await Client.connect(bounded.ws_url, TOKENS["alice"])
    bob = await Client.connect(bounded.ws_url, TOKENS["bob"])
    slow = script({"content": "slow", "delay_ms": 6000})
    running: list[str] = []
    deadline = time.monotonic() + 20
    while (reply := await alice.request("create_session", data={"content": slow}))["type"] == "ack":
        assert time.monotonic() < deadline, "new turns were still admitted past the bound"
        running.append(reply["data"]["sessionId"])
        await alice.wait_for(lambda sid=running[-1]: alice.phases(sid)[-1:] == ["RUNNING"], 15)
    assert reply["data"]["code"] == "overloaded" and reply["data"]["retryAfterMs"] >= 1000, reply
    # Each had started: turns under way are what count. (One fewer only if a sample read
    # while a turn was being admitted saw it started and counted it admitted too.)
    assert IN_FLIGHT - 1 <= len(running) <= IN_FLIGHT, running
    # Another user is refused alike while they run; the ones admitted are untouched.
    assert (await bob.request("create_session", data={"content": script({"content": "x"})}))["data"][
        "code"
    ] == "overloaded"
    for sid in running:
        assert await alice.wait_phase(sid, timeout=60) == "COMPLETED"
        assert alice.phases(sid).count("COMPLETED") == 1
    await admitted_again(bob)  # drained
    await alice.close()
    await bob.close()


EVENTS_LAG_MS = 1_000
FROZEN_S = 3.0


@pytest.fixture(scope="module")
def watched_lag(launch: Launch) -> Iterator[Launcher]:
    """Only the live consumer's lag sheds: the backlog's thresholds and the message rate are
    off (the turns admitted while the test polls wait behind the frozen harness)."""
    cluster = launch(
        MUSTER_OVERLOAD_EVENTS_LAG_MS=str(EVENTS_LAG_MS),
        MUSTER_OVERLOAD_BACKLOG="0",
        MUSTER_OVERLOAD_BACKLOG_AGE_MS="0",
        MUSTER_USER_MESSAGES_PER_MINUTE="0",
    )
    yield cluster
    cluster.stop()


async def test_new_turns_are_shed_while_the_gateways_live_events_lag(watched_lag: Launcher) -> None:
    """With the broker frozen, a new turn's records wait in the gateway's producer, stamped
    when they were sent; once the broker runs again (the harness still frozen, so nothing
    newer follows them) the gateway reads them seconds late: new turns are shed with that
    lag as the hint until it reads live again. The turn itself completes once."""
    alice = await Client.connect(watched_lag.ws_url, TOKENS["alice"])
    bob = await Client.connect(watched_lag.ws_url, TOKENS["bob"])
    broker = watched_lag.service_pid("broker")
    assert watched_lag.signal_all("harness", signal.SIGSTOP)
    try:
        os.kill(broker, signal.SIGSTOP)
        try:
            late = (await alice.ack("create_session", data={"content": script({"content": "late"})}))["sessionId"]
            await asyncio.sleep(FROZEN_S)  # the records' age when the broker answers again
        finally:
            os.kill(broker, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while (reply := await bob.request("create_session", data={"content": script({"content": "x"})}))[
            "type"
        ] == "ack":
            assert time.monotonic() < deadline, "new turns were still admitted while the live events lagged"
            await asyncio.sleep(0.05)  # polling for the condition
        shed = dict(reply["data"])
        assert shed["code"] == "overloaded" and shed["retryAfterMs"] >= EVENTS_LAG_MS, shed
        assert (await alice.request("ping"))["type"] == "pong"
    finally:
        watched_lag.signal_all("harness", signal.SIGCONT)
    assert await alice.wait_phase(late, timeout=60) == "COMPLETED"
    assert alice.phases(late).count("COMPLETED") == 1
    await admitted_again(bob)  # caught up
    await alice.close()
    await bob.close()
