"""Deadlines on the in-memory unit of work (`muster_agent.stopping.stop_execution`, found by
reconciliation): absolute from the execution's start, kept across a takeover, ended after
the cancel grace for a run (its worker may still stop it itself) and at the deadline for a
child waiting for a person (no worker runs it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

from muster_agent.stopping import DEADLINE_PASSED
from muster_contracts import events as ev
from muster_contracts import wait_events as we

from .builders import delegating_parent
from .recovery_world import CANCEL_GRACE_S, RecoveryWorld


async def test_a_deadline_is_absolute_across_a_takeover_and_ends_the_run_after_the_grace(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    now = datetime.now(UTC)
    started = now - timedelta(seconds=3590)  # by the delegator's clock: 10 s are left
    parent, (eid,) = await delegating_parent(world.uows, ["late"], clock=lambda: started)
    deadline = started + timedelta(seconds=3600)
    # The worker died; a restarted recovery takes the run over, its deadline unchanged.
    await world.reconcile(now + timedelta(seconds=15))
    row = await world.execution(eid)
    assert (row["status"], row["deadline_at"]) == ("RECOVERING", deadline)
    # Past the deadline, within the grace: its worker may still end it.
    await world.reconcile(deadline + timedelta(seconds=CANCEL_GRACE_S - 1))
    assert (await world.execution(eid))["status"] == "RECOVERING"
    await world.reconcile(deadline + timedelta(seconds=CANCEL_GRACE_S + 1))
    row = await world.execution(eid)
    assert (row["status"], row["error"]) == ("FAILED", DEADLINE_PASSED)
    assert len(world.sent("CancelExecution", execution_id=eid)) == 1
    async with world.uows() as uow:
        child = await uow.lock_session(row["child_session_id"])
    assert child is not None and child["phase"] == "CANCELLED"
    # The last child ended: the parent has its failure as the call's result, once.
    (tool,) = await world.tool_results(parent)
    assert json.loads(tool["content"])["error"] == DEADLINE_PASSED
    await world.reconcile(deadline + timedelta(seconds=CANCEL_GRACE_S + 60))
    assert len(await world.tool_results(parent)) == 1
    assert len(world.sent("ResumeSession", session_id=parent)) == 1


async def test_a_child_waiting_for_a_person_ends_at_its_deadline_with_its_wait_dropped(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    now = datetime.now(UTC)
    _, (eid,) = await delegating_parent(world.uows, ["asks"], clock=lambda: now - timedelta(seconds=3590))
    child = (await world.execution(eid))["child_session_id"]
    async with world.uows() as uow:
        await uow.append(str(child), [
            we.QuestionAsked(question_id=uuid4(), tool_call_id="q", question="which?"),
            ev.SessionPhaseChanged(phase="WAITING_INPUT"),
        ], expected_version=None)  # fmt: skip
    await world.reconcile(now + timedelta(seconds=5))  # before its deadline: it waits, no takeover
    assert (await world.execution(eid))["status"] == "RUNNING"
    await world.reconcile(now + timedelta(seconds=11))  # at its deadline, no grace
    row = await world.execution(eid)
    assert (row["status"], row["error"]) == ("FAILED", DEADLINE_PASSED)
    async with world.uows() as uow:
        assert await uow.pending_waits(child) == []
