"""Overload shedding (`overload.py`, ADR 0041): the rule over a sample, the sampler on an
injected clock, the decisions told to shed (in memory: new turns refused, cancel and a
message queued behind a running turn admitted), and the backlog read on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from muster_contracts import events as ev
from muster_gateway import commands, overload_queries, side_sessions
from muster_gateway.errors import GatewayError
from muster_gateway.limits import Admission, TurnAdmission, UserLimits
from muster_gateway.overload import Backlog, Shedder, Thresholds, shedding
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


def test_the_thresholds_come_from_the_settings() -> None:
    assert Thresholds.of(Settings.from_environ({})) == Thresholds(500, 20_000, 1_000)
    off = {"MUSTER_OVERLOAD_BACKLOG": "0", "MUSTER_OVERLOAD_BACKLOG_AGE_MS": "0", "MUSTER_OVERLOAD_POOL_WAIT_MS": "0"}
    assert Thresholds.of(Settings.from_environ(off)).off


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
