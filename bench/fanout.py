"""`make bench`: the K-way fan-out workload on a local cluster, and the figures around it.

N parent sessions; each parent turn delegates K children in one step and answers once they
deliver; each child makes one write_file call and answers (scripted model, no delay). C parents
are in flight at once (bench/workload.py). R passes, each a run per C on a fresh cluster (a
warm-up, the raw floors — Kafka round trip, PostgreSQL commit — then the run), reported as
medians: the local broker keeps every record in memory and slows down as its topics grow, so
runs on one long-lived cluster would measure the broker's backlog more than muster. The last
cluster then serves the step-cost micro benchmark (bench/step_cost.py), the idle cluster's
CPU and the `muster rebuild --check` speed; given the peers' results, muster is shown next to
LangGraph and Celery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from bench import peers, report, step_cost
from bench.cluster import ROOT, BenchCluster
from bench.cpu import idle_cpu
from bench.floors import kafka_round_trip_ms, p50, postgres_commit_ms
from bench.rebuild import rebuild_check
from bench.stats import median_of, median_runs
from bench.workload import workload


def with_floor_ratios(run: dict[str, Any], floors: dict[str, float]) -> dict[str, Any]:
    run["p50_over_kafka_rtt"] = round(run["latency_ms"]["p50"] / floors["kafka_rtt_ms_p50"], 1)
    run["p50_over_pg_commit"] = round(run["latency_ms"]["p50"] / floors["pg_commit_ms_p50"], 1)
    return run


async def measured_run(cluster: BenchCluster, args: argparse.Namespace, c: int, index: int) -> dict[str, Any]:
    """On a fresh cluster: a warm-up, the floors, then N turns at concurrency C."""
    await workload(cluster, max(4, args.c // 2), args.k, min(args.c, 4), f"warmup-{index}-{c}")
    rtt = await kafka_round_trip_ms(cluster.ready["kafka"])
    commit = await postgres_commit_ms(cluster.ready["database"])
    floors = {"kafka_rtt_ms_p50": round(p50(rtt), 3), "pg_commit_ms_p50": round(p50(commit), 3)}
    print(f"pass {index + 1}/{args.repeat}: N={args.n} K={args.k} C={c} ...", flush=True)
    run = await workload(cluster, args.n, args.k, c, f"p{index}-c{c}")
    print(f"  {run['turns_per_s']} turns/s, p50 {run['latency_ms']['p50']} ms", flush=True)
    return {"floors": floors, "run": with_floor_ratios(run, floors)}


def above_idle(run: dict[str, Any], idle_pct: float) -> float:
    """CPU ms per turn beyond what the cluster burns anyway (its idle rate over the run's wall)."""
    idle_ms = idle_pct / 100 * float(run["wall_s"]) * 1000
    return round(float(run["cpu_ms_per_turn_total"]) - idle_ms / int(run["n"]), 2)


def parse_instances(value: str) -> dict[str, int]:
    try:
        harness, worker = (int(part) for part in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            "expected H,W (harness and subagent-worker instances), e.g. 2,2"
        ) from None
    if not (1 <= harness <= 16 and 1 <= worker <= 16):
        raise argparse.ArgumentTypeError("instances must be between 1 and 16")
    return {"harness": harness, "subagent-worker": worker}


async def extras(cluster: BenchCluster, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Step cost, idle CPU and rebuild speed, on the last cluster of the passes."""
    if args.step_messages > 0:
        print(f"step cost: building a {args.step_messages}-message session ...", flush=True)
        result["step_cost"] = await step_cost.measure(cluster, args.step_messages)
    if args.idle_s > 0:
        print(f"idle: {args.idle_s:.0f} s without traffic ...", flush=True)
        result["idle"] = await idle_cpu(cluster, args.idle_s)
        for run in result["runs"]:
            run["cpu_ms_per_turn_above_idle"] = above_idle(run, result["idle"]["cpu_pct_total"])
    print("muster rebuild --check ...", flush=True)
    result["rebuild"] = await rebuild_check(cluster)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    peers_dir = peers.resolve(args.peers)  # fail before a long run, not after it
    passes: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    plan = [(index, c) for index in range(args.repeat) for c in args.concurrency]
    for step, (index, c) in enumerate(plan):
        with BenchCluster(instances=args.instances) as cluster:
            print(f"cluster up: {cluster.ready['gateway']} (data {cluster.data_dir})", flush=True)
            measured = await measured_run(cluster, args, c, index)
            if index == len(passes):
                passes.append({"floors": [], "runs": []})
            passes[index]["floors"].append(measured["floors"])
            passes[index]["runs"].append(measured["run"])
            if step == len(plan) - 1:
                for done in passes:
                    done["floors"] = median_of(done["floors"])
                floors = median_of([p["floors"] for p in passes])
                runs = [with_floor_ratios(run, floors) for run in median_runs([p["runs"] for p in passes])]
                result = {
                    "workload": {"name": "fanout", "n": args.n, "k": args.k, "concurrency": args.concurrency},
                    "repeat": args.repeat,
                    "instances": {
                        "configured": cluster.configured_instances(),
                        "running": cluster.instance_counts(),
                    },
                    "floors": floors,
                    "runs": runs,  # peers/table.py reads runs[].c, turns_per_s, latency_ms.p50, cpu_s_per_turn
                    "passes": passes,
                    "fresh_cluster_per_run": True,
                }
                await extras(cluster, args, result)
    if peers_dir is not None:
        result["peers"] = peers.compare(peers_dir, result["runs"], result["floors"])
    result["machine"] = {"cpu_count": os.cpu_count(), "platform": platform.platform()}
    result["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return result


def cli() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200, help="parent turns per run")
    parser.add_argument("--k", type=int, default=4, help="children per parent turn")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 1], help="C values, one run each")
    parser.add_argument("--c", type=int, default=16, help="warm-up concurrency")
    parser.add_argument(
        "--repeat", type=int, default=3, help="passes (a fresh cluster per run); medians reported"
    )
    parser.add_argument(
        "--idle-s", type=float, default=30.0, help="seconds of idle CPU measurement (0: skip)"
    )
    parser.add_argument(
        "--step-messages", type=int, default=2000, help="big session of the step-cost bench (0: skip)"
    )
    parser.add_argument(
        "--instances",
        type=parse_instances,
        default=None,
        metavar="H,W",
        help="harness and subagent-worker instances (default: MUSTER_*_INSTANCES, else 1)",
    )
    parser.add_argument(
        "--peers",
        default=None,
        metavar="DIR|latest",
        help="compare with ../shared/peers/run.sh results (default: $MUSTER_PEERS_OUT)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results", help="where the JSON report goes")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


if __name__ == "__main__":
    arguments = cli()
    final = asyncio.run(main(arguments))
    print(report.table(final))
    arguments.out.mkdir(parents=True, exist_ok=True)
    path = arguments.out / f"fanout-{int(time.time())}.json"
    path.write_text(json.dumps(final, indent=2))
    print(f"wrote {path}")
