"""Overload shedding (`overload.py`, ADR 0041): the rule over a sample, the sampler on an
injected clock, the decisions told to shed (in memory: new turns refused, cancel and a
message queued behind a running turn admitted), and the backlog read on PostgreSQL (turns
and delegations not yet started, turns under way)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts.session_events import SessionDeleted
from muster_gateway import commands, overload_queries, side_sessions
from muster_gateway.errors import GatewayError
from muster_gateway.limits import Admission, TurnAdmission, UserLimits
from muster_gateway.overload import Shedder
from muster_gateway.overload_rule import Backlog, Thresholds, over, shedding
from muster_gateway.protocol import CreateSessionData, CreateSideSessionData, SendMessageData
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.process.settings import Settings
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from tests.databases import fresh_database_url
from tests.unit.gateway.memory_support import USER, session, types

SHED = TurnAdmission(shed_retry_after_ms=3_000)
LIMITS = Thresholds(backlog=100, backlog_age_ms=10_000, pool_wait_ms=500)


# -- the rule -------------------------------------------------------------------------------


def test_new_turns_are_shed_past_any_threshold_with_a_bounded_hint() -> None:
    assert shedding(Backlog(99, 9_999, 499), LIMITS) is None
    assert shedding(Backlog(100, 50, 0), LIMITS) == 1_000  # at least a second
    assert shedding(Backlog(3, 12_000, 0), LIMITS) == 12_000  # the oldest turn's wait
    assert shedding(Backlog(0, 0, 800), LIMITS) == 1_000
    assert shedding(Backlog(1_000, 600_000, 0), LIMITS) == 30_000  # at most 30 s
    assert shedding(Backlog(10**6, 10**7, 10**5), Thresholds()) is None  # all off


def test_turns_under_way_and_not_yet_started_count_against_the_running_bound() -> None:
    bound = Thresholds(running=24)
    assert shedding(Backlog(0, 0, 0, running=23), bound) is None
    assert shedding(Backlog(0, 0, 0, running=24), bound) == 1_000
    assert shedding(Backlog(4, 300, 0, running=20), bound) == 1_000  # 20 under way, 4 to start
    # Delegations are the turns' own children: the bound counts turns, not their fan-out.
    assert shedding(Backlog(0, 0, 0, delegations=90, running=10), bound) is None
    assert shedding(Backlog(0, 0, 0, running=10**6), Thresholds()) is None  # off


def test_a_live_consumer_behind_its_threshold_sheds_with_its_lag_as_the_hint() -> None:
    behind = Thresholds(events_lag_ms=500)
    assert shedding(Backlog(0, 0, 0, events_lag_ms=499), behind) is None
    assert shedding(Backlog(0, 0, 0, events_lag_ms=500), behind) == 1_000  # at least a second
    assert shedding(Backlog(0, 0, 0, events_lag_ms=4_200), behind) == 4_200
    assert shedding(Backlog(1, 6_000, 0, events_lag_ms=4_200), behind) == 6_000  # the longer wait
    assert shedding(Backlog(0, 0, 0, events_lag_ms=10**6), Thresholds()) is None  # off


def test_the_thresholds_come_from_the_settings() -> None:
    assert Thresholds.of(Settings.from_environ({})) == Thresholds(500, 20_000, 1_000, 0, 5_000)
    assert Thresholds.of(Settings.from_environ({"MUSTER_OVERLOAD_RUNNING": "24"})).running == 24
    off = {
        "MUSTER_OVERLOAD_BACKLOG": "0",
        "MUSTER_OVERLOAD_BACKLOG_AGE_MS": "0",
        "MUSTER_OVERLOAD_POOL_WAIT_MS": "0",
        "MUSTER_OVERLOAD_EVENTS_LAG_MS": "0",
    }
    assert Thresholds.of(Settings.from_environ(off)).off
    assert not Thresholds.of(Settings.from_environ(off | {"MUSTER_OVERLOAD_RUNNING": "24"})).off


# -- the sampler ------------------------------------------------------------------------------


class Samples:
    def __init__(self, *samples: Backlog | Exception) -> None:
        self.samples = list(samples)
        self.reads = 0

    async def __call__(self) -> Backlog:
        self.reads += 1
        sample = self.samples.pop(0)
        if isinstance(sample, Exception):
            raise sample
        return sample


async def test_the_sample_is_read_at_most_once_per_period() -> None:
    now = [0.0]
    read = Samples(Backlog(200, 4_000), Backlog(0, 0), OSError("database down"))
    shedder = Shedder(read, LIMITS, every_s=0.5, clock=lambda: now[0])
    assert [await shedder.retry_after_ms() for _ in range(10)] == [4_000] * 10
    assert read.reads == 1
    now[0] = 0.5
    assert await shedder.retry_after_ms() is None and read.reads == 2
    now[0] = 1.0
    assert await shedder.retry_after_ms() is None and read.reads == 3  # a failed read admits


async def test_turns_admitted_since_the_sample_count_until_the_next() -> None:
    now = [0.0]
    read = Samples(Backlog(97, 50), Backlog(97, 50))
    shedder = Shedder(read, LIMITS, every_s=0.5, clock=lambda: now[0])
    # 97 waiting and a threshold of 100: three more are admitted, then the rest shed.
    assert [await shedder.retry_after_ms() for _ in range(5)] == [None, None, None, 1_000, 1_000]
    assert read.reads == 1
    now[0] = 0.5  # a new read sees what is waiting then: the count starts again
    assert await shedder.retry_after_ms() is None and read.reads == 2


async def test_a_refusal_counting_turns_admitted_since_the_read_is_confirmed_by_a_recent_read() -> None:
    now = [0.0]
    # 20 under way; then 6 admitted, which the estimate adds to the 20 though 6 of those
    # ended meanwhile (a closed loop): a fresh read shows 20 again, so no refusal.
    read = Samples(Backlog(0, 0, 0, running=20), Backlog(0, 0, 0, running=20), Backlog(0, 0, 0, running=24))
    shedder = Shedder(read, Thresholds(running=24), every_s=0.5, clock=lambda: now[0], confirm_s=0.02)
    assert [await shedder.retry_after_ms() for _ in range(4)] == [None] * 4
    # the fifth would make 25 on the estimate; within 20 ms of the read it is refused as is
    assert await shedder.retry_after_ms() == 1_000 and read.reads == 1
    now[0] = 0.05
    # confirmed: room after all, and the new read counts anew (20 + 4 = the bound)
    assert [await shedder.retry_after_ms() for _ in range(5)] == [None] * 4 + [1_000]
    assert read.reads == 2
    now[0] = 0.2
    assert await shedder.retry_after_ms() == 1_000 and read.reads == 3  # 24 read: refused
    # a refusal on a read with nothing admitted since needs no second read
    now[0] = 0.25
    assert await shedder.retry_after_ms() == 1_000 and read.reads == 3


async def test_the_live_consumers_lag_is_read_at_each_request() -> None:
    lag = [0.0]
    shedder = Shedder(Samples(Backlog(0, 0)), Thresholds(events_lag_ms=500), events_lag=lambda: lag[0])
    assert await shedder.retry_after_ms() is None
    lag[0] = 2_500.0  # between two samples: the lag is the gateway's own, read every time
    assert await shedder.retry_after_ms() == 2_500
    lag[0] = 0.0
    assert await shedder.retry_after_ms() is None


def test_the_threshold_past_is_named() -> None:
    assert over(Backlog(99, 9_999, 499), LIMITS) is None
    assert over(Backlog(100, 50, 0), LIMITS) == "backlog"
    assert over(Backlog(0, 0, 800), LIMITS) == "pool_wait_ms"
    assert over(Backlog(3, 20, 0, running=21), Thresholds(running=24)) == "running"
    assert over(Backlog(0, 0, 0, events_lag_ms=600), Thresholds(events_lag_ms=500)) == "events_lag_ms"


async def test_shedding_logs_once_when_it_starts_with_the_threshold_and_once_when_it_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    read = Samples(
        Backlog(0, 0, 0, running=22), Backlog(0, 0, 0, running=24), *[Backlog(0, 0, 0, running=10)] * 2
    )
    shedder = Shedder(read, Thresholds(running=24), every_s=0.5, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="muster.gateway.overload"):
        assert [await shedder.retry_after_ms() for _ in range(5)] == [None, None, 1_000, 1_000, 1_000]
        now[0] = 1.0  # flips between admitting and refusing are one episode
        assert [await shedder.retry_after_ms() for _ in range(2)] == [1_000, 1_000]
        now[0] = 2.0
        assert await shedder.retry_after_ms() is None  # admitted, but only 1 s after a refusal
        now[0] = 6.0
        assert await shedder.retry_after_ms() is None  # 5 s without a refusal: ended
    started, ended = [r.getMessage() for r in caplog.records]
    # 22 read under way and 2 admitted since the read: the bound of 24, so the third is shed
    assert started.startswith("overload_shedding_started over=running turns=0 delegations=0 running=22")
    assert "admitted_since_read=2" in started
    assert ended == "overload_shedding_ended after_s=1.0 refused=5"


async def test_no_sample_is_read_when_shedding_is_off() -> None:
    read = Samples()
    assert await Shedder(read, Thresholds()).retry_after_ms() is None and read.reads == 0


async def test_the_admission_tells_the_decisions_to_shed() -> None:
    shedder = Shedder(Samples(Backlog(500, 100)), LIMITS)
    assert await Admission(UserLimits(max_running=3), shedder).turns() == TurnAdmission(3, 1_000)
    assert await Admission(UserLimits(max_running=3)).turns() == TurnAdmission(3, None)


# -- the decisions told to shed, in memory ------------------------------------------------------


async def test_new_turns_are_refused_with_overloaded_and_nothing_is_written(tmp_path: Path) -> None:
    store = MemoryStore()
    idle = await session(store, phase="COMPLETED")
    with pytest.raises(GatewayError) as refused:
        await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=SHED)
    assert (refused.value.code, refused.value.status, refused.value.retry_after_ms) == ("overloaded", 503, 3_000)
    with pytest.raises(GatewayError) as again:
        await commands.send_message(store.uow, USER, str(idle), SendMessageData(content="go"), turns=SHED)
    assert again.value.code == "overloaded"
    with pytest.raises(GatewayError) as side:
        await side_sessions.create_side_session(
            store.uow, USER, str(idle), CreateSideSessionData(content="aside"), turns=SHED
        )
    assert side.value.code == "overloaded"
    assert types(store, idle) == ["SessionCreated", "SessionPhaseChanged"] and store.sent == []
    # A session without a first message starts no turn: created all the same.
    await commands.create_session(store.uow, USER, CreateSessionData(title="later"), tmp_path, turns=SHED)


async def test_cancel_and_a_message_queued_behind_a_running_turn_are_admitted(tmp_path: Path) -> None:
    store = MemoryStore()
    busy = await session(store, phase="RUNNING")
    queued = await commands.send_message(store.uow, USER, str(busy), SendMessageData(content="next"), turns=SHED)
    assert queued["queued"] is True
    assert await commands.cancel(store.uow, USER, str(busy)) == {}
    assert types(store, busy)[-2:] == ["SessionPhaseChanged", "QueuedMessagesDropped"]


# -- the backlog read on PostgreSQL ----------------------------------------------------------


@pytest.fixture
async def own_pool(postgres_server_url: str) -> AsyncIterator[Pool]:
    """A database of the test's own: the backlog is cluster-wide."""
    async with fresh_database_url(postgres_server_url, "gw_overload") as url:
        created: Any = await create_pool(url, min_size=1, max_size=2)
        yield created
        await created.close()


