"""A realistic event log for the rebuild benchmark, appended through `eventstore.append`
one decision per transaction (docs/architecture.md, "One transaction per decision"): a
parent turn that delegates to two children which write files, with the occasional queued
input dropped, crash tail discarded, resume and execution recovery."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_runtime.process import retrying
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore


def _calls(*names: str) -> list[ev.ToolCallSpec]:
    return [
        ev.ToolCallSpec(id=f"call-{n}", name=n, arguments=json.dumps({"path": f"{n}.txt", "mode": "w"})) for n in names
    ]


def _usage(rng: random.Random) -> ev.TokenUsage:
    return ev.TokenUsage(prompt_tokens=rng.randint(100, 4000), completion_tokens=rng.randint(5, 400))


class Conversation:
    """One root session's delegated turn; `events` counts what it appended."""

    def __init__(self, pool: Pool, rng: random.Random) -> None:
        self.pool, self.rng, self.events = pool, rng, 0

    async def append(self, stream: UUID, *events: ev.DomainEvent) -> None:
        async def append() -> None:
            async with self.pool.acquire() as conn, conn.transaction():
                await eventstore.append(conn, str(stream), list(events), metadata={"user_id": "bench"})

        # The two children report to their parent concurrently: reload and retry.
        await retrying.call(retrying.unlimited(eventstore.ConcurrencyError), append)
        self.events += len(events)

    async def run(self) -> None:
        rng, parent = self.rng, uuid4()
        first, later = uuid4(), uuid4()
        await self.append(
            parent,
            ev.SessionCreated(
                session_id=parent, user_id="bench", root_session_id=parent, title="bench", model_id="scripted"
            ),
            ev.UserMessageQueued(message_id=first, client_message_id=str(first), content="do it"),
        )
        await self.append(
            parent,
            ev.MessageRecorded(message_id=first, seq=1, role="USER", content="do it"),
            ev.SessionPhaseChanged(phase="RUNNING"),
        )
        seq = 1
        if rng.random() < 0.2:  # a crash tail: discarded, then the session resumes
            stale = uuid4()
            await self.append(
                parent, ev.MessageRecorded(message_id=stale, seq=2, role="ASSISTANT", content="half")
            )
            await self.append(
                parent,
                ev.SessionPhaseChanged(phase="RESUMING"),
                ev.MessagesDiscarded(message_ids=[stale], reason="incomplete tail"),
                ev.SessionPhaseChanged(phase="RUNNING"),
            )
            seq = 2
        if rng.random() < 0.3:
            await self.append(
                parent, ev.UserMessageQueued(message_id=later, client_message_id="later", content="x")
            )
        answer, seq = uuid4(), seq + 1
        await self.append(
            parent,
            ev.MessageRecorded(
                message_id=answer,
                seq=seq,
                role="ASSISTANT",
                content="",
                tool_calls=_calls("delegate-a", "delegate-b"),
                usage=_usage(rng),
            ),
        )
        children = [(uuid4(), uuid4(), f"call-delegate-{x}") for x in "ab"]
        for child, execution, call in children:
            start = uuid4()
            await self.append(
                child,
                ev.SessionCreated(
                    session_id=child,
                    user_id="bench",
                    session_type="SUBAGENT",
                    parent_session_id=parent,
                    root_session_id=parent,
                    agent_type="coder",
                ),
                ev.MessageRecorded(message_id=start, seq=1, role="USER", content="task " * 20),
                ev.SessionPhaseChanged(phase="RUNNING"),
            )
            await self.append(
                execution,
                ev.ExecutionStarted(
                    execution_id=execution,
                    parent_session_id=parent,
                    parent_tool_call_id=call,
                    parent_message_id=answer,
                    child_session_id=child,
                    user_id="bench",
                    agent_type="coder",
                    invocation_type="DELEGATE",
                    task="task " * 20,
                    round=1,
                    start_message_id=start,
                    deadline_at=datetime.now(UTC) + timedelta(hours=1),
                ),
            )
            await self.append(
                parent,
                ev.ToolCallStarted(message_id=answer, tool_call_id=call, name="delegate"),
                ev.SubagentSessionCreated(
                    child_session_id=child, tool_call_id=call, agent_type="coder", execution_id=execution
                ),
                ev.ExecutionStatusChanged(
                    execution_id=execution, status="RUNNING", delivery_status="PENDING"
                ),
            )
        await asyncio.gather(*(self.child(parent, *c) for c in children))
        for _child, execution, call in children:
            tool_result, seq = uuid4(), seq + 1
            await self.append(
                execution, ev.ExecutionDelivered(delivery_status="DELIVERED", tool_message_id=tool_result)
            )
            await self.append(
                parent,
                ev.MessageRecorded(
                    message_id=tool_result,
                    seq=seq,
                    role="TOOL",
                    content='{"result": "done"}',
                    tool_call_id=call,
                ),
                ev.ExecutionStatusChanged(
                    execution_id=execution, status="COMPLETED", delivery_status="DELIVERED"
                ),
            )
        final = [
            ev.MessageRecorded(
                message_id=uuid4(), seq=seq + 1, role="ASSISTANT", content="all done " * 10, usage=_usage(rng)
            ),
            ev.SessionPhaseChanged(phase="COMPLETED"),
        ]
        if rng.random() < 0.3:
            final.insert(0, ev.QueuedMessagesDropped(message_ids=[later], reason="cancelled"))
        await self.append(parent, *final)

    async def child(self, parent: UUID, child: UUID, execution: UUID, call: str) -> None:
        rng, seq = self.rng, 1
        for round_ in range(1, rng.randint(2, 4)):
            answer = uuid4()
            name = f"write_file_{round_}"
            await self.append(
                child,
                ev.MessageRecorded(
                    message_id=answer,
                    seq=seq + 1,
                    role="ASSISTANT",
                    content="",
                    tool_calls=_calls(name),
                    usage=_usage(rng),
                ),
                ev.ToolCallStarted(message_id=answer, tool_call_id=f"call-{name}", name="write_file"),
            )
            await self.append(
                child,
                ev.MessageRecorded(
                    message_id=uuid4(),
                    seq=seq + 2,
                    role="TOOL",
                    content='{"ok": true}',
                    tool_call_id=f"call-{name}",
                ),
                ev.FileChanged(
                    change_id=uuid4(),
                    message_id=answer,
                    message_seq=seq + 1,
                    tool_call_id=f"call-{name}",
                    path=f"src/{name}.py",
                    change_type="MODIFIED",
                    lines_added=rng.randint(0, 50),
                    lines_deleted=rng.randint(0, 20),
                    diff_sha256="d" * 64,
                    before_sha256="b" * 64,
                    after_sha256="a" * 64,
                    before_size=100,
                    after_size=120,
                    session_type="SUBAGENT",
                    agent_type="coder",
                ),
            )
            seq += 2
        if rng.random() < 0.1:
            await self.append(execution, ev.ExecutionRecovering(reason="lease_expired"))
        final = uuid4()
        await self.append(
            child,
            ev.MessageRecorded(
                message_id=final, seq=seq + 1, role="ASSISTANT", content="wrote the files", usage=_usage(rng)
            ),
            ev.SessionPhaseChanged(phase="COMPLETED"),
        )
        await self.append(
            execution,
            ev.ExecutionFinished(
                status="COMPLETED",
                result="wrote the files",
                final_message_id=final,
                end_message_id=final,
                rounds=seq // 2,
                tool_calls=seq // 2,
                usage=_usage(rng),
            ),
        )
        await self.append(
            parent,
            ev.ExecutionStatusChanged(execution_id=execution, status="COMPLETED", delivery_status="PENDING"),
        )


async def fill(pool: Pool, events: int, *, workers: int = 6, seed: int = 9) -> int:
    """Run conversations on `workers` concurrent tasks until `events` have been appended."""
    done = 0

    async def worker(index: int) -> None:
        nonlocal done
        rng = random.Random(seed * 1000 + index)
        while done < events:
            conversation = Conversation(pool, rng)
            await conversation.run()
            done += conversation.events

    await asyncio.gather(*(worker(i) for i in range(workers)))
    return done
