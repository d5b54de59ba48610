"""The K-way fan-out workload: N parent turns, C in flight, one WebSocket per client.

Each parent turn delegates K `coder` children in one step and answers once they deliver; each
child makes one write_file call and answers (scripted model, no delays). Latency runs from
`create_session` to the parent's COMPLETED. `answer`, when given, replaces every answer's
step (the parent's and each child's): `bench.streaming` streams them all this way.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import websockets

from bench.cluster import BenchCluster
from bench.cpu import per_turn_ms, snapshot, window

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


Step = dict[str, Any]


def child_script(tag: str, i: int, answer: Step | None = None) -> str:
    step = {"tool_calls": [{"name": "write_file", "arguments": {"path": f"{tag}/c{i}.txt", "content": "x"}}]}
    return "#script " + json.dumps({"steps": [step, answer or {"content": f"child {i} done"}]})


def parent_script(k: int, tag: str, answer: Step | None = None) -> str:
    calls = [
        {"name": "delegate", "arguments": {"agent_type": "coder", "task": child_script(tag, i, answer)}}
        for i in range(k)
    ]
    return "#script " + json.dumps({"steps": [{"tool_calls": calls}, answer or {"content": "parent done"}]})


async def one_turn(ws: Any, k: int, tag: str, answer: Step | None = None) -> float:
    """The turn's latency in ms: `create_session` sent → the parent's `COMPLETED`."""
    return (await timed_turn(ws, k, tag, answer))[2]


async def timed_turn(ws: Any, k: int, tag: str, answer: Step | None = None) -> tuple[str, float, float]:
    """The parent's session id, the wall-clock time the turn was sent (s) and its latency (ms)."""
    sent_at, started = time.time(), time.perf_counter()
    await ws.send(
        json.dumps({"type": "create_session", "id": tag, "data": {"content": parent_script(k, tag, answer)}})
    )
    session_id = None
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("id") == tag:
            if frame["type"] != "ack":
                raise RuntimeError(frame)
            session_id = frame["data"]["sessionId"]
        elif frame.get("type") == "session_status" and frame.get("sessionId") == session_id:
            phase = frame["data"]["phase"]
            if phase in TERMINAL:
                if phase != "COMPLETED":
                    raise RuntimeError(f"turn ended {phase}")
                assert session_id is not None
                return session_id, sent_at, (time.perf_counter() - started) * 1000
    raise RuntimeError("socket closed")


def percentile(values: list[float], pct: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


async def workload(
    cluster: BenchCluster, n: int, k: int, c: int, label: str, answer: Step | None = None
) -> dict[str, Any]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    latencies: list[float] = []

    async def client() -> None:
        async with websockets.connect(f"{cluster.ws_url}?token={cluster.token}", max_size=None) as ws:
            while not queue.empty():
                i = queue.get_nowait()
                latencies.append(await one_turn(ws, k, f"{label}-{i}", answer))

    before = snapshot(cluster)
    await asyncio.gather(*(client() for _ in range(c)))
    w = window(before, snapshot(cluster))
    return {
        "n": n,
        "k": k,
        "c": c,
        "wall_s": round(w.wall_s, 3),
        "turns_per_s": round(n / w.wall_s, 2),
        "children_per_s": round(n * k / w.wall_s, 2),
        "latency_ms": {
            "p50": round(statistics.median(latencies), 1),
            "p95": round(percentile(latencies, 95), 1),
            "p99": round(percentile(latencies, 99), 1),
        },
        **per_turn_ms(w, n),
    }
