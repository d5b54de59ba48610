"""Projection rebuild: the read models are disposable, so they can be dropped and replayed
from the events alone through the live projector (the server-side `muster_project` that
every append runs, migration 0009), and a replay into scratch tables must equal the live
tables (invariant 7). The projector is set-based, so a replay costs a few statements per
`batch` positions, not one or two per event.

Consistency: the whole log is read in ONE repeatable-read snapshot, so an event committed
out of position order is either in it or committed after the replay (and then projected by
its own transaction onto the rebuilt tables); none can be skipped. `rebuild` stops appends
and locks the projection tables before its snapshot is taken, so nothing projects between
the snapshot and the truncation. `check` never writes a live table: it replays into
temporary tables of the same names, which shadow the live ones for the projector, and rolls
everything back. Both take a connection that is not in a transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import asyncpg

from muster_runtime.process import retrying
from muster_runtime.process.db import Connection

# The read models `muster_project` writes; all of them disposable.
PROJECTION_TABLES = (
    "sessions",
    "messages",
    "session_inputs",
    "tool_runs",
    "executions",
    "file_changes",
    "compactions",
    "session_waits",
)

LOCK_TIMEOUT_MS = 200
SAMPLE_KEYS = 5
# Positions per `muster_project` call: big enough that the round trips vanish, small enough
# that the range (which the function holds in memory) stays in the CPU's caches.
BATCH = 10_000


@dataclass(frozen=True)
class RebuildReport:
    events: int
    seconds: float
    rows: dict[str, int]

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class TableCheck:
    table: str
    rows_live: int
    rows_rebuilt: int
    checksum_live: str
    checksum_rebuilt: str
    differing_keys: list[str]  # primary keys of a few rows that differ (no row content)

    @property
    def equal(self) -> bool:
        return self.rows_live == self.rows_rebuilt and self.checksum_live == self.checksum_rebuilt


@dataclass(frozen=True)
class CheckReport:
    events: int
    seconds: float
    tables: list[TableCheck]

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


async def replay(conn: Connection, *, batch: int = BATCH) -> int:
    """Apply every event, by position, to whatever tables the unqualified projection names
    resolve to, `batch` positions per round trip. Where the ranges are cut makes no
    difference: `muster_project` gives the rows that applying the events one by one would
    (so a live append, a range of one stream, gives them too)."""
    last = await conn.fetchval("SELECT coalesce(max(position), 0) FROM events")
    after = 0
    while after < last:
        await conn.execute("SELECT muster_project(NULL, $1, $2)", after + 1, after + batch)
        after += batch
    return int(await conn.fetchval("SELECT count(*) FROM events"))


async def rebuild(conn: Connection, *, batch: int = BATCH, lock_within: float = 60.0) -> RebuildReport:
    """Truncate every projection table and replay the whole log, in one transaction."""
    busy = (asyncpg.LockNotAvailableError, asyncpg.DeadlockDetectedError)
    policy = retrying.until_free(busy, within_s=lock_within, low_s=0.02, high_s=0.2)
    try:
        return await retrying.call(policy, lambda: _rebuild_once(conn, batch))
    except busy as exc:
        raise TimeoutError(f"projection tables still busy after {lock_within:g}s") from exc


async def _rebuild_once(conn: Connection, batch: int) -> RebuildReport:
    tables = ", ".join(PROJECTION_TABLES)
    started = time.monotonic()
    async with conn.transaction(isolation="repeatable_read"):
        # Every append inserts its events before projecting them: holding `events` (reads
        # still allowed) lets the appends in flight commit and stops new ones before they
        # touch a projection. Writers that lock a session row before appending can still
        # make a cycle with us, so each wait is shorter than deadlock_timeout (1 s): we give
        # up and retry before a deadlock is detected, and a live writer is never aborted.
        # LOCK takes no snapshot: ours starts at the next query, after those commits.
        await conn.execute(
            f"""SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms';
                LOCK TABLE events IN EXCLUSIVE MODE;
                LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE;
                SET LOCAL lock_timeout TO DEFAULT"""
        )
        await conn.execute(f"TRUNCATE {tables}")
        applied = await replay(conn, batch=batch)
        rows = {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in PROJECTION_TABLES}
    return RebuildReport(applied, time.monotonic() - started, rows)


async def check(conn: Connection, *, batch: int = BATCH) -> CheckReport:
    """Replay the log into temporary copies of the projection tables and compare them with
    the live ones, in one snapshot; nothing is kept (the transaction is rolled back)."""
    tx = conn.transaction(isolation="repeatable_read")
    await tx.start()
    try:
        # Before the snapshot: a rebuild committing meanwhile would leave its truncation
        # visible to us (TRUNCATE is not MVCC-safe); this waits for it instead.
        await conn.execute(f"LOCK TABLE {', '.join(PROJECTION_TABLES)} IN ACCESS SHARE MODE")
        live_names = {t: await _qualified(conn, t) for t in PROJECTION_TABLES}
        keys = {t: await _primary_key(conn, live_names[t]) for t in PROJECTION_TABLES}
        live = {t: await _checksum(conn, live_names[t]) for t in PROJECTION_TABLES}
        for table, name in live_names.items():
            await conn.execute(f"CREATE TEMP TABLE {table} (LIKE {name} INCLUDING ALL) ON COMMIT DROP")
        # Temporary tables come first anyway; naming pg_temp changes search_path, which
        # makes PostgreSQL re-plan statements prepared against the live tables.
        await conn.execute(
            "SELECT set_config('search_path', 'pg_temp, ' || current_setting('search_path'), true)"
        )
        started = time.monotonic()
        applied = await replay(conn, batch=batch)
        seconds = time.monotonic() - started
        tables = []
        for table, name in live_names.items():
            rows, digest = await _checksum(conn, f"pg_temp.{table}")
            same = (rows, digest) == live[table]
            differing = [] if same else await _differing(conn, name, table, keys[table])
            tables.append(TableCheck(table, live[table][0], rows, live[table][1], digest, differing))
    finally:
        await tx.rollback()
    return CheckReport(applied, seconds, tables)


async def _qualified(conn: Connection, table: str) -> str:
    name = await conn.fetchval(
        """SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)""",
        table,
    )
    if name is None:
        raise LookupError(f"projection table {table} does not exist (is the database migrated?)")
    return str(name)


async def _primary_key(conn: Connection, name: str) -> list[str]:
    rows = await conn.fetch(
        """SELECT quote_ident(a.attname) AS col FROM pg_index i
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[])
           WHERE i.indrelid = $1::regclass AND i.indisprimary
           ORDER BY array_position(i.indkey::int2[], a.attnum)""",
        name,
    )
    return [str(r["col"]) for r in rows]


async def _checksum(conn: Connection, name: str) -> tuple[int, str]:
    """Row count and an order-independent digest: md5 of the rows' md5s in a canonical
    order (rows are unique by primary key; per-row hashes keep the aggregate small)."""
    row = await conn.fetchrow(
        f"""SELECT count(*) AS n, md5(coalesce(string_agg(h, '' ORDER BY h COLLATE "C"), '')) AS digest
            FROM (SELECT md5(t::text) AS h FROM {name} t) hashed"""
    )
    assert row is not None
    return int(row["n"]), str(row["digest"])


async def _differing(conn: Connection, live: str, table: str, key: list[str]) -> list[str]:
    """Primary keys of a few rows present on one side only (or different on each side)."""
    if not key:
        return []
    cols = ", ".join(key)
    rows = await conn.fetch(
        f"""SELECT DISTINCT ({cols})::text AS k FROM (
                (SELECT * FROM {live} EXCEPT ALL SELECT * FROM pg_temp.{table})
                UNION ALL (SELECT * FROM pg_temp.{table} EXCEPT ALL SELECT * FROM {live})) d
            ORDER BY 1 LIMIT {SAMPLE_KEYS}"""
    )
    return [str(r["k"]) for r in rows]
