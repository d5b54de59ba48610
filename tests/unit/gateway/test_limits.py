"""Per-user admission (`limits.py`, ADR 0041): the running quota decided on the in-memory
unit of work by the decisions that start turns, the token bucket on an injected clock, and
the socket counter. Cancel, answers and tool results are not limited."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest
from muster_contracts import events as ev
from muster_contracts.session_events import SessionDeleted
from muster_gateway import commands, side_sessions
from muster_gateway.errors import HTTP_STATUS, GatewayError, rest_body, retry_after_header, ws_frame
from muster_gateway.limits import (
    QUOTA_RETRY_AFTER_MS,
    Admission,
    RateLimiter,
    SocketCounter,
    TokenBucket,
    TurnAdmission,
    UserLimits,
)
from muster_gateway.protocol import CreateSessionData, CreateSideSessionData, SendMessageData
from muster_runtime.process.settings import Settings
from muster_runtime.uow.memory_uow import MemoryStore

from tests.unit.gateway.memory_support import USER, append, sent, session, types


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def running(store: MemoryStore, user: str = USER) -> int:
    async with store.uow() as uow:
        return await uow.running_trees(user)


# -- the running quota, decided in memory ---------------------------------------------------


async def test_a_new_turn_over_the_running_quota_is_refused_and_nothing_is_written(
    store: MemoryStore, tmp_path: Path
) -> None:
    await session(store, phase="RUNNING")
    await session(store, phase="WAITING_APPROVAL")
    await session(store, phase="COMPLETED")
    await session(store, user="bob", phase="RUNNING")
    assert await running(store) == 2
    before = dict(store.state.streams)
    with pytest.raises(GatewayError) as refused:
        await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=TurnAdmission(2))
    assert refused.value.code == "quota_exceeded" and refused.value.status == 429
    assert refused.value.retry_after_ms == QUOTA_RETRY_AFTER_MS
    assert store.state.streams == before and store.sent == []
    # Under the quota (or with none), the same request is admitted.
    ack = await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=TurnAdmission(3))
    assert sent(store, UUID(ack["sessionId"])) == ["ProcessSession"]
    await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=TurnAdmission(0))


async def test_input_accepted_and_not_yet_started_counts_as_running(store: MemoryStore, tmp_path: Path) -> None:
    # Between the ack and the harness's claim the session has no phase: its queued input
    # holds the tree, so a burst of creates cannot slip past the quota.
    await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=TurnAdmission(1))
    assert await running(store) == 1
    with pytest.raises(GatewayError) as refused:
        await commands.create_session(store.uow, USER, CreateSessionData(content="x"), tmp_path, turns=TurnAdmission(1))
    assert refused.value.code == "quota_exceeded"


async def test_a_session_without_content_is_created_over_the_quota(store: MemoryStore, tmp_path: Path) -> None:
    await session(store, phase="RUNNING")
    ack = await commands.create_session(store.uow, USER, CreateSessionData(title="t"), tmp_path, turns=TurnAdmission(1))
    assert types(store, UUID(ack["sessionId"])) == ["SessionCreated"]


async def test_a_message_that_starts_a_turn_is_refused_one_that_queues_is_admitted(store: MemoryStore) -> None:
    busy = await session(store, phase="RUNNING")
    idle = await session(store, phase="COMPLETED")
    with pytest.raises(GatewayError) as refused:
        await commands.send_message(store.uow, USER, str(idle), SendMessageData(content="go"), turns=TurnAdmission(1))
    assert refused.value.code == "quota_exceeded" and types(store, idle)[-1] == "SessionPhaseChanged"
    queued = await commands.send_message(store.uow, USER, str(busy), SendMessageData(content="next"), turns=TurnAdmission(1))
    assert queued["queued"] is True


async def test_a_side_task_over_the_quota_is_refused(store: MemoryStore) -> None:
    source = await session(store, phase="RUNNING")
    data = CreateSideSessionData(content="aside")
    with pytest.raises(GatewayError) as refused:
        await side_sessions.create_side_session(store.uow, USER, str(source), data, turns=TurnAdmission(1))
    assert refused.value.code == "quota_exceeded" and types(store, source) == ["SessionCreated", "SessionPhaseChanged"]
    ack = await side_sessions.create_side_session(store.uow, USER, str(source), data, turns=TurnAdmission(2))
    assert sent(store, UUID(ack["sessionId"])) == ["ProcessSession"]


async def test_cancel_is_admitted_over_the_quota_and_frees_a_place(store: MemoryStore, tmp_path: Path) -> None:
    first = await session(store, phase="RUNNING")
    with pytest.raises(GatewayError):
        await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=TurnAdmission(1))
    assert await commands.cancel(store.uow, USER, str(first)) == {}
    await append(store, first, ev.SessionPhaseChanged(phase="CANCELLED"))
    assert await running(store) == 0
    await commands.create_session(store.uow, USER, CreateSessionData(content="hi"), tmp_path, turns=TurnAdmission(1))


async def test_a_tree_counts_once_and_deleted_sessions_not_at_all(store: MemoryStore) -> None:
    root = await session(store, phase="RUNNING")
    await session(store, phase="RUNNING", session_type="SIDE_TASK", parent_session_id=root, root_session_id=root)
    assert await running(store) == 1
    gone = await session(store, phase="RUNNING")
    assert await running(store) == 2
    await append(store, gone, SessionDeleted())
    assert await running(store) == 1
    assert await running(store, "bob") == 0


# -- the token bucket, on an injected clock -------------------------------------------------


def test_the_bucket_admits_a_burst_then_refuses_until_a_token_is_back() -> None:
    bucket = TokenBucket(capacity=3, per_second=0.5, tokens=3, updated=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [None, None, None]
    assert bucket.take(0.0) == 2000  # one token every 2 s
    assert bucket.take(1.5) == 500
    assert bucket.take(2.0) is None
    assert bucket.take(100.0) is None and bucket.tokens == 2  # refilled up to capacity only


def test_the_rate_limiter_refuses_with_retry_after_per_user() -> None:
    clock = Clock()
    rates = RateLimiter(per_minute=6, clock=clock)
    for _ in range(6):
        rates.admit("alice")
    with pytest.raises(GatewayError) as refused:
        rates.admit("alice")
    assert refused.value.code == "rate_limited" and refused.value.status == 429
    assert refused.value.retry_after_ms == 10_000  # 6 a minute: one every 10 s
    rates.admit("bob")  # another user's bucket is full
    clock.now += 9.999
    with pytest.raises(GatewayError) as again:
        rates.admit("alice")
    assert again.value.retry_after_ms == 1
    clock.now += 0.001
    rates.admit("alice")


def test_a_rate_of_zero_admits_everything() -> None:
    rates = RateLimiter(per_minute=0, clock=Clock())
    for _ in range(1000):
        rates.admit("alice")
    assert len(rates) == 0


def test_full_buckets_are_forgotten_when_many_users_came(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("muster_gateway.limits.PRUNE_AT", 3)
    clock = Clock()
    rates = RateLimiter(per_minute=60, clock=clock)
    for user in ("a", "b", "c"):
        rates.admit(user)
    clock.now += 60
    rates.admit("d")
    assert len(rates) == 1


# -- sockets and the error shapes -----------------------------------------------------------


def test_the_socket_counter_refuses_past_the_limit_and_frees_on_close() -> None:
    sockets = SocketCounter(max_sockets=2)
    assert sockets.open("alice") and sockets.open("alice")
    assert not sockets.open("alice") and sockets.count("alice") == 2
    assert sockets.open("bob")
    sockets.close("alice")
    assert sockets.open("alice")
    for _ in range(3):
        sockets.close("bob")
    assert sockets.count("bob") == 0
    unlimited = SocketCounter(max_sockets=0)
    assert all(unlimited.open("alice") for _ in range(100))


def test_the_limits_come_from_the_settings_with_their_defaults() -> None:
    assert UserLimits.of(Settings.from_environ({})) == UserLimits(10, 32, 120)
    env = {"MUSTER_USER_MAX_RUNNING": "1", "MUSTER_USER_MAX_SOCKETS": "0", "MUSTER_USER_MESSAGES_PER_MINUTE": "5"}
    admission = Admission(UserLimits.of(Settings.from_environ(env)))
    assert (admission.max_running, admission.sockets.max_sockets, admission.rates.per_minute) == (1, 0, 5)


def test_the_refusals_carry_retry_after_on_both_edges() -> None:
    assert HTTP_STATUS["overloaded"] == 503
    assert ws_frame("rate_limited", "slow down", 7, 1500) == {
        "type": "error",
        "id": 7,
        "data": {"code": "rate_limited", "message": "slow down", "retryAfterMs": 1500},
    }
    assert rest_body("not_found", "gone") == {"error": {"code": "not_found", "message": "gone"}}
    assert [retry_after_header(ms) for ms in (1, 1000, 1001, 60_000)] == ["1", "1", "2", "60"]
