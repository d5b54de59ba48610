"""Streamed answers (issue 37, ADR 0039): how soon a piece reaches the client, and what
streaming costs.

    .venv/bin/python -m bench.streaming [--n 160] [--latency-turns 60]

- **First-piece latency at C=1**: the time from the model's first piece (the scripted
  model's first piece of a `"stream"` step; the loop stamps it `at` on the `muster.deltas`
  record) to the first `assistant_delta` on the client's socket. The bench reads the stamp
  from its own consumer of `muster.deltas`; both clocks are this machine's.
- **Throughput at C=16** with and without streaming, in the same run, alternating passes:
  the same 40-character answer given whole after 45 ms (`plain`); streamed in 10 pieces
  5 ms apart (`streamed`: ten timers instead of one, which a loaded event loop overshoots
  ten times); and the 10 pieces at once after the same 45 ms (`burst`: the model's timing
  of `plain`, so the difference is the cost of publishing and forwarding the pieces).
  These one-step turns cost about 10 ms of CPU each: the worst case for streaming's share.
- **The same at C=16 on `make bench`'s workload** (`--fanout-rounds`): the K=4 fan-out turn
  with every answer (the parent's and each child's) the 40 characters, whole (`plain`) or
  in 10 pieces given at once (`streamed`), alternating passes, each on a fresh cluster:
  what streaming costs a delegating turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import websockets
from aiokafka import AIOKafkaConsumer

from bench.cluster import ROOT, BenchCluster
from bench.cpu import snapshot, window
from bench.workload import TERMINAL, percentile, workload

ANSWER = "Streaming answers arrive piece by piece.."  # 40 characters
CHUNK, PIECE_MS = 4, 5
PIECES = len(ANSWER) // CHUNK


def streamed_script(delay_ms: int, before_ms: int = 0) -> str:
    step = {"content": ANSWER, "delay_ms": before_ms, "stream": {"chunk": CHUNK, "delay_ms": delay_ms}}
    return "#script " + json.dumps({"steps": [step]})


def plain_script() -> str:
    return "#script " + json.dumps({"steps": [{"content": ANSWER, "delay_ms": (PIECES - 1) * PIECE_MS}]})


async def one_turn(
    ws: Any, content: str, tag: str, first_delta: dict[str, float] | None = None, frames: list[int] | None = None
) -> float:
    """One turn on a fresh session; returns ms from create_session to COMPLETED. With
    `first_delta`, records the receive time of each message's first piece; with `frames`,
    counts the frames the turn brought (`[all, assistant_delta]`)."""
    started = time.perf_counter()
    await ws.send(json.dumps({"type": "create_session", "id": tag, "data": {"content": content}}))
    session_id = None
    async for raw in ws:
        received = time.time()
        frame = json.loads(raw)
        kind = frame.get("type")
        if frames is not None:
            frames[0] += 1
            frames[1] += kind == "assistant_delta"
        if kind == "assistant_delta" and first_delta is not None:
            data = frame["data"]
            if data["index"] == 0:
                first_delta.setdefault(data["messageId"], received)
        elif frame.get("id") == tag:
            if kind != "ack":
                raise RuntimeError(frame)
            session_id = frame["data"]["sessionId"]
        elif kind == "session_status" and frame.get("sessionId") == session_id:
            phase = frame["data"]["phase"]
            if phase in TERMINAL:
                if phase != "COMPLETED":
                    raise RuntimeError(f"turn ended {phase}")
                return (time.perf_counter() - started) * 1000
    raise RuntimeError("socket closed")


async def stamps(bootstrap: str, found: dict[str, float], stop: asyncio.Event, grew: asyncio.Event) -> None:
    """The model's time of each message's first piece, from `muster.deltas`."""
    consumer = AIOKafkaConsumer(
        "muster.deltas",
        bootstrap_servers=bootstrap,
        group_id=f"bench-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=5,
    )
    await consumer.start()
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=50)
            for records in batches.values():
                for record in records:
                    body = json.loads(record.value or b"{}")
                    if body.get("index") == 0 and isinstance(body.get("at"), float):
                        found.setdefault(body["messageId"], body["at"])
                        grew.set()
    finally:
        await consumer.stop()


async def first_piece_latency(cluster: BenchCluster, turns: int) -> dict[str, Any]:
    model_at: dict[str, float] = {}
    client_at: dict[str, float] = {}
    stop, grew = asyncio.Event(), asyncio.Event()
    reader = asyncio.create_task(stamps(cluster.ready["kafka"], model_at, stop, grew))
    async with websockets.connect(f"{cluster.ws_url}?token={cluster.token}", max_size=None) as ws:
        for i in range(turns + 5):  # the first five warm up
            seen: dict[str, float] = {}
            await one_turn(ws, streamed_script(20), f"lat-{i}", seen)
            if i >= 5:
                client_at.update(seen)
    deadline = time.monotonic() + 10
    while not set(client_at) <= set(model_at) and time.monotonic() < deadline:
        grew.clear()
        try:
            await asyncio.wait_for(grew.wait(), max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            break
    stop.set()
    await reader
    ms = [(client_at[m] - model_at[m]) * 1000 for m in client_at if m in model_at]
    return {
        "turns": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "max_ms": round(max(ms), 2),
    }


async def throughput(
    cluster: BenchCluster, n: int, c: int, content: str, label: str, cpu: list[dict[str, float]] | None = None
) -> float:
    """Turns per second; with `cpu`, the cluster's CPU ms per turn by role appended to it
    (steadier than throughput on a shared machine), and the frames per turn."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    frames = [0, 0]
    for i in range(n):
        queue.put_nowait(i)

    async def client() -> None:
        async with websockets.connect(f"{cluster.ws_url}?token={cluster.token}", max_size=None) as ws:
            while not queue.empty():
                i = queue.get_nowait()
                await one_turn(ws, content, f"{label}-{i}", frames=frames)

    before = snapshot(cluster)
    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(c)))
    elapsed = time.perf_counter() - started
    if cpu is not None:
        w = window(before, snapshot(cluster))
        cpu.append(
            {role: 1000 * s / n for role, s in w.cpu_s.items()}
            | {"total": 1000 * w.total_cpu_s / n, "frames": frames[0] / n, "delta_frames": frames[1] / n}
        )
    return n / elapsed


