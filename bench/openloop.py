"""Open-loop offered load: turns started at a fixed rate whatever the cluster answers, over a
few WebSockets, each turn recorded as admitted (with its latency to COMPLETED) or refused
(with the error code and `retryAfterMs`). A refused turn is not retried: the bench counts
what the cluster sheds, not what a client would eventually get through.

The turns are `bench.workload`'s fan-out parents (K `coder` children, one write_file each).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import websockets

from bench.workload import TERMINAL, parent_script

ACK_TIMEOUT_S = 30.0


@dataclass
class Turn:
    label: str
    phase: str  # the bench phase it was offered in: burst, settle
    sent_at: float
    outcome: str = "pending"  # admitted | refused | error
    code: str | None = None
    retry_after_ms: int | None = None
    session_id: str | None = None
    acked_at: float | None = None  # the gateway's answer (ack or refusal) arrived
    done_at: float | None = None
    end_phase: str | None = None  # the session's terminal phase

    @property
    def latency_ms(self) -> float | None:
        return None if self.done_at is None else (self.done_at - self.sent_at) * 1000

    @property
    def answer_ms(self) -> float | None:
        """From the offer to the gateway's answer: the admission's share of the latency."""
        return None if self.acked_at is None else (self.acked_at - self.sent_at) * 1000


class Socket:
    """One WebSocket with a reader dispatching replies by id and terminal phases by session."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.ends: dict[str, asyncio.Future[tuple[str, float]]] = {}
        self.early: dict[str, tuple[str, float]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = json.loads(raw)
            reply = self.replies.pop(str(frame.get("id")), None)
            if reply is not None:
                if not reply.done():
                    reply.set_result(frame)
            elif frame.get("type") == "session_status" and frame["data"].get("phase") in TERMINAL:
                end = (str(frame["data"]["phase"]), time.perf_counter())
                waiter = self.ends.pop(str(frame.get("sessionId")), None)
                if waiter is None:
                    self.early[str(frame.get("sessionId"))] = end
                elif not waiter.done():
                    waiter.set_result(end)

    async def turn(self, turn: Turn, k: int, end_timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        reply_f: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.replies[turn.label] = reply_f
        data = {"content": parent_script(k, turn.label), "title": turn.label}
        try:
            await self.ws.send(json.dumps({"type": "create_session", "id": turn.label, "data": data}))
            reply = await asyncio.wait_for(reply_f, ACK_TIMEOUT_S)
            turn.acked_at = time.perf_counter()
        except (TimeoutError, websockets.ConnectionClosed) as exc:
            turn.outcome, turn.code = "error", type(exc).__name__
            return
        if reply["type"] != "ack":
            error = reply.get("data") or {}
            turn.outcome, turn.code = "refused", str(error.get("code"))
            turn.retry_after_ms = error.get("retryAfterMs")
            return
        turn.outcome, turn.session_id = "admitted", str(reply["data"]["sessionId"])
        end_f: asyncio.Future[tuple[str, float]] = loop.create_future()
        if turn.session_id in self.early:
            end_f.set_result(self.early.pop(turn.session_id))
        else:
            self.ends[turn.session_id] = end_f
        try:
            turn.end_phase, turn.done_at = await asyncio.wait_for(end_f, end_timeout_s)
        except TimeoutError:
            turn.end_phase = None

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()


async def connect(ws_url: str, token: str, count: int) -> list[Socket]:
    sockets = []
    for _ in range(count):
        ws = await websockets.connect(f"{ws_url}?token={token}", max_size=None)
        sockets.append(Socket(ws))
    return sockets


async def offer(
    sockets: list[Socket],
    phase: str,
    rate: float,
    seconds: float,
    k: int,
    turns: list[Turn],
    tasks: list[asyncio.Task[None]],
    end_timeout_s: float = 600.0,
) -> float:
    """Start `rate` turns a second for `seconds`; returns when the last one is sent (its
    perf_counter instant). The turns' tasks are appended to `tasks`."""
    started = time.perf_counter()
    n = 0
    while (at := n / rate) < seconds:
        await asyncio.sleep(max(0.0, started + at - time.perf_counter()))
        turn = Turn(f"{phase}-{n}-{int(started)}", phase, time.perf_counter())
        turns.append(turn)
        tasks.append(asyncio.create_task(sockets[n % len(sockets)].turn(turn, k, end_timeout_s)))
        n += 1
    return time.perf_counter()