async def test_the_backlog_counts_turns_accepted_and_not_started(own_pool: Pool, tmp_path: Path) -> None:
    uows = partial(PostgresUnitOfWork, own_pool)
    assert (await overload_queries.backlog(own_pool)).waiting == 0
    waiting = await commands.create_session(uows, USER, CreateSessionData(content="a"), tmp_path)
    await commands.create_session(uows, "bob", CreateSessionData(content="b"), tmp_path)
    await commands.create_session(uows, USER, CreateSessionData(title="no turn"), tmp_path)
    sample = await overload_queries.backlog(own_pool)
    assert sample.waiting == 2 and sample.oldest_wait_ms >= 0 and sample.pool_wait_ms >= 0
    # A turn that started is no longer waiting, nor is input queued behind it.
    async with uows() as uow:
        sid = waiting["sessionId"]
        await uow.append(sid, [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=None)
    await commands.send_message(uows, USER, waiting["sessionId"], SendMessageData(content="behind"))
    assert (await overload_queries.backlog(own_pool)).waiting == 1


async def test_the_backlog_counts_turns_under_way_but_not_subagents(own_pool: Pool, tmp_path: Path) -> None:
    uows = partial(PostgresUnitOfWork, own_pool)
    phases: list[ev.Phase] = ["RUNNING", "RESUMING", "WAITING_APPROVAL", "COMPLETED", "RUNNING"]
    sessions = [
        (await commands.create_session(uows, USER, CreateSessionData(title=f"s{i}"), tmp_path))["sessionId"]
        for i in range(len(phases))
    ]
    async with uows() as uow:
        for sid, phase in zip(sessions, phases, strict=True):
            await uow.append(sid, [ev.SessionPhaseChanged(phase=phase)], expected_version=None)
        await uow.append(sessions[-1], [SessionDeleted()], expected_version=None)  # not load
    # A child that runs is its parent's work (the delegations count children not started).
    await child_of(own_pool, sessions[0], "RUNNING", "RUNNING", datetime.now(UTC), steps=1)
    sample = await overload_queries.backlog(own_pool)
    assert (sample.running, sample.turns, sample.delegations) == (2, 0, 0)
    assert shedding(sample, Thresholds(running=2)) == 1_000
    assert shedding(sample, Thresholds(running=3)) is None


async def child_of(
    pool: Pool, parent: str, status: str, child_phase: str | None, started: datetime, *,
    steps: int = 0, leased: bool = False,
) -> None:  # fmt: skip
    """A delegation of `parent` (its execution row) to a new child in `child_phase`, whose
    task is its message 1 and which has recorded `steps` messages since; `leased`: a live
    worker holds it."""
    child, task, execution = uuid4(), uuid4(), uuid4()
    await pool.execute(
        """INSERT INTO sessions (session_id, user_id, session_type, parent_session_id, root_session_id,
               agent_type, phase, version, created_at, updated_at, message_count)
           VALUES ($1, 'alice', 'SUBAGENT', $2, $2, 'coder', $3, 1, $4, $4, $5)""",
        child, UUID(parent), child_phase, started, 1 + steps)
    await pool.execute(
        """INSERT INTO messages (message_id, session_id, seq, role, content, position, created_at)
           VALUES ($1, $2, 1, 'USER', 'the task', 0, $3)""",
        task, child, started)
    await pool.execute(
        """INSERT INTO executions (execution_id, parent_session_id, parent_tool_call_id, child_session_id,
               user_id, agent_type, invocation_type, task, round, status, delivery_status,
               start_message_id, started_at, deadline_at, version)
           VALUES ($1, $2, $3, $4, 'alice', 'coder', 'DELEGATE', 't', 1, $5, 'PENDING', $6, $7, $7, 1)""",
        execution, UUID(parent), f"call-{uuid4()}", child, status, task, started)
    if leased:
        await pool.execute(
            "INSERT INTO leases (resource_id, owner, expires_at) VALUES ($1, 'worker', now() + interval '1 hour')",
            str(execution))


async def test_the_backlog_counts_delegations_whose_child_has_not_started(own_pool: Pool, tmp_path: Path) -> None:
    uows = partial(PostgresUnitOfWork, own_pool)
    parent = (await commands.create_session(uows, USER, CreateSessionData(title="parent"), tmp_path))["sessionId"]
    now = datetime.now(UTC)
    await child_of(own_pool, parent, "RUNNING", "RUNNING", now - timedelta(seconds=60))  # not claimed yet
    await child_of(own_pool, parent, "RUNNING", "RESUMING", now - timedelta(seconds=30))  # not re-claimed
    # Claimed: it waits for a slot of its worker or is in its first model call. It counts;
    # its wait says nothing (a model call may be long).
    await child_of(own_pool, parent, "RUNNING", "RUNNING", now - timedelta(seconds=90), leased=True)
    # Not waiting for capacity: under way, waiting for a person, recovering, ended.
    await child_of(own_pool, parent, "RUNNING", "RUNNING", now - timedelta(seconds=90), steps=1)
    await child_of(own_pool, parent, "RUNNING", "WAITING_APPROVAL", now - timedelta(seconds=90))
    await child_of(own_pool, parent, "RECOVERING", "RUNNING", now - timedelta(seconds=90))
    await child_of(own_pool, parent, "COMPLETED", "COMPLETED", now - timedelta(seconds=90), steps=2)
    sample = await overload_queries.backlog(own_pool)
    assert (sample.turns, sample.delegations, sample.waiting) == (0, 3, 3)
    assert 60_000 <= sample.oldest_wait_ms < 90_000  # the unclaimed one's minute
    # With a turn waiting too, both count; the oldest wait is still the delegation's.
    await commands.create_session(uows, "bob", CreateSessionData(content="b"), tmp_path)
    both = await overload_queries.backlog(own_pool)
    assert (both.turns, both.delegations) == (1, 3) and 60_000 <= both.oldest_wait_ms < 90_000
    # Past the backlog threshold in delegations alone: new turns are shed.
    assert shedding(sample, Thresholds(backlog=3)) is not None
    assert shedding(sample, Thresholds(backlog=4, backlog_age_ms=120_000)) is None
