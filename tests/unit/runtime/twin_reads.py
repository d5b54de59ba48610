"""Every read a decision makes through the unit of work, asked of every session, execution,
wait and tool call of a history, normalised (`twin_tables.Normaliser`) so that the answers
of the two units of work compare equal when they agree."""

from __future__ import annotations

from typing import Any

from muster_contracts import events as ev
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from tests.unit.runtime.twin_streams import History
from tests.unit.runtime.twin_tables import Normaliser

WAIT_IDS = ("approval_id", "question_id", "request_id")


async def every_read(uows: UnitOfWorkFactory, history: History) -> dict[str, Any]:
    async with uows() as uow:
        normalise, waits, clients = await _log(uow, history)
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
            reads[f"typed wait {wid}"] = normalise.value("", await uow.lock_wait(wid))
        for sid in history.sessions:
            reads[f"typed {sid}"] = normalise.value("", await _typed_reads(uow, sid, clients))
    async with uows() as uow:  # a lock's reads are answered from the lock (PostgreSQL)
        for sid in history.sessions:
            reads[f"locked {sid}"] = [
                normalise.value("", await uow.lock_session(sid)),
                normalise.value("", await uow.next_queued_input(sid)),
                _by_start(normalise.value("", await uow.executions_of(sid, open_only=True))),
                normalise.value("", await uow.open_execution_of(sid)),
            ]
    return reads


async def _log(uow: AbstractUnitOfWork, history: History) -> tuple[Normaliser, list[Any], list[str]]:
    log, waits, clients = [], [], []
    for stream in [*history.sessions, *history.executions]:
        for stored in await uow.read_stream(str(stream)):
            log.append((stored.position, stored.stream_id, stored.stream_version, stored.recorded_at))
            waits += [getattr(stored.event, n) for n in WAIT_IDS if hasattr(stored.event, n)]
            if isinstance(stored.event, ev.UserMessageQueued) and stored.event.client_message_id:
                clients.append(stored.event.client_message_id)
    return Normaliser(log), list(dict.fromkeys(waits)), clients


async def _typed_reads(uow: AbstractUnitOfWork, sid: Any, clients: list[str]) -> dict[str, Any]:
    """The gateway's and recovery's typed reads (`aggregates/`) of one session."""
    session = await uow.session(sid)
    if session is None:
        return {"session": None}
    count = session.message_count
    visible = [m.message_id for m in await uow.latest_messages(sid, count + 1)]
    return {
        "session": session,
        "owned": await uow.lock_owned_session(session.user_id, sid),
        "foreign": await uow.lock_owned_session("someone else", sid),
        "queued": await uow.queued_inputs(sid),
        "clients": {c: await uow.client_input(sid, c) for c in clients},
        "subagents": await uow.has_subagents(sid),
        "latest": [await uow.latest_messages(sid, n) for n in (0, 2, count + 1)],
        "seqs": {str(m): await uow.message_seq(sid, m) for m in visible},
        "turns": [await uow.turn_up_to(sid, seq) for seq in range(count + 1)],
        "discarded": [await uow.discarded_up_to(sid, seq) for seq in range(count + 1)],
        "compaction": await uow.compaction(sid),
        "tree": await uow.tree_status(sid),
    }


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
