"""`muster rebuild [--check]`: drop and replay the projections, or compare a replay with them.

The database is $DATABASE_URL, else the local PostgreSQL that `muster run` started for the
data dir (found through its `postmaster.pid`, which names the port it listens on).
Exit status: 0 done / all tables equal, 1 a table differs, 2 could not run.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from muster_runtime.process.db import create_pool
from muster_runtime.process.settings import Settings
from muster_runtime.store import rebuild


class CannotRun(Exception):
    """Why the command cannot run; printed as is, exit status 2."""


def local_database_url(data_dir: Path) -> str:
    """The URL of the data dir's running PostgreSQL, from the postmaster.pid it writes."""
    pid_file = data_dir / "postgres" / "postmaster.pid"
    hint = "start it with `muster run`, or set DATABASE_URL"
    try:
        lines = pid_file.read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, IndexError, ValueError):
        raise CannotRun(f"the local PostgreSQL of {data_dir} is not running ({hint})") from None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        stale = f"its pid {pid} is gone"
        raise CannotRun(f"the local PostgreSQL of {data_dir} is not running ({stale}; {hint})") from None
    except PermissionError:
        pass  # alive, owned by PostgreSQL's own user
    from .postgres import postgres_url

    return postgres_url(port)


def database_url(source: Settings | Mapping[str, str]) -> str:
    settings = Settings.of(source)
    given = settings.database_url.strip()
    if given:
        return given
    return local_database_url(settings.data_dir)


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


async def _run(url: str, check: bool, batch: int) -> int:
    try:
        pool = await create_pool(url, min_size=1, max_size=1)
    except (OSError, asyncpg.PostgresError) as exc:
        raise CannotRun(f"cannot connect to {redacted(url)}: {exc}") from None
    try:
        async with pool.acquire() as conn:
            if check:
                return _print_check(await rebuild.check(conn, batch=batch))
            _print_rebuild(await rebuild.rebuild(conn, batch=batch))
            return 0
    except (LookupError, asyncpg.UndefinedTableError) as exc:
        raise CannotRun(f"{redacted(url)} has no event store yet ({exc}); run `muster run` once") from None
    except TimeoutError as exc:
        raise CannotRun(f"{exc}: appends kept the projection tables locked; retry when quieter") from None
    finally:
        await pool.close()


def _print_rebuild(report: rebuild.RebuildReport) -> None:
    print(f"events: {report.events}")
    print(f"seconds: {report.seconds:.2f}")
    print(f"events/s: {report.events_per_second:.0f}")
    width = max(len(t) for t in report.rows)
    print(f"{'table':<{width}}  rows")
    for table, rows in report.rows.items():
        print(f"{table:<{width}}  {rows}")


def _print_check(report: rebuild.CheckReport) -> int:
    header = ("table", "rows_live", "rows_rebuilt", "checksum_live", "checksum_rebuilt", "status")
    lines = [
        (
            t.table,
            str(t.rows_live),
            str(t.rows_rebuilt),
            t.checksum_live,
            t.checksum_rebuilt,
            "equal" if t.equal else "different",
        )
        for t in report.tables
    ]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    for row in [header, *lines]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for t in report.tables:
        if t.differing_keys:
            print(f"{t.table}: rows differing (primary key): {', '.join(t.differing_keys)}")
    rate = f"{report.events_per_second:.0f} events/s"
    print(f"events: {report.events} replayed in {report.seconds:.2f}s ({rate})")
    return 0 if report.equal else 1


def run_rebuild(check: bool, batch: int, environ: Settings | Mapping[str, str] | None = None) -> int:
    command = "muster rebuild" + (" --check" if check else "")
    try:
        url = database_url(Settings.from_env() if environ is None else environ)
        print(f"database: {redacted(url)}", file=sys.stderr)
        return asyncio.run(_run(url, check, batch))
    except CannotRun as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
