"""What a fan-out turn asks of PostgreSQL, statement by statement (issue 39).

    .venv/bin/python -m bench.statements [--n 300 --c 16 --k 4]

On a fresh cluster, PostgreSQL is restarted with `pg_stat_statements` (every level) and
`track_functions`: `ALTER SYSTEM`, then the postmaster is stopped and the launcher's
supervisor starts it again, as after a crash; the services reconnect. After a warm-up, the
counters are reset and N turns of `make bench`'s workload run at C in flight. The report,
per turn:

- the round trips the services make (top-level statements, `BEGIN` and `COMMIT` included)
  and the execution time they cost, by statement;
- the statements run inside the server-side functions (the projector's among them);
- each function's own time (`self`: its statements but not the functions it calls).

Execution time is the server's, not its CPU: on two busy cores it includes waits for a
core and for row locks, so compare its shares rather than its sum with `make bench`'s CPU.
It prints the tables and writes `bench-results/statements-<time>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench import report
from bench.cluster import ROOT, BenchCluster
from bench.workload import workload

STATEMENTS = """
SELECT toplevel, calls, total_exec_time AS ms, rows,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 140) AS query
FROM pg_stat_statements
WHERE query NOT LIKE '%pg_stat%'
ORDER BY total_exec_time DESC
"""
FUNCTIONS = """
SELECT funcname, calls, total_time AS ms, self_time AS self_ms
FROM pg_stat_user_functions ORDER BY self_time DESC
"""


async def with_statement_stats(cluster: BenchCluster) -> asyncpg.Connection:
    """Restart the cluster's PostgreSQL with the statistics on; a connection to it."""
    url = cluster.ready["database"]
    conn = await asyncpg.connect(url)
    await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    await conn.execute("ALTER SYSTEM SET pg_stat_statements.track = 'all'")
    await conn.execute("ALTER SYSTEM SET track_functions = 'all'")
    await conn.close()
    postmaster = next(p for p in cluster.processes()["postgres"] if p.name() == "postgres")
    postmaster.send_signal(signal.SIGINT)  # a fast shutdown; the supervisor starts it again
    postmaster.wait(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = await asyncpg.connect(url)
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            return conn
        except (OSError, asyncpg.PostgresError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


def per_turn(rows: list[asyncpg.Record], n: int) -> list[dict[str, Any]]:
    return [
        {
            "calls": round(r["calls"] / n, 2),
            "ms": round(r["ms"] / n, 3),
            "ms_a_call": round(r["ms"] / max(1, r["calls"]), 3),
            "query": r["query"],
        }
        for r in rows
    ]


async def measure(cluster: BenchCluster, n: int, k: int, c: int) -> dict[str, Any]:
    conn = await with_statement_stats(cluster)
    try:
        await workload(cluster, max(20, n // 5), k, c, "warm")
        await conn.execute("SELECT pg_stat_statements_reset()")
        await conn.execute("SELECT pg_stat_reset()")
        run = await workload(cluster, n, k, c, "statements")
        rows = await conn.fetch(STATEMENTS)
        functions = await conn.fetch(FUNCTIONS)
    finally:
        await conn.close()
    top = per_turn([r for r in rows if r["toplevel"]], n)
    nested = per_turn([r for r in rows if not r["toplevel"]], n)
    return {
        "workload": {"n": n, "k": k, "c": c},
        "turns_per_s": run["turns_per_s"],
        "cpu_ms_per_turn": run["cpu_ms_per_turn"],
        "round_trips_per_turn": round(sum(s["calls"] for s in top), 1),
        "exec_ms_per_turn": round(sum(s["ms"] for s in top), 2),
        "top_level": top,
        "nested": nested[:30],
        "functions": [
            {
                "function": f["funcname"],
                "calls": round(f["calls"] / n, 2),
                "ms": round(f["ms"] / n, 3),
                "self_ms": round(f["self_ms"] / n, 3),
            }
            for f in functions
            if f["calls"]
        ],
    }


def show(result: dict[str, Any]) -> None:
    print(f"round trips a turn: {result['round_trips_per_turn']}, execution {result['exec_ms_per_turn']} ms a turn")
    print(f"PostgreSQL CPU a turn (the run's): {result['cpu_ms_per_turn'].get('postgres')} ms")
    print("\ntop level (a turn): calls  ms  statement")
    for s in result["top_level"][:15]:
        print(f"{s['calls']:8.2f} {s['ms']:7.3f}  {s['query'][:100]}")
    print("\nfunctions (a turn): calls  ms  self ms")
    for f in result["functions"]:
        print(f"{f['calls']:8.2f} {f['ms']:7.3f} {f['self_ms']:7.3f}  {f['function']}")
    print("\ninside the functions (a turn): calls  ms  statement")
    for s in result["nested"][:15]:
        print(f"{s['calls']:8.2f} {s['ms']:7.3f}  {s['query'][:100]}")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with BenchCluster() as cluster:
        result = await measure(cluster, args.n, args.k, args.c)
    result["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    show(result)
    return result


def cli() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="measured turns")
    parser.add_argument("--k", type=int, default=4, help="children a turn")
    parser.add_argument("--c", type=int, default=16, help="turns in flight")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    return parser.parse_args()


if __name__ == "__main__":
    arguments = cli()
    path = report.write_json(asyncio.run(main(arguments)), Path(arguments.out), "statements")
    print(f"wrote {path}")
