"""The read models of both units of work, as comparable rows: PostgreSQL's projection
tables and the in-memory twin's `Tables`, restricted to one history's sessions and
executions and normalised where the two must differ.

Two things must differ and nothing else is touched:
- positions: each backend numbers its own log (and PostgreSQL's numbers are shared by every
  history a test plays in one database), so a position becomes the `(stream, version)` of
  the event that has it;
- times: each backend stamps its own appends, so a time becomes the rank of the append that
  recorded it (a clock that never repeats itself, `ticking_clock`, makes the ranks exact).
Ids become strings: the twin keeps the compaction as PostgreSQL's `row_to_json` gives it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, tzinfo
from typing import Any
from uuid import UUID

import pytest
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore
from muster_runtime.uow import memory_uow
from muster_runtime.uow.memory_uow import MemoryStore

Rows = dict[Any, dict[str, Any]]

# Each read model: its key, and how its rows belong to a history (by session or execution).
KEYS: dict[str, tuple[str, ...]] = {
    "sessions": ("session_id",),
    "messages": ("message_id",),
    "session_inputs": ("message_id",),
    "tool_runs": ("session_id", "tool_call_id"),
    "executions": ("execution_id",),
    "compactions": ("session_id",),
    "session_waits": ("wait_id",),
}
TWIN_NAMES = {"session_inputs": "inputs", "session_waits": "waits"}
POSITIONS = {"position", "turn_ended_position", "read_position"}
TIMES = {"created_at", "updated_at", "started_at", "ended_at", "queued_at", "resolved_at", "delivered_at"}


@contextlib.contextmanager
def ticking_clock() -> Iterator[None]:
    """Both units of work stamp each append with `datetime.now`; this one never gives the
    same instant twice, so two appends never share a time in one backend and not the other."""
    last: list[datetime] = []

    class Ticking(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
            now = datetime.now(tz)
            if last and now <= last[-1]:
                now = last[-1] + timedelta(microseconds=1)
            last[:] = [now]
            return now

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory_uow, "datetime", Ticking)
        patch.setattr(eventstore, "datetime", Ticking)
        yield


class Normaliser:
    def __init__(self, log: Iterable[tuple[int, str, int, datetime]]) -> None:
        events = list(log)
        self.positions = {position: (stream, version) for position, stream, version, _ in events}
        instants = sorted({at for *_, at in events})
        self.times = {at: ("append", rank) for rank, at in enumerate(instants)}

    def value(self, column: str, value: Any) -> Any:
        if value is None:
            return None
        if column in POSITIONS:
            return self.positions.get(value, ("unknown position", value))
        if column in TIMES:
            at = datetime.fromisoformat(value) if isinstance(value, str) else value
            return self.times.get(at, ("unknown time", value))
        if isinstance(value, UUID):
            return str(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):  # the typed reads
            return self.value(column, dataclasses.asdict(value))
        if isinstance(value, tuple):
            return [self.value("", v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value("", v) for v in value]
        return value

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {column: self.value(column, value) for column, value in row.items()}

    def rows(self, table: str, rows: Iterable[dict[str, Any]]) -> Rows:
        normalised = [self.row(r) for r in rows]
        return {tuple(r[k] for k in KEYS[table]): r for r in normalised}


def _belongs(table: str, row: dict[str, Any], sessions: set[str], executions: set[str]) -> bool:
    if table == "executions":
        return str(row["execution_id"]) in executions
    return str(row["session_id"]) in sessions


async def postgres_tables(pool: Pool, sessions: list[UUID], executions: list[UUID]) -> dict[str, Rows]:
    streams = [str(s) for s in [*sessions, *executions]]
    log = await pool.fetch(
        "SELECT position, stream_id, stream_version, recorded_at FROM events WHERE stream_id = ANY($1)", streams
    )
    normalise = Normaliser(tuple(r) for r in log)
    tables = {}
    for table in KEYS:
        column = "execution_id" if table == "executions" else "session_id"
        ids = executions if table == "executions" else sessions
        rows = await pool.fetch(f"SELECT * FROM {table} WHERE {column} = ANY($1::uuid[])", ids)
        tables[table] = normalise.rows(table, (dict(r) for r in rows))
    return tables


def twin_tables(store: MemoryStore, sessions: list[UUID], executions: list[UUID]) -> dict[str, Rows]:
    state = store.state
    streams = {str(s) for s in [*sessions, *executions]}
    log = (
        (e.position, e.stream_id, e.stream_version, e.recorded_at)
        for stream in streams
        for e in state.streams.get(stream, [])
    )
    normalise = Normaliser(log)
    wanted_sessions, wanted_executions = {str(s) for s in sessions}, {str(e) for e in executions}
    tables = {}
    for table in KEYS:
        kept = getattr(state.tables, TWIN_NAMES.get(table, table))
        rows = [dict(r) for r in kept.values()]
        belonging = [r for r in rows if _belongs(table, r, wanted_sessions, wanted_executions)]
        tables[table] = normalise.rows(table, belonging)
    return tables


def differences(twin: Any, postgres: Any, path: str = "") -> list[str]:
    """Where two normalised values differ, one line per leaf: `path: twin != postgres`."""
    if isinstance(twin, dict) and isinstance(postgres, dict):
        found = []
        for key in sorted({*twin, *postgres}, key=str):
            if key not in twin or key not in postgres:
                found.append(f"{path}/{key}: only in {'postgres' if key in postgres else 'the twin'}")
            else:
                found += differences(twin[key], postgres[key], f"{path}/{key}")
        return found
    if isinstance(twin, list) and isinstance(postgres, list) and len(twin) == len(postgres):
        return [d for i, (a, b) in enumerate(zip(twin, postgres, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if twin == postgres else [f"{path}: {twin!r} != {postgres!r}"]
