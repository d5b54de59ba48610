"""`python -m chaos.soak --minutes 30 --kill-every 60`: the chaos workload at a steady rate
on a private cluster for a long time, a random service or the broker SIGKILLed every period,
the resources sampled throughout; then quiescence, the chaos invariants over every session,
the resource checks (`chaos.soak_checks`), a JSON report and PNG charts (docs/soak.md).
Exits 0 when everything passed, 1 when a check failed, 2 when the cluster did not start."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from chaos import report
from chaos.clients import Clients, clients
from chaos.cluster import ChaosCluster
from chaos.quiesce import wait_quiet
from chaos.run import run_checks
from chaos.soak_charts import draw
from chaos.soak_checks import resource_checks
from chaos.soak_load import PeriodicKills, SoakDriver, release
from chaos.soak_report import build, show, write
from chaos.soak_sampler import APPLICATION, Sample, Sampler, cluster_cores

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m chaos.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=float(env("SOAK_MINUTES", "30")))
    parser.add_argument(
        "--kill-every", type=float, default=float(env("SOAK_KILL_EVERY_S", "60")), help="0: no kills"
    )
    parser.add_argument(
        "--warmup-minutes",
        type=float,
        default=float(env("SOAK_WARMUP_MINUTES", "-1")),
        help="default: 5 for 30 minutes, in proportion for shorter soaks",
    )
    parser.add_argument(
        "--rate", type=float, default=float(env("SOAK_RATE", "1.0")), help="sessions started a second"
    )
    parser.add_argument("--sample-every", type=float, default=float(env("SOAK_SAMPLE_S", "5")))
    parser.add_argument("--lag-bound", type=float, default=float(env("SOAK_LAG_BOUND_S", "45")))
    parser.add_argument("--quiesce-timeout", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=int(env("SOAK_SEED", "0")) or None)
    parser.add_argument("--out", type=Path, default=Path(env("SOAK_OUT", "")) if env("SOAK_OUT") else None)
    args = parser.parse_args(argv)
    if args.warmup_minutes < 0:
        args.warmup_minutes = min(5.0, args.minutes / 6)
    return args


def mean_cores(samples: list[Sample], until_s: float) -> float:
    """The cluster's processes' CPU over the load, in cores (from the samples)."""
    series = [c for t, c in cluster_cores(samples) if t <= until_s]
    return round(sum(series) / len(series), 2) if series else 0.0


def busy_cores() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


async def soak(
    cluster: ChaosCluster, args: argparse.Namespace, seed: int, t0: float
) -> tuple[dict[str, Any], Any]:
    """The soak with the users' clients, closed whatever happens."""
    async with clients(cluster, "soak", server_settings={"application_name": APPLICATION}) as users:
        return await _soak(cluster, args, seed, t0, users)


async def _soak(
    cluster: ChaosCluster, args: argparse.Namespace, seed: int, t0: float, users: Clients
) -> tuple[dict[str, Any], Any]:
    load_s, warmup_s = args.minutes * 60, args.warmup_minutes * 60
    conns, pool = users.conns, users.pool
    kills = PeriodicKills(cluster, seed, args.kill_every or load_s + 1, load_s, t0)
    driver = SoakDriver(
        conns, users.rests, pool, kills, gateway_url=cluster.gateway_url, tokens=cluster.tokens, t0=t0
    )
    sampler = Sampler(
        cluster.launcher.pid, cluster.database_url, cluster.launcher.kafka_bootstrap, args.sample_every, t0
    )
    try:
        sampling = asyncio.create_task(sampler.run())
        killing = asyncio.create_task(kills.run())
        cpu_before, wall_before = busy_cores(), time.monotonic()
        tasks = await release(driver, seed, args.rate, load_s, t0)
        await killing
        load_end_s = time.monotonic() - t0
        cores = (busy_cores() - cpu_before) / (time.monotonic() - wall_before)
        driver.deadline = time.monotonic() + args.quiesce_timeout
        print(
            f"[soak] load ended at {load_end_s:.0f}s ({len(tasks)} sessions); waiting for quiescence",
            flush=True,
        )
        tasks_done = asyncio.Event()
        gathering = asyncio.gather(*tasks, return_exceptions=True)
        gathering.add_done_callback(lambda _: tasks_done.set())
        quiet = await wait_quiet(pool, driver.deadline + 5, tasks_done)
        if not tasks_done.is_set():
            await asyncio.wait({gathering}, timeout=20)
        for task in tasks:
            task.cancel()
        sampler.stopping.set()
        await sampling
        final = await sampler.final(args.lag_bound)
        outcomes = [driver.outcomes[i] for i in sorted(driver.outcomes)]
        workspaces = cluster.data_dir / "workspaces"
        checks, exercised = await run_checks(
            pool, outcomes, conns, cluster.log_lines(), workspaces, users.devices
        )
        resources = resource_checks(sampler.samples, kills.steps, warmup_s, load_end_s, args.lag_bound, final)
        chaos_result = report.build(
            seed,
            vars(args),
            kills.steps,
            outcomes,
            checks,
            {"quiescence": quiet, "exercised": exercised},
            time.monotonic() - t0,
            cluster.unexpected_exits(),
        )
        config = {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
        config.update(minutes=args.minutes, kill_every_s=args.kill_every, warmup_s=warmup_s, seed=seed)
        extra = {
            "load_end_s": round(load_end_s, 1),
            "sessions_started": len(tasks),
            "sessions_per_s": round(len(tasks) / load_end_s, 3),
            "machine_busy_cores": round(cores, 2),
            "cluster_cores": mean_cores(sampler.samples, load_end_s),
            "machine_cores": psutil.cpu_count(),
            "compactions": dict(driver.compactions),
            "sampler_errors": dict(sampler.errors),
        }
        result = build(chaos_result, config, sampler.samples, driver.finished, resources, extra)
        return result, (sampler.samples, driver.finished, kills.steps, warmup_s)
    finally:
        await driver.close()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # the lag reader during broker kills
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    out = args.out or RESULTS / f"soak-{time.strftime('%Y%m%d-%H%M%S')}"
    print(
        f"[soak] seed {seed}: {args.minutes:g} min at {args.rate:g} sessions/s, a kill every "
        f"{args.kill_every:g} s, warm-up {args.warmup_minutes:g} min; output {out}",
        flush=True,
    )
    cluster = ChaosCluster()
    try:
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as exc:
            print(f"[soak] cluster did not start: {exc}", file=sys.stderr)
            return 2
        t0 = time.monotonic()
        result, (samples, finished, steps, warmup_s) = asyncio.run(soak(cluster, args, seed, t0))
        result["charts"] = draw(out, samples, finished, steps, warmup_s)
        write(result, out, cluster.log_path)
        show(result)
        return 0 if result["passed"] else 1
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
