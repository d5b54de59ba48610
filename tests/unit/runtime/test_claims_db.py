"""On PostgreSQL, a worker's claims made at the same moment share one statement
(`CLAIM_EXECUTIONS`, ADR 0027), and each answers as it would alone: a fresh run leased with
its own child's state, a redelivery refused, a live lease of another owner kept, an ended or
unknown execution not leased; a shared statement that fails leaves each to claim alone."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_runtime.process.db import Pool
from muster_runtime.uow import batched
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import ExecutionClaim

from tests.unit.runtime.uow_harness import Harness, new_session, started


async def open_run(work: Harness, task: str) -> tuple[UUID, UUID]:
    parent, child, execution = await new_session(work), await new_session(work), uuid4()
    async with work.uow() as uow:
        await uow.append(str(execution), [started(execution, parent, child, task)], expected_version=0)
        first = ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content=task)
        await uow.append(str(child), [first, ev.SessionPhaseChanged(phase="RUNNING")], expected_version=1)
    return execution, child


async def claims(work: Harness, asked: list[tuple[str, UUID, str]]) -> list[ExecutionClaim]:
    """The claims made at one moment, each in its own unit of work, as a worker's tasks make
    them: the units of work hold their connections first, so no claim waits for the pool."""
    async with contextlib.AsyncExitStack() as stack:
        uows = [await stack.enter_async_context(work.uow()) for _ in asked]
        made = (uow.claim_execution("worker", m, e, owner, 60) for uow, (m, e, owner) in zip(uows, asked, strict=True))
        return list(await asyncio.gather(*made))


async def test_claims_made_together_share_one_statement_and_each_answers_as_alone(pool: Pool) -> None:
    coalescer = batched.claims_coalescer()
    work = Harness(lambda: PostgresUnitOfWork(pool, coalescer), list)
    runs = [await open_run(work, f"task {n}") for n in range(3)]
    (ended, _), (held, _) = await open_run(work, "ended"), await open_run(work, "held")
    async with work.uow() as uow:
        await uow.append(str(ended), [ev.ExecutionFinished(status="COMPLETED", result="r")], expected_version=1)
    async with work.uow() as uow:
        assert (await uow.claim_execution("worker", "h", held, "other-worker", 60)).leased

    asked = [(f"m{n}", execution, "w1") for n, (execution, _) in enumerate(runs)]
    asked += [("m-ended", ended, "w1"), ("m-held", held, "w1"), ("m-unknown", uuid4(), "w1")]
    *fresh, on_ended, on_held, on_unknown = await claims(work, asked)

    assert coalescer.sent_together == 1
    for claim, (execution, child), n in zip(fresh, runs, range(3), strict=True):
        assert (claim.first, claim.leased, claim.child_phase) == (True, True, "RUNNING")
        assert claim.execution is not None and claim.execution["execution_id"] == execution
        assert claim.child_state is not None and claim.child_state.row["session_id"] == child
        assert [m["content"] for m in claim.child_state.messages] == [f"task {n}"]
    assert on_ended.first and not on_ended.leased and on_ended.child_state is None
    assert on_ended.execution is not None and on_ended.execution["status"] == "COMPLETED"
    assert (on_held.first, on_held.leased, on_held.child_state) == (True, False, None)
    assert (on_unknown.first, on_unknown.execution, on_unknown.leased) == (True, None, False)
    owners = await pool.fetch("SELECT resource_id, owner FROM leases ORDER BY owner")
    assert sorted((r["resource_id"], r["owner"]) for r in owners) == sorted(
        [(str(e), "w1") for e, _ in runs] + [(str(held), "other-worker")]
    )

    again = await claims(work, asked[:3])  # a redelivery of the same three messages
    assert [(c.first, c.leased, c.child_state) for c in again] == [(False, False, None)] * 3
    assert coalescer.sent_together == 2


async def test_a_shared_statement_that_fails_leaves_each_claim_to_be_made_alone(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims_together = batched.claims_together

    async def refused_when_shared(conn: Any, claims: list[batched.Claim]) -> list[dict[str, Any]]:
        if len(claims) > 1:
            await conn.execute("SELECT 1 / 0")  # the shared statement fails in the server
        return await claims_together(conn, claims)

    monkeypatch.setattr(batched, "claims_together", refused_when_shared)
    alone: list[Any] = []
    claim_alone = batched.claim_alone

    async def counted(conn: Any, claim: batched.Claim) -> dict[str, Any]:
        alone.append(claim.execution_id)
        return await claim_alone(conn, claim)

    monkeypatch.setattr(batched, "claim_alone", counted)
    coalescer = batched.claims_coalescer()
    work = Harness(lambda: PostgresUnitOfWork(pool, coalescer), list)
    runs = [await open_run(work, f"task {n}") for n in range(3)]
    answers = await claims(work, [(f"m{n}", execution, "w1") for n, (execution, _) in enumerate(runs)])
    assert [(c.first, c.leased) for c in answers] == [(True, True)] * 3
    assert sorted(alone) == sorted(execution for execution, _ in runs)
    assert coalescer.sent_together == 0
