"""Commits behind the next batch: offsets of handled batches only, in order, at most one per
interval with the newest offsets, flushed on stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from muster_runtime.messaging.commits import CommitBehind


class _Assignment:
    def __init__(self) -> None:
        self.positions: dict[str, int] = {"t-0": 0}

    def all_consumed_offsets(self) -> dict[str, int]:
        return dict(self.positions)


class _Broker:
    """Stands in for the group coordinator: commits complete when released."""

    def __init__(self) -> None:
        self.sent: list[dict[str, int]] = []
        self.done: list[dict[str, int]] = []
        self.release = asyncio.Event()
        self.sending = asyncio.Event()  # set when a commit reaches the broker
        self.in_flight = 0
        self.max_in_flight = 0
        self.fail = False

    async def commit(self, consumer: AIOKafkaConsumer, offsets: Any = None) -> None:
        self.sent.append(offsets)
        self.sending.set()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.release.wait()
            if self.fail:
                raise RuntimeError("rebalanced")
            self.done.append(offsets)
        finally:
            self.in_flight -= 1


@pytest.fixture
async def setup(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[CommitBehind, _Assignment, _Broker]]:
    broker = _Broker()

    async def commit(self: AIOKafkaConsumer, offsets: Any = None) -> None:
        await broker.commit(self, offsets)

    async def stop(self: AIOKafkaConsumer) -> None:
        self._closed = True

    monkeypatch.setattr(AIOKafkaConsumer, "commit", commit)
    monkeypatch.setattr(AIOKafkaConsumer, "stop", stop)
    consumer = CommitBehind(group_id="g")
    consumer.commit_every_s = 0.05
    assignment = _Assignment()
    consumer._subscription = SimpleNamespace(subscription=SimpleNamespace(assignment=assignment))
    yield consumer, assignment, broker
    consumer._closed = True


async def test_commit_returns_at_once_with_the_handled_batchs_offsets(setup: Any) -> None:
    consumer, assignment, broker = setup
    assignment.positions["t-0"] = 10  # batch 0..9 handled
    await asyncio.wait_for(consumer.commit(), 1.0)
    assignment.positions["t-0"] = 25  # the next batch handed out: not part of that commit
    await asyncio.sleep(0)
    assert broker.sent == [{"t-0": 10}]
    assert broker.done == []
    broker.release.set()
    await consumer.stop()
    assert broker.done == [{"t-0": 10}]


async def test_commits_go_out_one_at_a_time_in_order(setup: Any) -> None:
    consumer, assignment, broker = setup
    assignment.positions["t-0"] = 10
    await consumer.commit()
    assignment.positions["t-0"] = 20
    await asyncio.wait_for(consumer.commit(), 1.0)  # returns at once: the first is in flight
    await asyncio.sleep(0.01)
    assert broker.sent == [{"t-0": 10}]  # the second waits for the first
    broker.release.set()
    await consumer.stop()
    assert broker.done == [{"t-0": 10}, {"t-0": 20}]
    assert broker.max_in_flight == 1


async def test_batches_within_the_interval_share_one_commit_of_the_newest_offsets(setup: Any) -> None:
    consumer, assignment, broker = setup
    consumer.commit_every_s = 3600.0  # nothing but stop() may send a second commit
    broker.release.set()
    for end in (10, 20, 30, 40):
        assignment.positions["t-0"] = end
        await consumer.commit()
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    assert broker.done == [{"t-0": 10}]  # the first goes out at once, the rest wait
    await consumer.stop()
    assert broker.done == [{"t-0": 10}, {"t-0": 40}]


async def test_a_commit_after_a_quiet_interval_goes_out_at_once(setup: Any) -> None:
    consumer, assignment, broker = setup
    broker.release.set()
    assignment.positions["t-0"] = 10
    await consumer.commit()
    while consumer._committer is not None and not consumer._committer.done():
        await asyncio.sleep(0.01)  # the committer ends once its interval passed quietly
    assignment.positions["t-0"] = 11
    await consumer.commit()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert broker.done == [{"t-0": 10}, {"t-0": 11}]
    await consumer.stop()


async def test_a_failed_commit_is_logged_not_raised(setup: Any, caplog: pytest.LogCaptureFixture) -> None:
    consumer, assignment, broker = setup
    broker.fail = True
    broker.release.set()
    assignment.positions["t-0"] = 5
    with caplog.at_level(logging.WARNING, logger="muster.kafka"):
        await consumer.commit()
        await consumer.stop()  # waits for the failed commit; raises nothing
    assert any("offset_commit_failed" in r.getMessage() for r in caplog.records)


async def test_a_cancelled_consume_loop_leaves_the_commits_for_stop(setup: Any) -> None:
    consumer, assignment, broker = setup

    async def consume_loop() -> None:
        assignment.positions["t-0"] = 10
        await consumer.commit()
        await broker.sending.wait()
        assignment.positions["t-0"] = 20
        await consumer.commit()
        await asyncio.Event().wait()  # waiting for the next batch

    loop_task = asyncio.ensure_future(consume_loop())
    await broker.sending.wait()
    await asyncio.sleep(0)
    loop_task.cancel()  # FastStream cancels the consume task before stopping the consumer
    await asyncio.gather(loop_task, return_exceptions=True)
    broker.release.set()
    await consumer.stop()
    # The commit in flight survived the cancellation, and stop() sent the newest offsets.
    assert broker.done == [{"t-0": 10}, {"t-0": 20}]


async def test_explicit_offsets_are_committed_synchronously(setup: Any) -> None:
    consumer, _, broker = setup
    broker.release.set()
    await consumer.commit({"t-0": 3})
    assert broker.done == [{"t-0": 3}]
