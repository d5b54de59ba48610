"""`make bench-overload`: what the cluster promises past saturation (issue 38, ADR 0041).

First a calibration: the saturation run (closed loop, C=16) on a cluster of its own with
shedding off; its p99 becomes the admitted turns' latency target, as a deployment would set
it from its own saturation. Then, on a fresh cluster with overload shedding on (per-user
limits off: one user offers everything; the thresholds the gateway's defaults, but the two
that are off by default: the bound on turns in flight at 1.25 times the saturation run's
concurrency, and the latency target, which moves that bound down when turns get slower):
idle CPU first; saturation, closed loop (`bench.workload`, C=16), its throughput X and p99;
then open loop (`bench.openloop`) at 3X for BURST_S, then 0.5X for SETTLE_S, nothing
retried. It reports admitted and refused turns, the admitted turns' p50/p99 against the p99
at saturation, the time from the burst's end until every turn admitted during it completed,
the cluster's CPU in 5-s windows after the load until it is back to idle, and, from the
database, admitted turns that did not complete exactly once and refused ones that left a
session behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg
from muster_runtime.process.settings import Settings

from bench.cluster import ROOT, BenchCluster
from bench.cpu import idle_cpu, snapshot, window
from bench.openloop import Turn, connect, offer
from bench.workload import percentile, workload

COMPLETED_ONCE = """
SELECT s.session_id::text AS id,
       (SELECT count(*) FROM events e WHERE e.stream_id = s.session_id::text
          AND e.type = 'SessionPhaseChanged' AND e.payload->>'phase' = 'COMPLETED') AS completed
  FROM sessions s WHERE s.session_id::text = ANY($1::text[])
"""
DUPLICATE_EXECUTIONS = """
SELECT count(*) FROM (SELECT 1 FROM executions
  GROUP BY parent_session_id, parent_tool_call_id HAVING count(*) > 1) d