async def run(n: int, latency_turns: int, rounds: int, fanout_rounds: int) -> dict[str, Any]:
    fanout = await fanout_cost(200, 4, fanout_rounds) if fanout_rounds else {}
    with BenchCluster() as cluster:
        latency = await first_piece_latency(cluster, latency_turns) if latency_turns else {}
        if not rounds:
            return {"first_piece_to_client_c1": latency, "fanout_c16": fanout}
        await throughput(cluster, 32, 16, plain_script(), "warm")
        arms = {
            "plain": plain_script(),
            "streamed": streamed_script(PIECE_MS),
            "burst": streamed_script(0, (PIECES - 1) * PIECE_MS),
        }
        passes: dict[str, list[float]] = {arm: [] for arm in arms}
        cpu: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
        for r in range(rounds):
            # Every other round backwards, so a machine growing busier or idler meanwhile
            # weighs on no arm more than another.
            for arm in list(arms)[:: 1 if r % 2 == 0 else -1]:
                passes[arm].append(await throughput(cluster, n, 16, arms[arm], f"{arm}{r}", cpu[arm]))
    medians = {arm: statistics.median(values) for arm, values in passes.items()}
    medians_of = {
        arm: {key: round(statistics.median(p[key] for p in per), 2) for key in per[0]} for arm, per in cpu.items()
    }
    counts = ("frames", "delta_frames")
    cpu_ms = {arm: {k: v for k, v in m.items() if k not in counts} for arm, m in medians_of.items()}
    plain = medians["plain"]
    return {
        "first_piece_to_client_c1": latency,
        "fanout_c16": fanout,
        "throughput_c16": {
            "turns": n,
            "rounds": rounds,
            **{f"{arm}_turns_per_s": [round(x, 2) for x in values] for arm, values in passes.items()},
            **{f"median_{arm}": round(m, 2) for arm, m in medians.items()},
            "streamed_cost_pct": round((plain - medians["streamed"]) / plain * 100, 1),
            "burst_cost_pct": round((plain - medians["burst"]) / plain * 100, 1),
            "cpu_ms_per_turn_median": cpu_ms,
            "frames_per_turn_median": {arm: {k: m[k] for k in counts} for arm, m in medians_of.items()},
            "cpu_cost_pct": {
                arm: round((cpu_ms[arm]["total"] - cpu_ms["plain"]["total"]) / cpu_ms["plain"]["total"] * 100, 1)
                for arm in ("streamed", "burst")
            },
            # Each round's arms against its own plain pass, then the median over rounds: on a
            # shared machine steadier than the ratio of medians.
            "paired_cost_pct": {
                arm: {
                    "throughput": _median_pct([(p - a) / p for p, a in zip(passes["plain"], passes[arm], strict=True)]),
                    "cpu": _median_pct(
                        [(a["total"] - p["total"]) / p["total"] for p, a in zip(cpu["plain"], cpu[arm], strict=True)]
                    ),
                }
                for arm in ("streamed", "burst")
            },
        },
    }


