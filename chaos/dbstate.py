"""One consistent read of everything the checks need (a repeatable-read snapshot), and the
shape of a check's result."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import asyncpg

MAX_OFFENDERS = 25
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


@dataclass
class Check:
    number: str
    name: str
    status: str = "PASS"  # PASS | FAIL | SKIP
    counts: dict[str, int] = field(default_factory=dict)
    offending: list[str] = field(default_factory=list)
    note: str = ""

    def fail(self, what: str) -> None:
        self.status = "FAIL"
        if len(self.offending) < MAX_OFFENDERS:
            self.offending.append(what)
        self.counts["offending"] = self.counts.get("offending", 0) + 1


@dataclass
class DbState:
    events: list[dict[str, Any]]
    sessions: dict[str, dict[str, Any]]
    messages: dict[str, list[dict[str, Any]]]  # by session, ordered by seq
    executions: list[dict[str, Any]]
    inputs: list[dict[str, Any]]

    def stream(self, stream_id: str) -> list[dict[str, Any]]:
        return self.by_stream.get(stream_id, [])

    def __post_init__(self) -> None:
        self.by_stream: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for event in self.events:
            self.by_stream[event["stream_id"]].append(event)

    def first(self, stream_id: str, type_: str) -> dict[str, Any] | None:
        return next((e for e in self.stream(stream_id) if e["type"] == type_), None)


def _row(record: asyncpg.Record) -> dict[str, Any]:
    row = dict(record)
    for key, value in row.items():
        if isinstance(value, str) and key in ("payload", "tool_calls") and value[:1] in "[{":
            row[key] = json.loads(value)
        elif isinstance(value, uuid.UUID):
            row[key] = str(value)
    return row


async def load(conn: asyncpg.Connection) -> DbState:
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        events = [
            _row(r)
            for r in await conn.fetch(
                """SELECT position, stream_id, stream_version, type, payload, recorded_at
                   FROM events ORDER BY position"""
            )
        ]
        sessions = {r["session_id"]: r for r in map(_row, await conn.fetch("SELECT * FROM sessions"))}
        messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in map(
            _row,
            await conn.fetch(
                """SELECT message_id, session_id, seq, role, content, tool_calls, tool_call_id, discarded,
                          position FROM messages ORDER BY session_id, seq"""
            ),
        ):
            messages[r["session_id"]].append(r)
        executions = [_row(r) for r in await conn.fetch("SELECT * FROM executions ORDER BY started_at")]
        inputs = [_row(r) for r in await conn.fetch("SELECT * FROM session_inputs ORDER BY position")]
    return DbState(events, sessions, messages, executions, inputs)


def call_ids(message: dict[str, Any]) -> list[str]:
    return [str(c["id"]) for c in message.get("tool_calls") or []]


def is_interrupted(content: str) -> bool:
    try:
        body = json.loads(content)
    except ValueError:
        return False
    return isinstance(body, dict) and str(body.get("error", "")).startswith("interrupted")
