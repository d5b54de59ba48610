"""Step cost: one more model step in a 2,000-message session vs a 10-message one.

Over the public WebSocket API only. A scripted turn of S steps of L `list_files` calls adds
S(L+1)+2 messages (USER, then per step an ASSISTANT and L TOOL messages, then the answer).
The big session is built with turns of up to 45 steps (agents stop at 50 rounds a turn) of
9 calls each — the history is what matters, and ten messages a step keep the build (whose
every step reads the whole history so far) within a minute. Then a measured turn of
`--steps` list_files steps runs in the big session and, as often, in fresh 10-message
sessions. A step's cost is the time between two consecutive ASSISTANT messages, taken from
the events' `time` stamps (the gateway delivers in batches, so arrival times would blur it):
a tool call, then the next model step over the whole history. The ratio big/small says how
a step's cost grows with the history; `turn_ms` (send to COMPLETED) is reported beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import time
from datetime import datetime
from typing import Any

import websockets

from bench.cluster import BenchCluster

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
MAX_STEPS_PER_TURN = 45
BUILD_CALLS_PER_STEP = 9


def script(tool_steps: int, tag: str, calls: int = 1) -> str:
    step = {"tool_calls": [{"name": "list_files", "arguments": {}}] * calls}
    return "#script " + json.dumps({"steps": [step] * tool_steps + [{"content": f"{tag} done"}]})


class Session:
    """One session driven turn by turn on its own socket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.session_id: str | None = None
        self.message_ids: set[str] = set()
        self.turns = 0

    async def turn(self, content: str) -> tuple[float, list[float]]:
        """Run one turn; returns its wall ms and the event times (s) of its ASSISTANT messages."""
        self.turns += 1
        tag = f"t{self.turns}"
        if self.session_id is None:
            frame: dict[str, Any] = {"type": "create_session", "id": tag, "data": {"content": content}}
        else:
            frame = {
                "type": "send_message",
                "id": tag,
                "sessionId": self.session_id,
                "data": {"content": content},
            }
        started = time.perf_counter()
        await self.ws.send(json.dumps(frame))
        assistant_at: list[float] = []
        async for raw in self.ws:
            msg = json.loads(raw)
            if msg.get("id") == tag:
                if msg["type"] != "ack":
                    raise RuntimeError(msg)
                self.session_id = self.session_id or msg["data"]["sessionId"]
            elif msg.get("sessionId") != self.session_id:
                continue
            elif msg["type"] == "message":
                self.message_ids.add(msg["data"]["messageId"])
                if msg["data"]["role"] == "ASSISTANT":
                    assistant_at.append(datetime.fromisoformat(msg["time"]).timestamp())
            elif msg["type"] == "session_status" and msg["data"]["phase"] in TERMINAL:
                if msg["data"]["phase"] != "COMPLETED":
                    raise RuntimeError(f"turn ended {msg['data']['phase']}")
                return (time.perf_counter() - started) * 1000, assistant_at
        raise RuntimeError("socket closed")

    async def measure(self, steps: int) -> dict[str, float]:
        turn_ms, at = await self.turn(script(steps, "measure"))
        gaps = [(b - a) * 1000 for a, b in itertools.pairwise(at)]
        return {"turn_ms": turn_ms, "step_ms": statistics.median(gaps) if gaps else turn_ms / (steps + 1)}


async def grow(session: Session, messages: int) -> None:
    """Add build turns until the session holds about `messages` messages."""
    while len(session.message_ids) + 4 <= messages:
        room = messages - len(session.message_ids) - 2
        calls = BUILD_CALLS_PER_STEP if room >= BUILD_CALLS_PER_STEP + 1 else 1
        steps = max(1, min(MAX_STEPS_PER_TURN, room // (calls + 1)))
        await session.turn(script(steps, "build", calls))


def summary(samples: list[dict[str, float]], messages: int) -> dict[str, Any]:
    return {
        "messages": messages,
        "step_ms": round(statistics.median(s["step_ms"] for s in samples), 2),
        "turn_ms": round(statistics.median(s["turn_ms"] for s in samples), 1),
    }


async def measure(
    cluster: BenchCluster, messages: int = 2000, steps: int = 10, repeats: int = 3
) -> dict[str, Any]:
    url = f"{cluster.ws_url}?token={cluster.token}"
    async with websockets.connect(url, max_size=None) as big_ws:
        big = Session(big_ws)
        started = time.perf_counter()
        await grow(big, messages)
        build_s = time.perf_counter() - started
        big_messages = len(big.message_ids)
        big_samples = [await big.measure(steps) for _ in range(repeats)]
    small_samples = []
    small_messages = 0
    for _ in range(repeats):
        async with websockets.connect(url, max_size=None) as ws:
            small = Session(ws)
            await small.turn(script(4, "small"))  # USER + 4 x (ASSISTANT, TOOL) + answer = 10
            small_messages = len(small.message_ids)
            small_samples.append(await small.measure(steps))
    big_s, small_s = summary(big_samples, big_messages), summary(small_samples, small_messages)
    return {
        "steps_per_measured_turn": steps,
        "repeats": repeats,
        "build_s": round(build_s, 2),
        "big": big_s,
        "small": small_s,
        "step_ratio": round(big_s["step_ms"] / small_s["step_ms"], 2),
        "turn_ratio": round(big_s["turn_ms"] / small_s["turn_ms"], 2),
    }


def line(result: dict[str, Any]) -> str:
    big, small = result["big"], result["small"]
    return (
        f"step cost: {big['step_ms']:.1f} ms per model step at {big['messages']} messages vs "
        f"{small['step_ms']:.1f} ms at {small['messages']} -> x{result['step_ratio']:.2f} "
        f"(whole {result['steps_per_measured_turn']}-step turn x{result['turn_ratio']:.2f}; "
        f"building the big session took {result['build_s']:.0f} s)"
    )


async def main(args: argparse.Namespace) -> None:
    with BenchCluster() as cluster:
        result = await measure(cluster, args.messages, args.steps, args.repeats)
    print(line(result))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=2000, help="history length of the big session")
    parser.add_argument("--steps", type=int, default=10, help="list_files steps per measured turn")
    parser.add_argument("--repeats", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