async def fanout_cost(n: int, k: int, rounds: int) -> dict[str, Any]:
    """`make bench`'s workload at C=16, every answer whole or streamed, alternating passes,
    each on a fresh cluster as `make bench` runs it: on one cluster the local broker's cost
    grows with its log (ADR 0026), so whichever arm ran second in a round paid for it."""
    arms: dict[str, dict[str, Any]] = {
        "plain": {"content": ANSWER},
        "streamed": {"content": ANSWER, "stream": {"chunk": CHUNK, "delay_ms": 0}},
    }
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for r in range(rounds):
        for arm in list(arms)[:: 1 if r % 2 == 0 else -1]:
            with BenchCluster() as cluster:
                await workload(cluster, 32, k, 16, f"fanout-warm-{arm}{r}", arms[arm])
                runs[arm].append(await workload(cluster, n, k, 16, f"fanout-{arm}{r}", arms[arm]))
    tps = {arm: [x["turns_per_s"] for x in per] for arm, per in runs.items()}
    cpu = {arm: [x["cpu_ms_per_turn_total"] for x in per] for arm, per in runs.items()}
    return {
        "turns": n,
        "k": k,
        "rounds": rounds,
        "fresh_cluster_per_pass": True,
        **{f"{arm}_turns_per_s": values for arm, values in tps.items()},
        **{f"{arm}_cpu_ms_per_turn": values for arm, values in cpu.items()},
        "throughput_cost_pct": _median_pct(
            [(p - a) / p for p, a in zip(tps["plain"], tps["streamed"], strict=True)]
        ),
        "cpu_cost_pct": _median_pct([(a - p) / p for p, a in zip(cpu["plain"], cpu["streamed"], strict=True)]),
    }


def _median_pct(ratios: list[float]) -> float:
    return round(statistics.median(ratios) * 100, 1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=160, help="turns per throughput pass (C=16)")
    parser.add_argument("--latency-turns", type=int, default=60, help="turns measured at C=1")
    parser.add_argument("--rounds", type=int, default=3, help="alternating passes of each kind")
    parser.add_argument(
        "--fanout-rounds", type=int, default=4, help="alternating passes of the fan-out workload (0: none)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results", help="where the JSON report goes")
    args = parser.parse_args()
    result = asyncio.run(run(args.n, args.latency_turns, args.rounds, args.fanout_rounds))
    result["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(result, indent=2))
    summary(result)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"streaming-{int(time.time())}.json"
    path.write_text(json.dumps(result, indent=2))
    # Not "wrote …": the peers' script takes the last such line of `make bench` as the
    # fan-out report.
    print(f"report: {path}")


def summary(result: dict[str, Any]) -> None:
    """The acceptance's figures (issue 37) in two lines."""
    first, fanout = result["first_piece_to_client_c1"], result["fanout_c16"]
    if first:
        print(f"first piece to the client, C=1: p50 {first['p50_ms']} ms, p99 {first['p99_ms']} ms (<= 15 / 50)")
    if fanout:
        print(
            f"streaming's cost on the fan-out turn, C=16, median of {fanout['rounds']} paired rounds: "
            f"{fanout['throughput_cost_pct']} % of throughput, {fanout['cpu_cost_pct']} % CPU (<= 5 %)"
        )


if __name__ == "__main__":
    main()
