"""The bound on turns in flight follows the admitted turns' latency (issue 38, ADR 0041):
with a latency target and no configured bound, turns slower than the target lower the
gateway's bound to nine tenths of the turns that were in flight, and new turns past it are
shed with `overloaded`; every admitted turn completes once, and fast turns are admitted.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import pytest

from .conftest import TOKENS, Launch, Launcher
from .wsclient import Client, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

TARGET_MS = 500
SLOW = script({"content": "slow", "delay_ms": 3000})  # a model call six times the target:
# the first round is all in flight even on a slow machine
FIRST_ROUND = 5


@pytest.fixture(scope="module")
def targeted(launch: Launch) -> Iterator[Launcher]:
    """Only the latency target: no configured bound, the backlog's thresholds off."""
    cluster = launch(
        MUSTER_OVERLOAD_TURN_LATENCY_MS=str(TARGET_MS),
        MUSTER_OVERLOAD_BACKLOG="0",
        MUSTER_OVERLOAD_BACKLOG_AGE_MS="0",
    )
    yield cluster
    cluster.stop()


async def slow_turns(client: Client, most: int) -> tuple[list[str], dict[str, object] | None]:
    """Start slow turns, each running before the next, until one is refused or `most` are
    under way: the admitted ones, and the refusal."""
    started: list[str] = []
    while len(started) < most:
        reply = await client.request("create_session", data={"content": SLOW})
        if reply["type"] != "ack":
            return started, dict(reply["data"])
        started.append(reply["data"]["sessionId"])
        await client.wait_for(lambda sid=started[-1]: client.phases(sid)[-1:] == ["RUNNING"], 15)
    return started, None


async def test_turns_slower_than_the_target_lower_the_bound_on_turns_in_flight(targeted: Launcher) -> None:
    alice = await Client.connect(targeted.ws_url, TOKENS["alice"])
    bob = await Client.connect(targeted.ws_url, TOKENS["bob"])
    # No bound yet: five slow turns run at once.
    first, refused = await slow_turns(alice, FIRST_ROUND)
    assert refused is None, refused
    for sid in first:
        assert await alice.wait_phase(sid, timeout=60) == "COMPLETED"
    # Each took about 3 s against a 500-ms target: once a second has passed since they
    # were admitted, the next decision lowers the bound to 9/10 of the turns it saw in
    # flight then (4 or 5, as the decisions counted them): 3 or 4.
    await asyncio.sleep(1.0)  # the bound moves once a second: the window must have ended
    second, refused = await slow_turns(bob, FIRST_ROUND)
    assert refused is not None, "new turns were admitted as freely as before the slow ones"
    assert refused["code"] == "overloaded" and int(str(refused["retryAfterMs"])) >= 1000, refused
    assert 3 <= len(second) <= 4, second
    started = r"overload_shedding_started over=running .* bound=(\d+)"
    line = (await asyncio.to_thread(targeted.wait_line, started, 0, 1, 10))[0]
    bound = re.search(started, line)
    # refused at the bound (or one under it, if a read counted a turn just admitted twice)
    assert bound is not None and len(second) <= int(bound.group(1)) <= len(second) + 1, line
    # Every admitted turn completes once; with nothing in flight a fast turn is admitted.
    for client, sid in [(alice, s) for s in first] + [(bob, s) for s in second]:
        assert await client.wait_phase(sid, timeout=60) == "COMPLETED"
        assert client.phases(sid).count("COMPLETED") == 1
    deadline = time.monotonic() + 30
    while (reply := await bob.request("create_session", data={"content": script({"content": "x"})}))["type"] != "ack":
        assert time.monotonic() < deadline, f"new turns still refused with nothing in flight: {reply}"
        await asyncio.sleep(0.2)  # polling for the condition
    assert await bob.wait_phase(reply["data"]["sessionId"], timeout=30) == "COMPLETED"
    await alice.close()
    await bob.close()
