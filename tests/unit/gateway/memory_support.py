"""The gateway's decisions on the in-memory unit of work (cosmicpython's fake unit of work):
a store, sessions written as events, and what a decision appended and sent."""

from __future__ import annotations

from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_runtime.uow.memory_uow import MemoryStore

USER = "alice"


async def append(store: MemoryStore, sid: UUID, *events: ev.DomainEvent) -> None:
    async with store.uow() as uow:
        await uow.append(str(sid), list(events), expected_version=await uow.current_version(str(sid)))


async def session(
    store: MemoryStore, *, user: str = USER, phase: ev.Phase | None = None, **fields: object
) -> UUID:
    """A session of `user` (NORMAL unless `fields` say otherwise), in `phase`."""
    sid = uuid4()
    fields.setdefault("root_session_id", sid)
    await append(store, sid, ev.SessionCreated(session_id=sid, user_id=user, **fields))
    if phase is not None:
        await append(store, sid, ev.SessionPhaseChanged(phase=phase))
    return sid


def types(store: MemoryStore, sid: UUID) -> list[str]:
    return [stored.event.type for stored in store.state.streams.get(str(sid), [])]


def events(store: MemoryStore, sid: UUID) -> list[ev.DomainEvent]:
    return [stored.event for stored in store.state.streams.get(str(sid), [])]


def sent(store: MemoryStore, sid: UUID) -> list[str]:
    """The commands sent about the session, by type."""
    return [type(message).__name__ for _, key, message in store.sent if key == str(sid)]
