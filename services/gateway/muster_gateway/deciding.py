"""What every decision of the gateway shares: the owned session it decides on, the
retry after a lost race, the refusal of a subagent, the events' metadata.

A decision is an `async def` over a factory of units of work (`UnitOfWorkFactory`): it
opens one, locks the session it decides on, reads typed aggregates, appends and sends,
and commits by leaving the block, so it runs unchanged on PostgreSQL and in memory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from uuid import UUID

from muster_runtime.process import retrying
from muster_runtime.store import lineage
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.races import LOST_RACES
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from muster_gateway.errors import GatewayError, not_found
from muster_gateway.ids import parse_session_id

ATTEMPTS = 6
T = TypeVar("T")


async def retried(decide: Callable[[], Awaitable[T]]) -> T:
    """Re-run a decision that lost a race on its stream (it re-reads everything); a small
    random pause, growing with each try, spreads the competitors out."""
    try:
        return await retrying.call(
            retrying.lost_race(LOST_RACES, attempts=ATTEMPTS, jitter_step_s=0.005), decide
        )
    except LOST_RACES as exc:
        raise GatewayError("conflict", "session is busy, retry") from exc


async def owned(uow: AbstractUnitOfWork, user_id: str, raw_id: str) -> Session:
    """The session, locked for this decision, when the user owns it; else `not_found`
    (a malformed, unknown, deleted or foreign id alike)."""
    session = await uow.lock_owned_session(user_id, parse_session_id(raw_id))
    if session is None:
        raise not_found()
    return session


def not_subagent(session: Session, action: str) -> None:
    # A subagent session is driven by its execution (worker, barrier, recovery); input or
    # a cancel from outside would race them. Its parent is the handle.
    if session.is_subagent:
        raise GatewayError("conflict", f"cannot {action} a subagent session; use its parent")


def metadata(user_id: str, root_session_id: UUID, origin: UUID | None = None) -> dict[str, Any]:
    """Event metadata; `origin`, the input that starts a turn, is its correlation and cause."""
    meta = {"user_id": user_id, "root_session_id": str(root_session_id)}
    return meta if origin is None else {**meta, **lineage.origin_metadata(origin)}
