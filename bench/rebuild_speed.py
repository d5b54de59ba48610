"""How fast `muster rebuild` and `muster rebuild --check` replay the log (events/s).

    .venv/bin/python -m bench.rebuild_speed [--events 100000] [--repeat 3] [--compare MODULE]
                                            [--database URL]

Creates a throw-away database (on the server of $DATABASE_URL, else on an embedded
PostgreSQL started for the run), appends a realistic log through `eventstore.append`
(`bench.rebuild_log`), then times `rebuild` and `check` of `muster_runtime.store.rebuild` and of
every `--compare` module (anything with the same `rebuild(conn)` and `check(conn)`, e.g. an
older copy on PYTHONPATH), alternating them so that noise hits all alike. Every check must
find the tables equal. `--database` keeps a log between runs (it is never dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.store.migrate import upgrade

from bench.rebuild_log import fill


@contextlib.asynccontextmanager
async def postgres_server() -> AsyncIterator[str]:
    given = os.environ.get("DATABASE_URL", "").strip()
    if given:
        yield given
        return
    from muster_launcher import postgres

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory(prefix="muster-rebuild-bench-") as data_dir:
        os.chmod(data_dir, 0o755)  # as root the server runs as its own user
        spec = postgres.postgres_spec(Path(data_dir), port)
        assert spec.prepare is not None
        await spec.prepare()
        proc = await asyncio.create_subprocess_exec(
            *spec.argv, user=spec.user, cwd=spec.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            await postgres.wait_ready(port)
            yield postgres.postgres_url(port, "postgres")
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)


@contextlib.asynccontextmanager
async def throwaway_database(server: str) -> AsyncIterator[str]:
    name = f"rebuild_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    try:
        url = urlunsplit(urlsplit(server)._replace(path="/" + name))
        await asyncio.to_thread(upgrade, url)
        yield url
    finally:
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()


async def measure(pool: Pool, module: ModuleType) -> tuple[float, float]:
    """events/s of one rebuild and of one check (the replay part, as the CLI reports)."""
    async with pool.acquire() as conn:
        built = await module.rebuild(conn)
        checked = await module.check(conn)
    if not checked.equal:
        raise SystemExit(f"{module.__name__}: the replay differs from the live tables: {checked}")
    return float(built.events_per_second), float(checked.events_per_second)


@contextlib.asynccontextmanager
async def database(given: str | None) -> AsyncIterator[str]:
    if given:
        yield given
        return
    async with postgres_server() as server, throwaway_database(server) as url:
        yield url


async def main(events: int, repeat: int, compare: list[str], given: str | None) -> None:
    modules = [importlib.import_module(name) for name in ["muster_runtime.store.rebuild", *compare]]
    async with database(given) as url:
        pool = await create_pool(url, min_size=2, max_size=8)
        try:
            started = time.monotonic()
            missing = events - int(await pool.fetchval("SELECT count(*) FROM events"))
            appended = await fill(pool, missing) if missing > 0 else 0
            total = await pool.fetchval("SELECT count(*) FROM events")
            types = await pool.fetch("SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY n DESC")
            print(f"log: {total} events ({appended} appended) in {time.monotonic() - started:.1f}s")
            print("     " + ", ".join(f"{r['type']} {r['n']}" for r in types))
            # The live tables, as the appends left them, must equal a replay before any rebuild.
            for module in modules:
                async with pool.acquire() as conn:
                    if not (await module.check(conn)).equal:
                        raise SystemExit(f"{module.__name__}: check of the live tables failed")
            results: dict[str, list[tuple[float, float]]] = {m.__name__: [] for m in modules}
            for _ in range(repeat):
                for module in modules:
                    rate = await measure(pool, module)
                    results[module.__name__].append(rate)
                    print(
                        f"  {module.__name__:<28} rebuild {rate[0]:>8.0f} events/s   check {rate[1]:>8.0f} events/s"
                    )
            print("median:")
            for name, rates in results.items():
                built = statistics.median(r[0] for r in rates)
                checked = statistics.median(r[1] for r in rates)
                print(f"  {name:<28} rebuild {built:>8.0f} events/s   check {checked:>8.0f} events/s")
        finally:
            await pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", action="append", default=[], help="another rebuild module to time")
    parser.add_argument("--database", help="a migrated database to use (and fill up to --events) instead")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.repeat, args.compare, args.database))
