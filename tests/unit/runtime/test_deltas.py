"""The delta publisher (ADR 0039): `offer` never waits, a full buffer drops, one task
sends what gathered as a batch and rings after the broker acknowledged it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from muster_runtime.messaging.deltas import DeltaPublisher


class Producer:
    """Sends are acknowledged when the test says so."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.acks: list[asyncio.Future[None]] = []
        self.fail = False

    async def send(self, topic: str, value: bytes, key: bytes, headers: Any = None) -> asyncio.Future[None]:
        if self.fail:
            raise OSError("broker down")
        self.sent.append((topic, key, value))
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks.append(ack)
        return ack


class Ringer:
    def __init__(self) -> None:
        self.rung: list[list[tuple[str, bytes | None]]] = []
        self.closed = False

    def ring_records(self, records: Any) -> None:
        self.rung.append(list(records))

    def close(self) -> None:
        self.closed = True


async def _until(condition: Any) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0)


async def test_offers_are_sent_as_one_batch_then_rung_after_the_ack() -> None:
    producer, ringer = Producer(), Ringer()
    publisher = DeltaPublisher(producer, ringer)  # type: ignore[arg-type]
    for i, text in enumerate(["He", "ll", "o"]):
        publisher.offer("s1", "m1", i, text)  # returns at once: nothing sent yet
    assert producer.sent == []
    task = asyncio.create_task(publisher.run())
    await _until(lambda: len(producer.sent) == 3)
    assert ringer.rung == []  # not before the broker has them
    for ack in producer.acks:
        ack.set_result(None)
    await _until(lambda: ringer.rung)
    assert ringer.rung == [[("muster.deltas", b"s1")] * 3]
    bodies = [json.loads(value) for _, _, value in producer.sent]
    assert [(b["messageId"], b["index"], b["text"]) for b in bodies] == [("m1", 0, "He"), ("m1", 1, "ll"), ("m1", 2, "o")]
    assert all(topic == "muster.deltas" and key == b"s1" for topic, key, _ in producer.sent)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert ringer.closed


async def test_a_full_buffer_drops_and_a_failed_send_is_not_retried() -> None:
    producer = Producer()
    publisher = DeltaPublisher(producer, None, buffer=2)  # type: ignore[arg-type]
    for i in range(5):
        publisher.offer("s1", "m1", i, "x")
    assert publisher.dropped == 3
    producer.fail = True
    task = asyncio.create_task(publisher.run())
    await _until(lambda: publisher.dropped == 5)
    producer.fail = False
    publisher.offer("s1", "m1", 5, "y")
    await _until(lambda: producer.sent)
    assert [json.loads(v)["index"] for _, _, v in producer.sent] == [5]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
