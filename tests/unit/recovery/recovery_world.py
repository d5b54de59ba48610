"""Recovery in memory: the in-memory unit of work and scans, the real reconciliation and the
real worker handler (its loop composed as the worker composes it), no database."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from muster_agent.agents import AgentRegistry
from muster_agent.executions import finish_execution
from muster_agent.loop import LoopDeps
from muster_agent.models.base import ModelReply, ModelRequest, Usage
from muster_agent.runners import Runners
from muster_contracts.commands import RunExecution
from muster_contracts.envelope import Envelope
from muster_contracts.published import RecordedEvent
from muster_recovery.memory_scans import MemoryScans
from muster_recovery.reconcile import reconcile_executions, reconcile_sessions
from muster_runtime.store.eventstore import StoredEvent, published_value
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.unit_of_work import Row
from muster_subagent_worker.handlers import WorkerDeps, run_execution

GRACE_S, CANCEL_GRACE_S = 10.0, 30.0


def published(stored: StoredEvent) -> RecordedEvent:
    """The `muster.events` record of a stored event, as recovery consumes it."""
    return RecordedEvent.model_validate_json(published_value(stored, stored.event.payload()))


class NoModel:
    async def complete(self, request: ModelRequest) -> ModelReply:
        raise AssertionError("the model must not be called again")


@dataclass
class Answers:
    """A model that answers at once, without tool calls, and keeps what it was asked."""

    content: str = "child answer"
    requests: list[ModelRequest] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(content=self.content, tool_calls=(), usage=Usage())


@dataclass
class RecoveryWorld:
    workspaces: Path
    store: MemoryStore = field(default_factory=MemoryStore)

    def __post_init__(self) -> None:
        self.uows = self.store.uow
        self.scans = MemoryScans(self.store)

    @staticmethod
    def later(seconds: float = 60) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=seconds)

    async def reconcile(self, at: datetime) -> None:
        """One pass of the service's loop at the clock `at`."""
        await reconcile_sessions(self.uows, self.scans, grace_s=GRACE_S, now=at)
        await reconcile_executions(self.uows, self.scans, grace_s=GRACE_S, cancel_grace_s=CANCEL_GRACE_S, now=at)

    async def work(self, command: RunExecution, model: Any) -> None:
        """The worker handles `command` and runs the execution to its end."""
        loop = LoopDeps(
            self.uows, model, AgentRegistry.load(), self.workspaces,
            on_close=finish_execution, on_close_locks_parent=True,
        )  # fmt: skip
        # No renewal within the test (the first is due after a third of the TTL), so the
        # runner's pool is never used.
        runners = Runners(None, f"worker-{uuid4()}", 3600.0)  # type: ignore[arg-type]
        await run_execution(command, WorkerDeps(loop=loop, runners=runners, lease_ttl_s=3600.0))
        await runners.join(command.execution_id)

    async def execution(self, execution_id: UUID) -> Row:
        async with self.uows() as uow:
            row = await uow.execution(execution_id)
        assert row is not None
        return row

    async def events(self, stream: UUID, kind: str) -> list[StoredEvent]:
        async with self.uows() as uow:
            return [e for e in await uow.read_stream(str(stream)) if e.type == kind]

    async def tool_results(self, session_id: UUID) -> list[Row]:
        async with self.uows() as uow:
            state = await uow.session_state(session_id)
        assert state is not None
        return [m for m in state.messages if m["role"] == "TOOL"]

    def sent(self, kind: str, **fields: Any) -> list[Envelope]:
        return [
            message
            for _, _, message in self.store.sent
            if message.type == kind and all(getattr(message, k, None) == v for k, v in fields.items())
        ]
