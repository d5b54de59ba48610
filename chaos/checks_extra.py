"""Invariant 7 (projections equal a rebuild, through `muster_runtime.store.rebuild.check` when it
exists) and check W: each root session's WebSocket stream was complete, in order, without
duplicates, across gateway restarts (DESIGN §7 `subscribe` with `afterPosition`)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import asyncpg

from chaos.dbstate import Check, DbState
from chaos.outcome import Outcome
from chaos.wsconn import Conn


async def check_7(conn: asyncpg.Connection) -> Check:
    check = Check("7", "projections equal a rebuild from the events")
    try:
        module = importlib.import_module("muster_runtime.store.rebuild")
    except ImportError as exc:
        check.status, check.note = "SKIP", f"muster_runtime.store.rebuild not importable ({exc})"
        return check
    fn = getattr(module, "check", None)
    if fn is None:
        check.status, check.note = "SKIP", "muster_runtime.store.rebuild has no check(conn)"
        return check
    try:
        report: Any = fn(conn)
        if inspect.isawaitable(report):
            report = await report
    except Exception as exc:
        check.status, check.note = "FAIL", f"rebuild.check raised {type(exc).__name__}: {exc}"
        return check
    tables = list(getattr(report, "tables", []) or [])
    check.counts["events_replayed"] = int(getattr(report, "events", 0) or 0)
    check.counts["tables"] = len(tables)
    for table in tables:
        if not getattr(table, "equal", True):
            keys = ", ".join(getattr(table, "differing_keys", []) or [])
            check.fail(
                f"{table.table}: live {table.rows_live} rows vs rebuilt {table.rows_rebuilt}; keys {keys}"
            )
    if not tables and not bool(getattr(report, "equal", report)):
        check.fail(f"rebuild.check reported a difference: {report!r}")
    check.note = f"rebuild.check: {type(report).__name__} equal={getattr(report, 'equal', '?')}"
    return check


def _caught_up(conn: Conn, session_id: str, position: int) -> Callable[[], bool]:
    return lambda: conn.last_pos.get(session_id, 0) >= position


LATE_EVENTS = "SELECT position, type FROM events WHERE stream_id = $1 AND position = ANY($2::bigint[])"


async def check_ws(
    db: DbState, outcomes: list[Outcome], conns: dict[str, Conn], pool: asyncpg.Pool | None = None
) -> Check:
    check = Check("W", "WebSocket streams complete, ordered, duplicate-free across reconnects")
    expected_total = received_total = 0
    late: list[str] = []
    for out in outcomes:
        if out.session_id is None:
            continue
        conn = conns[out.user]
        stream = [e["position"] for e in db.stream(out.session_id)]
        if stream:
            await conn.wait_for(_caught_up(conn, out.session_id, stream[-1]), 15.0)
        seen = conn.seen.get(out.session_id, set())
        expected_total += len(stream)
        received_total += len(seen)
        missing = sorted(set(stream) - seen)
        extra = sorted(seen - set(stream))
        if missing:
            check.fail(
                f"session {out.session_id}: {len(missing)} events never delivered, positions {missing[:8]}"
            )
        if extra and pool is not None:
            # Appended after the checks' snapshot (quiescence only looks at phases and
            # executions): in the stream now, so delivered rightly; named in the note.
            rows = await pool.fetch(LATE_EVENTS, out.session_id, extra)
            late.extend(f"{r['type']}@{r['position']}" for r in rows)
            extra = sorted(set(extra) - {r["position"] for r in rows})
        if extra:
            check.fail(f"session {out.session_id}: positions not in its stream {extra[:8]}")
    for conn_name, conn in conns.items():
        for session_id, position in conn.duplicates[:5]:
            check.fail(f"{conn_name}: duplicate position {position} in {session_id}")
        for session_id, position in conn.reordered[:5]:
            check.fail(f"{conn_name}: position {position} out of order in {session_id}")
        check.counts[f"{conn_name}_connects"] = conn.connects
        check.counts[f"{conn_name}_duplicates"] = len(conn.duplicates)
    check.counts.update(expected_events=expected_total, received_events=received_total, late_events=len(late))
    if late:
        check.note = "appended after the snapshot: " + ", ".join(late[:8])
    return check
