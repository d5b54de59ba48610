"""Every read a decision makes through the unit of work, asked of every session, execution,
wait and tool call of a history, normalised (`twin_tables.Normaliser`) so that the answers
of the two units of work compare equal when they agree."""

from __future__ import annotations

from typing import Any

from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from tests.unit.runtime.twin_streams import History
from tests.unit.runtime.twin_tables import Normaliser

WAIT_IDS = ("approval_id", "question_id", "request_id")


async def every_read(uows: UnitOfWorkFactory, history: History) -> dict[str, Any]:
    async with uows() as uow:
        normalise, waits = await _log(uow, history)
        reads: dict[str, Any] = {}
        for sid in history.sessions:
            reads[f"session {sid}"] = await _session_reads(uow, normalise, sid)
        for stream in [*history.sessions, *history.executions]:
            events = await uow.read_stream(str(stream))
            # Each backend has its own event ids and lineage: the stream is what was written.
            reads[f"stream {stream}"] = [(e.stream_version, e.type, e.event.payload()) for e in events]
            reads[f"version {stream}"] = await uow.current_version(str(stream))
        for eid in history.executions:
            reads[f"execution {eid}"] = normalise.value("", await uow.execution(eid))
            reads[f"locked execution {eid}"] = normalise.value("", await uow.execution(eid, lock=True))
        for wid in waits:
            reads[f"wait {wid}"] = normalise.value("", await uow.wait(wid))
            reads[f"locked wait {wid}"] = normalise.value("", await uow.wait(wid, lock=True))
    async with uows() as uow:  # a lock's reads are answered from the lock (PostgreSQL)
        for sid in history.sessions:
            reads[f"locked {sid}"] = [
                normalise.value("", await uow.lock_session(sid)),
                normalise.value("", await uow.next_queued_input(sid)),
                _by_start(normalise.value("", await uow.executions_of(sid, open_only=True))),
                normalise.value("", await uow.open_execution_of(sid)),
            ]
    return reads


async def _log(uow: AbstractUnitOfWork, history: History) -> tuple[Normaliser, list[Any]]:
    log, waits = [], []
    for stream in [*history.sessions, *history.executions]:
        for stored in await uow.read_stream(str(stream)):
            log.append((stored.position, stored.stream_id, stored.stream_version, stored.recorded_at))
            waits += [getattr(stored.event, n) for n in WAIT_IDS if hasattr(stored.event, n)]
    return Normaliser(log), list(dict.fromkeys(waits))


async def _session_reads(uow: AbstractUnitOfWork, normalise: Normaliser, sid: Any) -> dict[str, Any]:
    state = await uow.session_state(sid)
    calls: set[str] = set()
    if state is not None:
        for m in state.messages:
            calls |= {c["id"] for c in m["tool_calls"] or []} | ({m["tool_call_id"]} - {None})
    pending = await uow.pending_waits(sid)
    calls |= {w["tool_call_id"] for w in pending}
    return {
        "state": None
        if state is None
        else {
            "row": normalise.row(state.row),
            "messages": normalise.value("", state.messages),
            "started": sorted(state.started_tool_calls),
            "compaction": normalise.value("", state.compaction),
        },
        "queued": normalise.value("", await uow.next_queued_input(sid)),
        "pending waits": normalise.value("", pending),
        "tool results": {c: await uow.tool_result(sid, c) for c in sorted(calls)},
        "call waits": {c: normalise.value("", await uow.call_wait(sid, c)) for c in sorted(calls)},
        "executions": _by_start(normalise.value("", await uow.executions_of(sid))),
        "open executions": _by_start(normalise.value("", await uow.executions_of(sid, open_only=True))),
        "undelivered": _by_start(normalise.value("", await uow.undelivered_executions(sid))),
        "runs": normalise.value("", await uow.runs_of(sid)),
        "open run": normalise.value("", await uow.open_execution_of(sid)),
    }


def _by_start(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Executions come by start time; PostgreSQL leaves the order of those started in one
    append (the same time) open, so within one time they are put in id order here."""
    starts = [r["started_at"] for r in rows]
    assert starts == sorted(starts), "executions by start time"
    return sorted(rows, key=lambda r: (r["started_at"], r["execution_id"]))
