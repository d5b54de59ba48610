"""`make bench-waiting`: what 1,000 sessions waiting for an approval cost the cluster.

Two fresh clusters, one run each way (same process, same machine, same minutes). On both,
1,000 sessions first make the same write_file call: on the baseline they are `read_only`,
so the call is refused and their turns end; on the other they are `ask`, so each waits for
an approval. The broker and the database then hold about the same data, and only the
waiting differs. Each cluster then measures its idle CPU and the K-way fan-out workload's
throughput. A wait is an event: it holds no task, lease renewal or worker slot, so both
figures should match (within the run-to-run spread of the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import asyncpg
import websockets

from bench.cluster import BenchCluster
from bench.cpu import idle_cpu
from bench.workload import workload

WAIT = "#script " + json.dumps(
    {"steps": [{"tool_calls": [{"name": "write_file", "arguments": {"path": "w.md", "content": "x"}}]}]}
)
PENDING = "SELECT count(*) FROM session_waits WHERE kind = 'approval' AND status = 'pending'"
# Waiting roots whose tree signal recovery has recorded: the setup's last reaction.
SIGNALLED = "SELECT count(*) FROM sessions WHERE pending_approvals > 0"
REFUSED = "SELECT count(*) FROM sessions WHERE permission_level = 'read_only' AND phase = 'COMPLETED'"
LIVE_LEASES = """SELECT count(*) FROM leases l JOIN sessions s ON l.resource_id = s.session_id::text
                 WHERE s.phase = 'WAITING_APPROVAL' AND l.expires_at > now()"""


async def make_sessions(cluster: BenchCluster, count: int, waiting: bool, clients: int = 8) -> float:
    """Create `count` sessions and wait until each waits for its approval and its tree
    signal shows it (or, not `waiting`, had its call refused and ended); seconds taken."""
    level, done = ("ask", SIGNALLED) if waiting else ("read_only", REFUSED)
    started = time.perf_counter()
    todo = iter(range(count))

    async def client() -> None:
        async with websockets.connect(f"{cluster.ws_url}?token={cluster.token}", max_size=None) as ws:
            for i in todo:
                frame = {
                    "type": "create_session",
                    "id": i,
                    "data": {"content": WAIT, "permissionLevel": level},
                }
                await ws.send(json.dumps(frame))
                while json.loads(await ws.recv()).get("id") != i:
                    pass

    await asyncio.gather(*(client() for _ in range(clients)))
    conn = await asyncpg.connect(cluster.ready["database"])
    try:
        for _ in range(600):  # the last turns reach their gate within a minute or two
            if await conn.fetchval(done) >= count:
                return time.perf_counter() - started
            await asyncio.sleep(0.5)
    finally:
        await conn.close()
    raise RuntimeError(f"{count} sessions did not all reach their gate in time")


async def measure(waiting: bool, args: argparse.Namespace) -> dict[str, Any]:
    with BenchCluster() as cluster:
        await workload(cluster, 8, args.k, 4, f"warmup-{waiting}")
        result: dict[str, Any] = {"waiting": args.sessions if waiting else 0}
        result["setup_s"] = round(await make_sessions(cluster, args.sessions, waiting), 1)
        result["idle"] = await idle_cpu(cluster, args.idle_s)
        conn = await asyncpg.connect(cluster.ready["database"])
        try:
            result["live_leases_of_waiting_sessions"] = await conn.fetchval(LIVE_LEASES)
            result["pending_approvals"] = await conn.fetchval(PENDING)
        finally:
            await conn.close()
        result["run"] = await workload(cluster, args.n, args.k, args.c, f"run-{waiting}")
        return result


async def main(args: argparse.Namespace) -> None:
    order = (True, False) if args.waiting_first else (False, True)
    rows = sorted([await measure(waiting, args) for waiting in order], key=lambda row: row["waiting"])
    print(json.dumps(rows, indent=2))
    print(
        f"\n| sessions waiting | idle CPU (% of a core) | turns/s (N={args.n}, K={args.k}, C={args.c}) | p50 ms |"
    )
    print("|---|---|---|---|")
    for row in rows:
        run = row["run"]
        print(
            f"| {row['waiting']} | {row['idle']['cpu_pct_total']} | {run['turns_per_s']} | {run['latency_ms']['p50']} |"
        )
    base, loaded = rows
    print(
        f"\nratio with {args.sessions} waiting: throughput {loaded['run']['turns_per_s'] / base['run']['turns_per_s']:.2f}x, "
        f"idle CPU {loaded['idle']['cpu_pct_total'] - base['idle']['cpu_pct_total']:+.2f} points; "
        f"live leases of waiting sessions: {loaded['live_leases_of_waiting_sessions']}"
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--waiting-first", action="store_true", help="measure the waiting cluster first")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--c", type=int, default=16)
    parser.add_argument("--idle-s", type=float, default=30.0)
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
