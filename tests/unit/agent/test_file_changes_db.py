"""Recording file changes in the tool round, against a fresh migrated PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_agent import session_store as store
from muster_agent import tool_round
from muster_agent.agents import AgentRegistry
from muster_agent.file_changes import ChangeRecorder
from muster_agent.file_snapshots import sha256
from muster_contracts import events as ev
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore

from tests.databases import uows


async def running_session(pool: Pool) -> UUID:
    sid = uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(sid), [
            ev.SessionCreated(session_id=sid, user_id="alice", root_session_id=sid),
            ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content="go"),
            ev.SessionPhaseChanged(phase="RUNNING"),
        ])
    return sid


async def run_round(pool: Pool, sid: UUID, tmp_path: Path, calls: list[dict[str, Any]]) -> tuple[bool, UUID]:
    state = await store.read_state(uows(pool), sid)
    assert state is not None
    deps = SimpleNamespace(uows=uows(pool), workspaces=tmp_path, agents=AgentRegistry.load(), delegation=None)
    message_id = uuid4()
    calls = [{**c, "arguments": json.dumps(c["arguments"])} for c in calls]  # the model's text
    specs = [ev.ToolCallSpec(**c) for c in calls]

    def answer(seq: int) -> ev.MessageRecorded:
        return ev.MessageRecorded(message_id=message_id, seq=seq, role="ASSISTANT", content="", tool_calls=specs)

    ok = await tool_round.run_local_calls(deps, state, message_id, 2, calls, lead=[answer])
    return ok, message_id


async def test_each_change_commits_with_its_tool_result_and_its_blobs(pool: Pool, tmp_path: Path) -> None:
    sid = await running_session(pool)
    ok, message_id = await run_round(pool, sid, tmp_path, [
        {"id": "w", "name": "write_file", "arguments": {"path": "n.txt", "content": "one\n"}},
        {"id": "r", "name": "read_file", "arguments": {"path": "n.txt"}},
        {"id": "e", "name": "edit_file", "arguments": {"path": "n.txt", "old_string": "one", "new_string": "two"}},
    ])
    assert ok
    rows = await pool.fetch("SELECT type, payload, recorded_at FROM events WHERE stream_id = $1 ORDER BY position",
                            str(sid))
    kinds = [r["type"] if r["type"] != "MessageRecorded" else r["payload"]["role"] for r in rows][3:]
    assert kinds == ["ASSISTANT", "ToolCallStarted", "TOOL", "FileChanged", "ToolCallStarted", "TOOL",
                     "ToolCallStarted", "TOOL", "FileChanged"]
    tool, change = rows[5], rows[6]
    assert tool["recorded_at"] == change["recorded_at"]  # one append: one transaction
    changes = await pool.fetch("SELECT * FROM file_changes WHERE session_id = $1 ORDER BY position", sid)
    assert [(c["path"], c["change_type"], c["message_id"], c["message_seq"], c["tool_call_id"]) for c in changes] == [
        ("n.txt", "CREATED", message_id, 2, "w"), ("n.txt", "MODIFIED", message_id, 2, "e")]
    assert changes[1]["before_sha256"] == sha256("one\n") == changes[0]["after_sha256"]
    digests = [c[k] for c in changes for k in ("diff_sha256", "before_sha256", "after_sha256") if c[k]]
    stored = await pool.fetch("SELECT sha256, content FROM blobs WHERE sha256 = ANY($1::text[])", digests)
    assert len(stored) == len(set(digests)) == 4
    assert {r["sha256"]: r["content"] for r in stored}[changes[1]["after_sha256"]] == "two\n"


async def test_a_change_is_kept_when_the_session_stopped_while_the_tool_ran(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await running_session(pool)
    real = ChangeRecorder.run

    async def cancelled_meanwhile(*args: Any) -> Any:
        outcome = await real(*args)
        async with uows(pool)() as uow:
            await uow.lock_session(sid)
            await uow.append(str(sid), [ev.SessionPhaseChanged(phase="CANCELLED")], expected_version=None)
        return outcome

    monkeypatch.setattr(ChangeRecorder, "run", cancelled_meanwhile)
    ok, message_id = await run_round(pool, sid, tmp_path, [
        {"id": "w", "name": "write_file", "arguments": {"path": "late.txt", "content": "late\n"}},
        {"id": "x", "name": "write_file", "arguments": {"path": "never.txt", "content": "no\n"}},
    ])
    assert not ok
    assert not (tmp_path / str(sid) / "never.txt").exists()
    roles = await pool.fetch("SELECT role FROM messages WHERE session_id = $1 ORDER BY seq", sid)
    assert [r["role"] for r in roles] == ["USER", "ASSISTANT"]  # the result itself is dropped
    changes = await pool.fetch("SELECT path, message_id, after_sha256 FROM file_changes WHERE session_id = $1", sid)
    assert [(c["path"], c["message_id"]) for c in changes] == [("late.txt", message_id)]
    assert await pool.fetchval("SELECT content FROM blobs WHERE sha256 = $1", changes[0]["after_sha256"]) == "late\n"