"""


def latency(turns: list[Turn]) -> dict[str, float]:
    completed = [t for t in turns if t.end_phase == "COMPLETED"]
    values = [t.latency_ms for t in completed if t.latency_ms is not None]
    if not values:
        return {}
    answers = [t.answer_ms for t in completed if t.answer_ms is not None]
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p99": round(percentile(values, 99), 1),
        # The offer to the gateway's ack: what admission (and the driver's own loop) adds.
        "ack_p50": round(statistics.median(answers), 1),
        "ack_p99": round(percentile(answers, 99), 1),
    }


def by_window(turns: list[Turn], seconds: float = 10.0) -> list[dict[str, Any]]:
    """Admitted turns' latency by when they were offered, in `seconds` slices of the phase:
    whether the tail is the phase's start (before shedding engaged) or its steady state."""
    admitted = [t for t in turns if t.outcome == "admitted"]
    if not admitted:
        return []
    start = min(t.sent_at for t in turns)
    slices: dict[int, list[Turn]] = {}
    for t in admitted:
        slices.setdefault(int((t.sent_at - start) // seconds), []).append(t)
    return [{"from_s": i * seconds, **latency(slices[i])} for i in sorted(slices)]


def counts(turns: list[Turn]) -> dict[str, Any]:
    refused = [t for t in turns if t.outcome == "refused"]
    hints = [t.retry_after_ms for t in refused if t.retry_after_ms is not None]
    return {
        "offered": len(turns),
        "admitted": sum(t.outcome == "admitted" for t in turns),
        "refused": len(refused),
        "errors": sum(t.outcome == "error" for t in turns),
        "refused_by_code": {
            c: sum(t.code == c for t in refused) for c in sorted({str(t.code) for t in refused})
        },
        "retry_after_ms": {"min": min(hints), "max": max(hints)} if hints else {},
        "latency_ms": latency([t for t in turns if t.outcome == "admitted"]),
        "latency_by_offer_ms": by_window(turns),
    }


async def back_to_idle(cluster: BenchCluster, idle_pct: float, within_s: float) -> dict[str, Any]:
    """5-s windows of the cluster's CPU after the load until one is within max(5, 50 %) of a
    core-percent of the idle rate, or `within_s` passed."""
    limit = idle_pct + max(5.0, idle_pct / 2)
    started, windows, last = time.perf_counter(), [], {}
    while time.perf_counter() - started < within_s:
        before = snapshot(cluster)
        await asyncio.sleep(5)
        w = window(before, snapshot(cluster))
        windows.append(round(100 * w.total_cpu_s / w.wall_s, 1))
        # Who still works, when the cluster is slow to come back.
        last = {name: round(100 * cpu_s / w.wall_s, 1) for name, cpu_s in w.cpu_s.items()}
        if windows[-1] <= limit:
            return {
                "idle_after_s": round(time.perf_counter() - started, 1),
                "windows_pct": windows,
                "limit_pct": limit,
                "last_window_by_process_pct": last,
            }
    return {"idle_after_s": None, "windows_pct": windows, "limit_pct": limit, "last_window_by_process_pct": last}


async def exactly_once(cluster: BenchCluster, turns: list[Turn]) -> dict[str, Any]:
    admitted = [t.session_id for t in turns if t.outcome == "admitted" and t.session_id]
    refused = [t.label for t in turns if t.outcome == "refused"]
    conn = await asyncpg.connect(cluster.ready["database"])
    try:
        rows = {r["id"]: int(r["completed"]) for r in await conn.fetch(COMPLETED_ONCE, admitted)}
        leftovers = await conn.fetchval(
            "SELECT count(*) FROM sessions WHERE title = ANY($1::text[])", refused
        )
        duplicates = await conn.fetchval(DUPLICATE_EXECUTIONS)
    finally:
        await conn.close()
    return {
        "admitted_lost": sum(rows.get(sid, 0) == 0 for sid in admitted),
        "admitted_duplicated": sum(rows.get(sid, 0) > 1 for sid in admitted),
        "refused_with_a_session": int(leftovers),
        "duplicate_executions": int(duplicates),
    }


def thresholds(args: argparse.Namespace, turn_latency_ms: int) -> dict[str, str]:
    """Shedding on, at the gateway's defaults unless the command line says otherwise."""
    fields = Settings.model_fields
    return {
        "MUSTER_OVERLOAD_TURN_LATENCY_MS": str(turn_latency_ms),
        "MUSTER_OVERLOAD_BACKLOG": str(
            args.backlog if args.backlog is not None else fields["overload_backlog"].default
        ),
        "MUSTER_OVERLOAD_BACKLOG_AGE_MS": str(
            args.backlog_age_ms
            if args.backlog_age_ms is not None
            else fields["overload_backlog_age_ms"].default
        ),
        "MUSTER_OVERLOAD_POOL_WAIT_MS": str(
            args.pool_wait_ms if args.pool_wait_ms is not None else fields["overload_pool_wait_ms"].default
        ),
        # The bound on turns in flight is off by default (it depends on the deployment's
        # models); the bench sets it, as a deployment would, above what its own saturation
        # run holds: C turns in flight, and a quarter as many again (by Little's law an
        # admitted turn then waits about 1.25x what it does at saturation).
        "MUSTER_OVERLOAD_RUNNING": str(args.running if args.running is not None else args.c + args.c // 4),
        "MUSTER_OVERLOAD_EVENTS_LAG_MS": str(
            args.events_lag_ms
            if args.events_lag_ms is not None
            else fields["overload_events_lag_ms"].default
        ),
    }


async def calibrate(args: argparse.Namespace) -> dict[str, Any]:
    """The saturation run on a cluster of its own, shedding off: the latency target a
    deployment would set from it (its p99) before it measures anything under shedding."""
    with BenchCluster() as cluster:
        await workload(cluster, 40, args.k, 8, "warmup")
        return await workload(cluster, args.n // 2, args.k, args.c, "calibration")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    calibration = None
    target = args.turn_latency_ms
    if target is None:
        print(f"calibration: closed loop C={args.c} on a cluster of its own ...", flush=True)
        calibration = await calibrate(args)
        target = int(calibration["latency_ms"]["p99"])
        print(f"  p99 {target} ms: the admitted turns' latency target", flush=True)
    env = thresholds(args, target)
    with BenchCluster(env=env) as cluster:
        print(f"cluster up: {cluster.ready['gateway']} (data {cluster.data_dir})", flush=True)
        await workload(cluster, 40, args.k, 8, "warmup")
        idle = await idle_cpu(cluster, args.idle_s)
        print(
            f"idle: {idle['cpu_pct_total']} % of a core; saturation, closed loop C={args.c} ...", flush=True
        )
        saturation = await workload(cluster, args.n, args.k, args.c, "saturation")
        x = float(saturation["turns_per_s"])
        print(f"  X = {x} turns/s, p99 {saturation['latency_ms']['p99']} ms", flush=True)
        sockets = await connect(cluster.ws_url, cluster.token, args.sockets)
        turns: list[Turn] = []
        tasks: list[asyncio.Task[None]] = []
        print(f"burst: {3 * x:.1f} turns/s for {args.burst_s:g} s ...", flush=True)
        burst_end = await offer(sockets, "burst", 3 * x, args.burst_s, args.k, turns, tasks)
        print(f"settle: {0.5 * x:.1f} turns/s for {args.settle_s:g} s ...", flush=True)
        load_end = await offer(sockets, "settle", 0.5 * x, args.settle_s, args.k, turns, tasks)
        idle_after = await back_to_idle(cluster, float(idle["cpu_pct_total"]), args.idle_within_s)
        await asyncio.wait_for(asyncio.gather(*tasks), args.drain_timeout_s)
        for socket in sockets:
            await socket.close()
        burst = [t for t in turns if t.phase == "burst"]
        done = [t.done_at for t in burst if t.done_at is not None]
        result: dict[str, Any] = {
            "workload": {"name": "overload", "k": args.k, "c": args.c, "n": args.n},
            "thresholds": env,
            "calibration": calibration,
            "idle": idle,
            "saturation": saturation,
            "offered_turns_per_s": {"burst": round(3 * x, 2), "settle": round(0.5 * x, 2)},
            "burst_s": args.burst_s,
            "settle_s": args.settle_s,
            "burst": counts(burst),
            "settle": counts([t for t in turns if t.phase == "settle"]),
            "drain_s_after_burst": round(max(done) - burst_end, 1) if done else None,
            "cpu_after_load": {**idle_after, "seconds_after_burst": round(load_end - burst_end, 1)},
            "exactly_once": await exactly_once(cluster, turns),
        }
    p99_sat = float(saturation["latency_ms"]["p99"])
    p99_burst = result["burst"]["latency_ms"].get("p99")
    result["admitted_p99_over_saturation_p99"] = round(p99_burst / p99_sat, 2) if p99_burst else None
    result["machine"] = {"cpu_count": os.cpu_count(), "platform": platform.platform()}
    result["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return result


def show(r: dict[str, Any]) -> None:
    sat, burst, settle, once = r["saturation"], r["burst"], r["settle"], r["exactly_once"]
    print(f"\nthresholds {r['thresholds']}")
    print(
        f"saturation (closed loop C={sat['c']}): {sat['turns_per_s']} turns/s, p50 {sat['latency_ms']['p50']} ms, p99 {sat['latency_ms']['p99']} ms"
    )
    for name, phase in (("burst", burst), ("settle", settle)):
        print(
            f"{name} at {r['offered_turns_per_s'][name]} turns/s: offered {phase['offered']}, admitted "
            f"{phase['admitted']}, refused {phase['refused']} {phase['refused_by_code']} "
            f"(retryAfterMs {phase['retry_after_ms']}), errors {phase['errors']}; admitted latency {phase['latency_ms']}"
        )
    print(f"admitted p99 / saturation p99: {r['admitted_p99_over_saturation_p99']} (acceptance <= 2)")
    print(f"drain: the last turn admitted during the burst completed {r['drain_s_after_burst']} s after it")
    cpu = r["cpu_after_load"]
    print(
        f"idle {r['idle']['cpu_pct_total']} % of a core; after the load back to idle (<= {cpu['limit_pct']} %) in "
        f"{cpu['idle_after_s']} s ({cpu['seconds_after_burst'] + (cpu['idle_after_s'] or 0):.0f} s after the burst); windows {cpu['windows_pct']}"
    )
    print(f"exactly once: {once}")


def cli() -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--burst-s", type=float, default=float(env("BURST_S", "120")))
    parser.add_argument("--settle-s", type=float, default=float(env("SETTLE_S", "20")))
    parser.add_argument("--n", type=int, default=300, help="turns of the saturation run")
    parser.add_argument("--k", type=int, default=2, help="children per turn")
    parser.add_argument("--c", type=int, default=16, help="concurrency of the saturation run")
    parser.add_argument("--sockets", type=int, default=8)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--idle-within-s", type=float, default=90.0)
    parser.add_argument("--drain-timeout-s", type=float, default=600.0)
    parser.add_argument(
        "--backlog", type=int, default=None, help="MUSTER_OVERLOAD_BACKLOG (default: the gateway's)"
    )
    parser.add_argument("--backlog-age-ms", type=int, default=None)
    parser.add_argument("--pool-wait-ms", type=int, default=None)
    parser.add_argument(
        "--running", type=int, default=None, help="MUSTER_OVERLOAD_RUNNING (default: 1.25 x --c; 0: off)"
    )
    parser.add_argument(
        "--events-lag-ms", type=int, default=None,
        help="MUSTER_OVERLOAD_EVENTS_LAG_MS (default: the gateway's)",
    )  # fmt: skip
    parser.add_argument(
        "--turn-latency-ms", type=int, default=None,
        help="MUSTER_OVERLOAD_TURN_LATENCY_MS (default: the p99 of a calibration run at --c; 0: off)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = cli()
    final = asyncio.run(run(arguments))
    show(final)
    arguments.out.mkdir(parents=True, exist_ok=True)
    path = arguments.out / f"overload-{int(time.time())}.json"
    path.write_text(json.dumps(final, indent=2))
    print(f"wrote {path}")
