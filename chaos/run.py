"""`python -m chaos.run --sessions 30 --kills 20 --seed N`: a private cluster, a seeded
scripted workload, seeded SIGKILLs, quiescence, then the DESIGN §6 invariants from the
database. Exits 1 when an invariant (1-8) fails, 3 when only an extra check (L: waits,
W: WebSocket streams, R: outcomes) fails, 2 when the cluster could not even start."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg

from chaos import report
from chaos.checks_effects import check_4, check_5, check_6, check_8
from chaos.checks_extra import check_7, check_ws
from chaos.checks_history import check_1, check_2, check_3
from chaos.checks_results import check_r
from chaos.checks_waits import check_waits
from chaos.clients import clients
from chaos.cluster import ChaosCluster
from chaos.dbstate import Check, load
from chaos.device import Device
from chaos.driver import Driver
from chaos.exercised import summarise
from chaos.outcome import Outcome
from chaos.quiesce import wait_quiet
from chaos.schedule import KillRunner, KillStep, describe, plan_kills
from chaos.workload import SessionPlan, plan_workload
from chaos.wsconn import Conn


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos.run", description=__doc__)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--kills", type=int, default=20, help="at least this many processes SIGKILLed")
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed, printed")
    parser.add_argument("--quiesce-timeout", type=float, default=180.0, help="seconds after the last kill")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data dir afterwards")
    return parser.parse_args(argv)


async def exercise(
    cluster: ChaosCluster, plans: list[SessionPlan], steps: list[KillStep], quiesce_s: float, t0: float
) -> tuple[list[Outcome], list[Check], dict[str, Any]]:
    async with clients(cluster, str(t0)) as users:
        kills = KillRunner(cluster, steps, t0)
        driver = Driver(users.conns, users.rests, users.pool, kills)
        killing = asyncio.create_task(kills.run())
        tasks = [asyncio.create_task(driver.run(plan)) for plan in plans]
        tasks_done = asyncio.Event()

        async def all_sessions() -> list[Outcome]:
            try:
                return list(await asyncio.gather(*tasks))
            finally:
                tasks_done.set()

        gathering = asyncio.create_task(all_sessions())
        await killing
        driver.deadline = time.monotonic() + quiesce_s
        print(
            f"[chaos] last kill done at {time.monotonic() - t0:.1f}s; waiting up to {quiesce_s:g}s "
            "for quiescence",
            flush=True,
        )
        quiet = await wait_quiet(users.pool, driver.deadline + 5, tasks_done)
        if not tasks_done.is_set():
            await asyncio.wait({gathering}, timeout=20)
        for task in tasks:
            task.cancel()
        outcomes = [driver.outcomes[p.index] for p in plans if p.index in driver.outcomes]
        workspaces = cluster.data_dir / "workspaces"
        checks, exercised = await run_checks(
            users.pool, outcomes, users.conns, cluster.log_lines(), workspaces, users.devices
        )
        return outcomes, checks, {"quiescence": quiet, "exercised": exercised}


async def run_checks(
    pool: asyncpg.Pool,
    outcomes: list[Outcome],
    conns: dict[str, Conn],
    log_lines: list[str],
    workspaces: Path | None = None,
    devices: dict[str, Device] | None = None,
) -> tuple[list[Check], dict[str, Any]]:
    async with pool.acquire() as conn:
        db = await load(conn)
        cancel_times = {
            o.session_id: o.cancel_acked_at
            for o in outcomes
            if o.session_id and o.cancel_acked_at is not None
        }
        checks = [
            check_1(db),
            check_2(db),
            check_3(db),
            check_4(db, outcomes, cancel_times),
            check_5(db, outcomes, workspaces),
            check_6(db),
            await check_7(conn),
            check_8(db, outcomes),
            check_waits(
                db,
                [dict(r) for r in await conn.fetch("SELECT * FROM session_waits")],
                outcomes,
                devices or {},
                workspaces,
            ),
        ]
    checks += [await check_ws(db, outcomes, conns, pool), check_r(db, outcomes)]
    return checks, summarise(db, log_lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    steps = plan_kills(seed, args.kills)
    plans = plan_workload(seed, args.sessions, len(steps))
    print(
        f"[chaos] seed {seed}: {args.sessions} sessions, {sum(len(s.targets) for s in steps)} kills "
        f"in {len(steps)} steps",
        flush=True,
    )
    print(f"[chaos] kill schedule: {describe(steps)}", flush=True)
    kinds = Counter(p.kind for p in plans)
    print(f"[chaos] workload: {dict(kinds)}; {sum(p.children for p in plans)} planned children", flush=True)
    t0 = time.monotonic()
    cluster = ChaosCluster(keep=args.keep)
    try:
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as exc:
            print(f"[chaos] cluster did not start: {exc}", file=sys.stderr)
            return 2
        print(
            f"[chaos] cluster up in {time.monotonic() - t0:.1f}s: {cluster.gateway_url} "
            f"(data {cluster.data_dir}, log {cluster.log_path})",
            flush=True,
        )
        outcomes, checks, extra = asyncio.run(exercise(cluster, plans, steps, args.quiesce_timeout, t0))
        result = report.build(
            seed,
            vars(args),
            steps,
            outcomes,
            checks,
            extra,
            time.monotonic() - t0,
            cluster.unexpected_exits(),
        )
        report.show(result)
        path = report.write(result, cluster.log_path)
        print(f"[chaos] report written to {path}")
        if not result["passed"]:
            return 1
        return 3 if any(c.status == "FAIL" for c in checks) else 0
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
