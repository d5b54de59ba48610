"""The projections the in-memory unit of work keeps: the rows decisions read, shaped as the
PostgreSQL projection tables' (`muster_project`, event by event), every column included.
`tests/unit/runtime/test_twin_projections_contract.py` plays the same histories on both
and compares them row for row; PostgreSQL's are the reference."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts import session_events as se

from muster_runtime.store.eventstore import StoredEvent
from muster_runtime.uow.memory_constraints import check_insert
from muster_runtime.uow.memory_sessions import MANAGEMENT, created_row, fork, manage
from muster_runtime.uow.memory_waits import project_wait

Row = dict[str, Any]
EXECUTION_STREAM = (ev.ExecutionStarted, ev.ExecutionFinished, ev.ExecutionDelivered, ev.ExecutionRecovering)


@dataclass
class Tables:
    sessions: dict[UUID, Row] = field(default_factory=dict)
    messages: dict[UUID, Row] = field(default_factory=dict)
    tool_runs: dict[tuple[UUID, str], Row] = field(default_factory=dict)  # by (session, call)
    executions: dict[UUID, Row] = field(default_factory=dict)
    inputs: dict[UUID, Row] = field(default_factory=dict)
    compactions: dict[UUID, Row] = field(default_factory=dict)
    waits: dict[UUID, Row] = field(default_factory=dict)

    def copy(self) -> Tables:
        """A copy a transaction may change: rows are copied, their values are not (the
        projection replaces values, it never mutates them in place)."""
        return Tables(
            sessions={k: dict(v) for k, v in self.sessions.items()},
            messages={k: dict(v) for k, v in self.messages.items()},
            tool_runs=dict(self.tool_runs),  # rows never change once written
            executions={k: dict(v) for k, v in self.executions.items()},
            inputs={k: dict(v) for k, v in self.inputs.items()},
            compactions={k: dict(v) for k, v in self.compactions.items()},
            waits={k: dict(v) for k, v in self.waits.items()},
        )


def project(tables: Tables, stored: StoredEvent) -> None:
    event, at = stored.event, stored.recorded_at
    if isinstance(event, ev.SessionCreated):
        row = created_row(event, stored.stream_version, at)
        check_insert("sessions", tables.sessions.values(), row)
        tables.sessions[event.session_id] = row
        return
    if isinstance(event, EXECUTION_STREAM):
        _project_execution(tables, UUID(stored.stream_id), stored)
        return
    session_id = UUID(stored.stream_id)
    if isinstance(event, ev.MessageRecorded):
        _insert_message(tables, {
            "message_id": event.message_id, "session_id": session_id, "seq": event.seq,
            "role": event.role, "content": event.content,
            "tool_calls": [c.model_dump(mode="json") for c in event.tool_calls] if event.tool_calls else None,
            "tool_call_id": event.tool_call_id,
            "usage": event.usage.model_dump() if event.usage is not None else None,
            "discarded": False, "position": stored.position, "created_at": at, "forked_from": None,
        })  # fmt: skip
        if event.role == "USER" and event.message_id in tables.inputs:
            tables.inputs[event.message_id]["state"] = "CONSUMED"
    elif isinstance(event, ev.UserMessageQueued):
        queued = {
            "message_id": event.message_id, "session_id": session_id, "content": event.content,
            "client_message_id": event.client_message_id, "state": "QUEUED",
            "position": stored.position, "queued_at": at,
        }  # fmt: skip
        check_insert("session_inputs", tables.inputs.values(), queued)
        tables.inputs[event.message_id] = queued
    elif isinstance(event, ev.QueuedMessagesDropped):
        for message_id in event.message_ids:
            if message_id in tables.inputs:
                tables.inputs[message_id]["state"] = "DROPPED"
    elif isinstance(event, ev.MessagesDiscarded):
        for message_id in event.message_ids:
            if message_id in tables.messages:
                tables.messages[message_id]["discarded"] = True
    elif isinstance(event, ev.ToolCallStarted):
        run = {"session_id": session_id, "tool_call_id": event.tool_call_id, "message_id": event.message_id,
               "name": event.name, "started_at": at}  # fmt: skip
        check_insert("tool_runs", tables.tool_runs.values(), run)
        tables.tool_runs[(session_id, event.tool_call_id)] = run
    elif isinstance(event, ev.CompactionRecorded):
        # Kept as `session_state` returns it on PostgreSQL (`row_to_json`): JSON values.
        tables.compactions[session_id] = {
            **event.model_dump(mode="json", exclude={"type", "schema_version"}),
            "session_id": str(session_id),
            "position": stored.position,
            "created_at": at.isoformat(),
        }
    elif isinstance(event, se.SessionForked):
        for copy in fork(tables.messages, session_id, event, stored.position, at):
            _insert_message(tables, copy)
        if session_id in tables.sessions:
            row = tables.sessions[session_id]
            row["message_count"] = max(row["message_count"], event.up_to_seq)
    elif isinstance(event, MANAGEMENT):
        manage(tables.sessions, session_id, event, stored.position)
    else:
        project_wait(tables.waits, tables.sessions, session_id, event, stored.position, at)
    _touch_session(tables, session_id, stored)


def _insert_message(tables: Tables, row: Row) -> None:
    check_insert("messages", tables.messages.values(), row)
    tables.messages[row["message_id"]] = row


def _touch_session(tables: Tables, session_id: UUID, stored: StoredEvent) -> None:
    row = tables.sessions.get(session_id)
    if row is None:
        return
    event = stored.event
    if isinstance(event, ev.MessageRecorded):
        row["message_count"] = max(row["message_count"], event.seq)
    elif isinstance(event, ev.SessionPhaseChanged):
        row["phase"], row["last_error"] = event.phase, event.error
        row["recoveries"] += event.phase == "RESUMING"
        if event.phase in ("COMPLETED", "FAILED"):  # the turn ended: unread until read past it
            row["turn_ended_position"] = stored.position
    row["version"], row["updated_at"] = stored.stream_version, stored.recorded_at


def _project_execution(tables: Tables, execution_id: UUID, stored: StoredEvent) -> None:
    event = stored.event
    if isinstance(event, ev.ExecutionStarted):
        started = {
            **event.model_dump(exclude={"type", "schema_version"}),
            "status": "RUNNING", "delivery_status": "PENDING", "result": None, "error": None,
            "final_message_id": None, "end_message_id": None, "rounds": 0, "tool_calls": 0,
            "usage": {}, "started_at": stored.recorded_at, "ended_at": None,
            "tool_message_id": None, "delivered_at": None, "recoveries": 0, "lease_expiries": 0,
            "version": stored.stream_version,
        }  # fmt: skip
        check_insert("executions", tables.executions.values(), started)
        tables.executions[execution_id] = started
        return
    row = tables.executions.get(execution_id)
    if row is None:
        return
    if isinstance(event, ev.ExecutionFinished):
        row.update(event.model_dump(exclude={"type", "schema_version"}))
        row["usage"], row["ended_at"] = event.usage.model_dump(), stored.recorded_at
    elif isinstance(event, ev.ExecutionRecovering):
        row["status"] = "RECOVERING"
        row["recoveries"] += 1
        row["lease_expiries"] += event.reason == "lease_expired"
    elif isinstance(event, ev.ExecutionDelivered):
        row["delivery_status"], row["tool_message_id"] = event.delivery_status, event.tool_message_id
        row["delivered_at"] = stored.recorded_at
    row["version"] = stored.stream_version
