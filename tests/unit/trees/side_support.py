"""Helpers for the side-task database tests: histories written as events, side tasks
created through the gateway's decision."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

from muster_agent.agents import AgentRegistry
from muster_agent.context import model_messages
from muster_agent.session_store import read_state
from muster_contracts import events as ev
from muster_gateway import side_sessions
from muster_gateway.protocol import CreateSideSessionData
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from tests.databases import uows

USER = "alice"


async def append(pool: Pool, stream: UUID, *events: ev.DomainEvent) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append(conn, str(stream), list(events))


async def main_session(pool: Pool, user: str = USER) -> UUID:
    sid = uuid4()
    await append(pool, sid, ev.SessionCreated(session_id=sid, user_id=user, root_session_id=sid))
    return sid


def user(seq: int, content: str) -> ev.MessageRecorded:
    return ev.MessageRecorded(message_id=uuid4(), seq=seq, role="USER", content=content)


def answer(seq: int, content: str, *calls: str) -> ev.MessageRecorded:
    specs = [ev.ToolCallSpec(id=c, name="read_file", arguments=json.dumps({"path": "a"})) for c in calls]
    return ev.MessageRecorded(
        message_id=uuid4(), seq=seq, role="ASSISTANT", content=content, tool_calls=specs or None
    )


def tool(seq: int, call: str) -> ev.MessageRecorded:
    return ev.MessageRecorded(message_id=uuid4(), seq=seq, role="TOOL", content="{}", tool_call_id=call)


async def conversation(pool: Pool, sid: UUID, turns: int, start: int = 1) -> list[ev.MessageRecorded]:
    """`turns` USER/ASSISTANT pairs from seq `start`."""
    messages = []
    for i in range(turns):
        seq = start + 2 * i
        messages += [user(seq, f"question {seq} " + "x" * 400), answer(seq + 1, f"answer {seq + 1}")]
    await append(pool, sid, *messages)
    return messages


async def side(pool: Pool, source: UUID, who: str = USER, **data: Any) -> UUID:
    data.setdefault("content", "side question")
    ack = await side_sessions.create_side_session(uows(pool), who, str(source), CreateSideSessionData(**data))
    return UUID(ack["sessionId"])


async def context(pool: Pool, sid: UUID) -> list[dict[str, Any]]:
    state = await read_state(lambda: PostgresUnitOfWork(pool), sid)
    assert state is not None
    return model_messages(AgentRegistry.load().get(state.agent_type), state)

