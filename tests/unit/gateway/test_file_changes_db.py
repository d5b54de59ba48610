"""Attribution of file changes against a fresh migrated PostgreSQL, with sessions, executions
and changes written as events (or, for rows an older version wrote, directly)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_gateway import file_changes, queries
from muster_runtime.process.db import Connection, Pool
from muster_runtime.store import eventstore

USER = "alice"
T = datetime(2026, 1, 1, tzinfo=UTC)


async def append(pool: Pool, stream: UUID, *events: ev.DomainEvent) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(stream), list(events))


@dataclass
class Session:
    """Builds a session's history: messages get the next seq, changes the last ASSISTANT's."""

    pool: Pool
    session_id: UUID = field(default_factory=uuid4)
    seq: int = 0
    last_assistant: tuple[UUID, int] | None = None

    async def create(self, session_type: str = "NORMAL", parent: UUID | None = None,
                     root: UUID | None = None, agent_type: str = "general") -> Session:
        await append(self.pool, self.session_id, ev.SessionCreated(
            session_id=self.session_id, user_id=USER, session_type=session_type,  # type: ignore[arg-type]
            parent_session_id=parent, root_session_id=root or self.session_id, agent_type=agent_type))
        return self

    async def message(self, role: str, *calls: tuple[str, str], message_id: UUID | None = None) -> UUID:
        self.seq += 1
        mid = message_id or uuid4()
        specs = [ev.ToolCallSpec(id=cid, name=name, arguments="{}") for name, cid in calls] or None
        await append(self.pool, self.session_id, ev.MessageRecorded(
            message_id=mid, seq=self.seq, role=role, content=role.lower(), tool_calls=specs))  # type: ignore[arg-type]
        if role == "ASSISTANT":
            self.last_assistant = (mid, self.seq)
        return mid

    async def change(self, path: str, kind: str = "MODIFIED") -> UUID:
        assert self.last_assistant is not None
        row = await self.pool.fetchrow("SELECT session_type, agent_type FROM sessions WHERE session_id = $1",
                                       self.session_id)
        change_id = uuid4()
        diff = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x\n+{change_id}\n"
        digest = f"diff-{change_id}"
        await self.pool.execute("INSERT INTO blobs (sha256, content, size) VALUES ($1, $2, $3)",
                                digest, diff, len(diff))
        await append(self.pool, self.session_id, ev.FileChanged(
            change_id=change_id, message_id=self.last_assistant[0], message_seq=self.last_assistant[1],
            tool_call_id=f"w-{change_id}", path=path, change_type=kind, lines_added=1,  # type: ignore[arg-type]
            lines_deleted=1, diff_sha256=digest, session_type=row["session_type"],
            agent_type=row["agent_type"]))
        return change_id


async def execution(pool: Pool, parent: Session, call_id: str | None, child: Session, start: UUID,
                    end: UUID | None, round_: int = 1) -> UUID:
    """An executions row as any version wrote it (NULL `parent_tool_call_id` for old ones)."""
    execution_id = uuid4()
    await pool.execute(
        """INSERT INTO executions (execution_id, parent_session_id, parent_tool_call_id, child_session_id,
               user_id, agent_type, invocation_type, task, round, status, delivery_status,
               start_message_id, end_message_id, started_at, deadline_at, version)
           VALUES ($1, $2, $3, $4, 'alice', 'coder', 'DELEGATE', 't', $5, $6, 'PENDING', $7, $8, $9, $9, 1)""",
        execution_id, parent.session_id, call_id, child.session_id, round_,
        "COMPLETED" if end else "RUNNING", start, end, T)
    return execution_id


async def messages(pool: Pool, session: Session, **params: Any) -> list[dict[str, Any]]:
    page = await queries.list_messages(pool, USER, str(session.session_id), rounds=params.pop("rounds", 100),
                                       before_seq=params.pop("before_seq", None), include_discarded=False)
    return list(page["items"])


def listed(items: Sequence[dict[str, Any]]) -> list[list[tuple[str, str, str | None]]]:
    return [[(c["path"], c["sourceType"], c["parentToolCallId"]) for c in m["fileChanges"]]
            for m in items if m["role"] == "ASSISTANT"]


async def summary_paths(pool: Pool, session: Session, message_id: UUID) -> list[str]:
    body = await queries.round_file_changes(pool, USER, str(session.session_id), str(message_id))
    return [item["path"] for item in body["items"]]


async def test_side_task_changes_never_appear_under_the_main_sessions_turns(pool: Pool) -> None:
    main = await Session(pool).create()
    user = await main.message("USER")
    await main.message("ASSISTANT", ("write_file", "w1"))
    await main.change("main.txt")
    side = await Session(pool).create("SIDE_TASK", parent=main.session_id, root=main.session_id)
    await side.message("USER")
    side_round = await side.message("ASSISTANT", ("write_file", "w1"))
    await side.change("side.txt")
    assert listed(await messages(pool, main)) == [[("main.txt", "MAIN", None)]]
    assert await summary_paths(pool, main, user) == ["main.txt"]
    assert listed(await messages(pool, side)) == [[("side.txt", "MAIN", None)]]
    assert await summary_paths(pool, side, side_round) == ["side.txt"]


async def test_executions_without_a_parent_tool_call_id_are_skipped(pool: Pool) -> None:
    main = await Session(pool).create()
    user = await main.message("USER")
    await main.message("ASSISTANT", ("delegate", "d-old"))
    child = await Session(pool).create("SUBAGENT", parent=main.session_id, root=main.session_id)
    start = await child.message("USER")
    await child.message("ASSISTANT")
    await child.change("legacy.txt")
    end = await child.message("ASSISTANT")
    await execution(pool, main, None, child, start, end)  # written before parent_tool_call_id existed
    await execution(pool, main, "d-nostart", child, uuid4(), None)  # a start message that is not there
    assert listed(await messages(pool, main)) == [[]]
    assert await summary_paths(pool, main, user) == []


async def test_followups_and_pages_get_only_their_own_executions(pool: Pool) -> None:
    main = await Session(pool).create()
    child = await Session(pool).create("SUBAGENT", parent=main.session_id, root=main.session_id, agent_type="coder")
    turn1 = await main.message("USER")
    await main.message("ASSISTANT", ("write_file", "w1"), ("delegate", "d1"))
    await main.change("own1.txt")
    start1 = await child.message("USER")
    await child.message("ASSISTANT")
    await child.change("run1-a.txt")
    await child.message("ASSISTANT")
    await child.change("run1-b.txt")
    end1 = await child.message("ASSISTANT")
    await execution(pool, main, "d1", child, start1, end1)
    await main.message("ASSISTANT")
    turn2 = await main.message("USER")
    await main.message("ASSISTANT", ("delegate_followup", "d2"))
    start2 = await child.message("USER")
    await child.message("ASSISTANT")
    await child.change("run2.txt")
    await execution(pool, main, "d2", child, start2, None, round_=2)  # still running: no end yet

    assert listed(await messages(pool, main)) == [
        [("own1.txt", "MAIN", None), ("run1-a.txt", "SUBAGENT", "d1"), ("run1-b.txt", "SUBAGENT", "d1")], [],
        [("run2.txt", "SUBAGENT", "d2")]]
    assert await summary_paths(pool, main, turn1) == ["own1.txt", "run1-a.txt", "run1-b.txt"]
    assert await summary_paths(pool, main, turn2) == ["run2.txt"]
    # the child's page: its own changes only, each on its own message
    assert listed(await messages(pool, child)) == [
        [("run1-a.txt", "SUBAGENT", None)], [("run1-b.txt", "SUBAGENT", None)], [], [("run2.txt", "SUBAGENT", None)]]

    newest = await queries.list_messages(pool, USER, str(main.session_id), rounds=1, before_seq=None,
                                         include_discarded=False)
    assert listed(newest["items"]) == [[("run2.txt", "SUBAGENT", "d2")]]
    older = await queries.list_messages(pool, USER, str(main.session_id), rounds=1,
                                        before_seq=newest["nextBeforeSeq"], include_discarded=False)
    assert [c[0] for c in listed(older["items"])[0]] == ["own1.txt", "run1-a.txt", "run1-b.txt"]

    # Only the executions of the page's tool calls are asked for.
    spy = Spy(pool)
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT * FROM messages WHERE session_id = $1 AND seq < $2 ORDER BY seq",
                                main.session_id, newest["nextBeforeSeq"])
        spy.conn = conn
        found = await file_changes.changes_by_message(spy, main.session_id, rows)  # type: ignore[arg-type]
    assert [args[1] for query, args in spy.calls if "FROM executions" in query] == [["d1"]]
    assert sum(len(v) for v in found.values()) == 3


async def test_an_execution_left_without_an_end_stops_at_the_childs_next_run(pool: Pool) -> None:
    main = await Session(pool).create()
    child = await Session(pool).create("SUBAGENT", parent=main.session_id, root=main.session_id)
    await main.message("USER")
    await main.message("ASSISTANT", ("delegate", "d1"))
    start1 = await child.message("USER")
    await child.message("ASSISTANT")
    await child.change("first.txt")
    await execution(pool, main, "d1", child, start1, None)  # an old run that never recorded an end
    await main.message("USER")
    await main.message("ASSISTANT", ("delegate_followup", "d2"))
    start2 = await child.message("USER")
    await child.message("ASSISTANT")
    await child.change("second.txt")
    end2 = await child.message("ASSISTANT")
    await execution(pool, main, "d2", child, start2, end2, round_=2)
    assert listed(await messages(pool, main)) == [[("first.txt", "SUBAGENT", "d1")], [("second.txt", "SUBAGENT", "d2")]]


async def test_summary_of_an_unknown_message_is_not_found(pool: Pool) -> None:
    main = await Session(pool).create()
    await main.message("USER")
    for raw in (str(uuid4()), "not-a-uuid"):
        try:
            await queries.round_file_changes(pool, USER, str(main.session_id), raw)
        except Exception as exc:  # GatewayError
            assert getattr(exc, "code", None) == "not_found"
        else:
            raise AssertionError("expected not_found")


async def test_the_projection_rebuilds_from_events_alone(pool: Pool) -> None:
    main = await Session(pool).create()
    await main.message("USER")
    await main.message("ASSISTANT")
    await main.change("r1.txt", "CREATED")
    await main.change("r2.txt", "DELETED")
    sid = main.session_id
    async with pool.acquire() as conn:
        live = [dict(r) for r in await conn.fetch("SELECT * FROM file_changes WHERE session_id = $1 ORDER BY position", sid)]
        tr = conn.transaction()
        await tr.start()
        try:
            await conn.execute("DELETE FROM file_changes WHERE session_id = $1", sid)
            for stored in await eventstore.read_stream(conn, str(sid)):
                if stored.type == "FileChanged":  # the live projector, one event at a time
                    await conn.execute("SELECT muster_project($1, $2, $2)", str(sid), stored.position)
            rebuilt = [dict(r) for r in await conn.fetch(
                "SELECT * FROM file_changes WHERE session_id = $1 ORDER BY position", sid)]
        finally:
            await tr.rollback()
    assert len(live) == 2 and rebuilt == live


class Spy:
    """A connection stand-in that records the queries it forwards."""

    def __init__(self, pool: Pool) -> None:
        self.conn: Connection | None = None
        self.calls: list[tuple[str, list[Any]]] = []

    async def fetch(self, query: str, *args: Any) -> Any:
        assert self.conn is not None
        self.calls.append((query, list(args)))
        return await self.conn.fetch(query, *args)
