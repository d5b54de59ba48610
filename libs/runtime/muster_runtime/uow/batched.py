"""A worker's execution claims, sent together when they become ready at the same moment
(ADR 0027). One coalescer per connection pool, made with it in a service's lifespan and
handed to its units of work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from muster_runtime.process.db import Connection
from muster_runtime.uow.coalescing import Coalescer
from muster_runtime.uow.phases import OPEN_STATUSES
from muster_runtime.uow.postgres_queries import CLAIM_EXECUTIONS


@dataclass(frozen=True)
class Claim:
    """A worker's claim of a `RunExecution` (`CLAIM_EXECUTIONS`)."""

    consumer: str
    message_id: str
    execution_id: UUID
    owner: str
    ttl_s: float


async def claims_together(conn: Connection, claims: list[Claim]) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        CLAIM_EXECUTIONS,
        [c.consumer for c in claims],
        [c.message_id for c in claims],
        [c.execution_id for c in claims],
        [c.owner for c in claims],
        [c.ttl_s for c in claims],
        list(OPEN_STATUSES),
    )
    answers = [dict(row) for row in rows]
    for answer in answers:
        answer.pop("claim_item")  # the rows come in the items' order
    return answers


async def claim_alone(conn: Connection, claim: Claim) -> dict[str, Any]:
    """One claim: the same statement with one item."""
    (answer,) = await claims_together(conn, [claim])
    return answer


ClaimCoalescer = Coalescer[Claim, dict[str, Any]]


def claims_coalescer() -> ClaimCoalescer:
    """A pool's coalescer of claims: distinct executions share a statement."""
    return Coalescer(claims_together, claim_alone, _claim_key)


def _claim_key(claim: Claim) -> UUID:
    return claim.execution_id
