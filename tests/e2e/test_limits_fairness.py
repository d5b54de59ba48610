"""One user's flood does not slow another user (issue 38, item 1; DESIGN §7, ADR 0041).

On a private cluster with the shipped per-user limits, dave runs turns one after another:
unloaded, then while carol floods (several sockets, each sending `create_session` at a
steady pace far over her message rate and her running quota, ignoring every `retryAfterMs`),
then unloaded again, twice over (unloaded and flooded blocks alternate, so that a machine
whose speed drifts during the test weighs on both alike). Each flood is measured from the
moment carol's bucket is empty (her first `rate_limited`), so what she still gets through is
what her limits let through. Dave's median turn latency under the floods stays within 1.5x
of his unloaded median (every unloaded block together), and none of his turns is refused.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from .conftest import Launch, Launcher
from .wsclient import Client, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(300)]

USERS = {"carol": "tok-carol", "dave": "tok-dave"}
TURNS = 12  # dave's turns per block; medians over the blocks
FLOODS = 2  # flooded blocks, each between two unloaded ones
DAVE_EVERY_S = 0.4  # dave starts a turn this often (or when the previous one ends, if later)
FLOOD_SOCKETS = 4
FLOOD_PER_SOCKET_S = 10.0  # frames a second on each socket: 40/s, 20x the default rate of 2/s
RATIO = 1.5


@pytest.fixture(scope="module")
def shipped(launch: Launch) -> Iterator[Launcher]:
    """The shipped limits (MUSTER_USER_* unset), not the suite's `0` (off)."""
    cluster = launch(
        MUSTER_TOKENS=",".join(f"{token}={user}" for user, token in USERS.items()),
        MUSTER_USER_MAX_RUNNING="10",
        MUSTER_USER_MAX_SOCKETS="32",
        MUSTER_USER_MESSAGES_PER_MINUTE="120",
    )
    yield cluster
    cluster.stop()


def dave_script(label: str) -> str:
    """A turn with a tool call: two model steps, a file written in between."""
    return script(
        {"tool_calls": [call("write_file", path=f"{label}.txt", content="dave\n")]}, {"content": f"{label} done"}
    )


async def dave_turns(dave: Client, label: str) -> list[float]:
    """TURNS turns, one at a time, paced: seconds from create_session to COMPLETED."""
    seconds = []
    begun = time.perf_counter()
    for n in range(TURNS):
        # pacing dave's workload over the flood, not waiting for anything
        await asyncio.sleep(max(0.0, begun + n * DAVE_EVERY_S - time.perf_counter()))
        started = time.perf_counter()
        reply = await dave.request("create_session", data={"content": dave_script(f"{label}-{n}")})
        assert reply["type"] == "ack", f"dave's turn refused: {reply}"
        session_id = str(reply["data"]["sessionId"])
        assert await dave.wait_phase(session_id) == "COMPLETED"
        seconds.append(time.perf_counter() - started)
    return seconds


class Flood:
    def __init__(self, sockets: list[Client]) -> None:
        self.sockets = sockets
        self.replies: Counter[str] = Counter()
        self.empty = asyncio.Event()  # carol's bucket ran dry
        self.stopping = asyncio.Event()

    async def one_socket(self, client: Client) -> None:
        started, n = time.perf_counter(), 0
        while not self.stopping.is_set():
            data = {"content": script({"content": "flood"})}
            reply = await client.request("create_session", data=data)
            outcome = "ack" if reply["type"] == "ack" else str(reply["data"]["code"])
            self.replies[outcome] += 1
            if outcome == "rate_limited":
                self.empty.set()
            n += 1
            # pacing the flood, not waiting for anything
            await asyncio.sleep(max(0.0, started + n / FLOOD_PER_SOCKET_S - time.perf_counter()))

    def start(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self.one_socket(c)) for c in self.sockets]


async def flooded_turns(dave: Client, carol: list[Client]) -> tuple[list[float], Counter[str]]:
    """Dave's turns while carol floods, from her first `rate_limited` on; her replies meanwhile."""
    flood = Flood(carol)
    tasks = flood.start()
    try:
        await asyncio.wait_for(flood.empty.wait(), 120)
        at_start = Counter(flood.replies)
        loaded = await dave_turns(dave, "flooded")
        during = Counter(flood.replies)
        during.subtract(at_start)
    finally:
        flood.stopping.set()
        await asyncio.gather(*tasks)
    return loaded, during


async def test_one_users_flood_keeps_another_users_latency_within_one_and_a_half(shipped: Launcher) -> None:
    dave = await Client.connect(shipped.ws_url, USERS["dave"])
    carol = [await Client.connect(shipped.ws_url, USERS["carol"]) for _ in range(FLOOD_SOCKETS)]
    before: list[float] = []
    loaded: list[float] = []
    during: Counter[str] = Counter()
    try:
        await dave_turns(dave, "warm-up")
        for _ in range(FLOODS):
            before += await dave_turns(dave, "unloaded")
            turns, replies = await flooded_turns(dave, carol)
            loaded += turns
            during.update(replies)
        before += await dave_turns(dave, "unloaded again")
    finally:
        await dave.close()
        for client in carol:
            await client.close()
    unloaded = statistics.median(before)
    flooded = statistics.median(loaded)
    figures = (
        f"dave's median turn {1000 * unloaded:.0f} ms unloaded, {1000 * flooded:.0f} ms under the flood "
        f"({flooded / unloaded:.2f}x); carol's replies during it {dict(during)}"
    )
    print(figures)
    # It was a flood: far more refused than admitted, over the whole of dave's turns.
    assert during["rate_limited"] + during["quota_exceeded"] > 5 * during["ack"], figures
    offered = FLOOD_SOCKETS * FLOOD_PER_SOCKET_S * FLOODS * TURNS * DAVE_EVERY_S
    assert sum(during.values()) >= offered / 2, figures
    assert flooded <= RATIO * unloaded, figures
