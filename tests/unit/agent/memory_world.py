"""A whole agent world in memory: the in-memory unit of work, the real loop, Delegator and
worker close hook, and the scripted model; nothing but Python runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry
from muster_agent.delegation import Delegator
from muster_agent.executions import finish_execution
from muster_agent.loop import LoopDeps, run_until_idle
from muster_agent.models.scripted import ScriptedModel
from muster_agent.session_store import SessionState
from muster_contracts import events as ev
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.unit_of_work import Row


@dataclass
class World:
    workspaces: Path
    store: MemoryStore = field(default_factory=MemoryStore)
    model: Any = field(default_factory=ScriptedModel)

    @property
    def harness(self) -> LoopDeps:
        """The parent loop as the harness composes it: delegations through the Delegator."""
        agents = AgentRegistry.load()
        delegator = Delegator(self.store.uow, agents, 3600.0)
        return LoopDeps(self.store.uow, self.model, agents, self.workspaces, delegation=delegator)

    @property
    def worker(self) -> LoopDeps:
        """A child's loop as the worker composes it: its end finishes the execution."""
        return LoopDeps(
            self.store.uow, self.model, AgentRegistry.load(), self.workspaces, on_close=finish_execution
        )

    async def session(
        self,
        content: str,
        *,
        session_type: str = "NORMAL",
        agent_type: str = "general",
        permission_level: str = "auto",
        execution_mode: str = "CLOUD",
    ) -> UUID:
        sid = uuid4()
        async with self.store.uow() as uow:
            await uow.append(
                str(sid),
                [
                    ev.SessionCreated(
                        session_id=sid, user_id="alice", root_session_id=sid,
                        session_type=session_type, agent_type=agent_type,  # type: ignore[arg-type]
                        permission_level=permission_level,  # type: ignore[arg-type]
                        execution_mode=execution_mode,  # type: ignore[arg-type]
                    ),
                    ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content=content),
                    ev.SessionPhaseChanged(phase="RUNNING"),
                ],
                expected_version=0,
            )  # fmt: skip
        return sid

    async def append(self, sid: UUID, *events: ev.DomainEvent) -> None:
        async with self.store.uow() as uow:
            await uow.append(str(sid), list(events), expected_version=None)

    async def run(self, sid: UUID) -> str:
        return await run_until_idle(self.harness, sid)

    async def state(self, sid: UUID) -> SessionState:
        state = await store.read_state(self.store.uow, sid)
        assert state is not None
        return state

    async def executions(self, parent: UUID) -> list[Row]:
        async with self.store.uow() as uow:
            return await uow.executions_of(parent)

    def sent(self, kind: str) -> list[Any]:
        return [message for _, _, message in self.store.sent if message.type == kind]
