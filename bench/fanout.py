"""`make bench`: the K-way fan-out workload against a real local cluster.

N parent sessions; each parent turn delegates K children in one step and answers once they
deliver; each child makes one write_file call and answers (scripted model, no delay).
C parents are in flight at once. Reported next to the raw floors measured in the same run
(Kafka round trip, PostgreSQL commit), so overhead reads as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import websockets

from bench.cluster import ROOT, BenchCluster
from bench.floors import kafka_round_trip_ms, p50, postgres_commit_ms


def child_script(tag: str, i: int) -> str:
    step = {"tool_calls": [{"name": "write_file", "arguments": {"path": f"{tag}/c{i}.txt", "content": "x"}}]}
    return "#script " + json.dumps({"steps": [step, {"content": f"child {i} done"}]})


def parent_script(k: int, tag: str) -> str:
    calls = [
        {"name": "delegate", "arguments": {"agent_type": "coder", "task": child_script(tag, i)}}
        for i in range(k)
    ]
    return "#script " + json.dumps({"steps": [{"tool_calls": calls}, {"content": "parent done"}]})


async def one_turn(ws: Any, k: int, tag: str) -> float:
    started = time.perf_counter()
    await ws.send(
        json.dumps({"type": "create_session", "id": tag, "data": {"content": parent_script(k, tag)}})
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
            if phase in ("COMPLETED", "FAILED", "CANCELLED"):
                if phase != "COMPLETED":
                    raise RuntimeError(f"turn ended {phase}")
                return (time.perf_counter() - started) * 1000
    raise RuntimeError("socket closed")


async def workload(cluster: BenchCluster, n: int, k: int, c: int, label: str) -> dict[str, Any]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    latencies: list[float] = []

    async def client() -> None:
        async with websockets.connect(f"{cluster.ws_url}?token={cluster.token}", max_size=None) as ws:
            while not queue.empty():
                i = queue.get_nowait()
                latencies.append(await one_turn(ws, k, f"{label}-{i}"))

    cpu_before = cluster.cpu_seconds()
    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(c)))
    wall = time.perf_counter() - started
    cpu_after = cluster.cpu_seconds()
    q = statistics.quantiles(latencies, n=100)
    return {
        "n": n,
        "k": k,
        "c": c,
        "wall_s": round(wall, 3),
        "turns_per_s": round(n / wall, 2),
        "children_per_s": round(n * k / wall, 2),
        "latency_ms": {"p50": round(p50(latencies), 1), "p95": round(q[94], 1), "p99": round(q[98], 1)},
        "cpu_s_per_turn": {
            role: round((cpu_after.get(role, 0) - cpu_before.get(role, 0)) / n, 4)
            for role in sorted(cpu_after)
        },
    }


def table(report: dict[str, Any]) -> str:
    floors = report["floors"]
    lines = [
        f"floors: kafka round trip p50 {floors['kafka_rtt_ms_p50']:.2f} ms, postgres commit p50 "
        f"{floors['pg_commit_ms_p50']:.2f} ms",
        f"{'C':>3} {'N':>5} {'K':>2} {'turns/s':>8} {'children/s':>10} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
        f" {'p50/kafka':>9} {'p50/pg':>7}",
    ]
    for run in report["runs"]:
        lat = run["latency_ms"]
        lines.append(
            f"{run['c']:>3} {run['n']:>5} {run['k']:>2} {run['turns_per_s']:>8} {run['children_per_s']:>10} "
            f"{lat['p50']:>8} {lat['p95']:>8} {lat['p99']:>8} {run['p50_over_kafka_rtt']:>9} {run['p50_over_pg_commit']:>7}"
        )
    lines.append(
        "CPU seconds per turn: "
        + "; ".join(
            f"C={run['c']}: " + ", ".join(f"{role} {sec}" for role, sec in run["cpu_s_per_turn"].items())
            for run in report["runs"]
        )
    )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    with BenchCluster() as cluster:
        print(f"cluster up: {cluster.ready['gateway']} (data {cluster.data_dir})", flush=True)
        await workload(cluster, max(4, args.c // 2), args.k, min(args.c, 4), "warmup")
        rtt = await kafka_round_trip_ms(cluster.ready["kafka"])
        commit = await postgres_commit_ms(cluster.ready["database"])
        floors = {"kafka_rtt_ms_p50": round(p50(rtt), 3), "pg_commit_ms_p50": round(p50(commit), 3)}
        runs = []
        for c in args.concurrency:
            print(f"running N={args.n} K={args.k} C={c} ...", flush=True)
            run = await workload(cluster, args.n, args.k, c, f"c{c}")
            run["p50_over_kafka_rtt"] = round(run["latency_ms"]["p50"] / floors["kafka_rtt_ms_p50"], 1)
            run["p50_over_pg_commit"] = round(run["latency_ms"]["p50"] / floors["pg_commit_ms_p50"], 1)
            runs.append(run)
    report = {
        "workload": "fanout",
        "floors": floors,
        "runs": runs,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(table(report))
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    path = out / f"fanout-{int(time.time())}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 1])
    parser.add_argument("--c", type=int, default=16, help="warm-up concurrency")
    asyncio.run(main(parser.parse_args()))
