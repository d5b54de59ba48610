"""The unique constraints of PostgreSQL's projection tables, kept by the in-memory twin:
decisions rely on them instead of checking first (a retried `clientMessageId` is refused
by `session_inputs_client_key`, a second execution of one tool call by
`executions_parent_call_key`), so the twin refuses the same inserts with the same error —
`DuplicateKey` for the keys decisions handle (`DuplicateKey.KEYS`), as `PostgresUnitOfWork`
raises it, else PostgreSQL's `UniqueViolation` with the constraint's name — and the
decision's transaction is rolled back as on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from muster_runtime.process.db import UniqueViolation
from muster_runtime.uow.unit_of_work import DuplicateKey

Row = dict[str, Any]

# Per table: each constraint's name and its columns (a NULL in one never conflicts).
UNIQUE: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "sessions": (("sessions_pkey", ("session_id",)),),
    "messages": (("messages_pkey", ("message_id",)), ("messages_session_seq_key", ("session_id", "seq"))),
    "session_inputs": (
        ("session_inputs_pkey", ("message_id",)),
        ("session_inputs_client_key", ("session_id", "client_message_id")),
    ),
    "tool_runs": (("tool_runs_pkey", ("session_id", "tool_call_id")),),
    "executions": (
        ("executions_pkey", ("execution_id",)),
        ("executions_parent_call_key", ("parent_session_id", "parent_tool_call_id")),
    ),
}


def violation(constraint: str) -> Exception:
    if constraint in DuplicateKey.KEYS:
        return DuplicateKey(constraint)
    error: Exception = UniqueViolation(f'duplicate key value violates unique constraint "{constraint}"')
    error.constraint_name = constraint  # type: ignore[attr-defined]  # as the server's error carries it
    return error


def check_insert(table: str, rows: Iterable[Row], new: Row) -> None:
    """Raise as PostgreSQL would if inserting `new` into `rows` broke a unique constraint."""
    existing = list(rows)
    for constraint, columns in UNIQUE[table]:
        key = tuple(new[c] for c in columns)
        if None in key:
            continue
        if any(tuple(r[c] for c in columns) == key for r in existing):
            raise violation(constraint)

