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


def _bodies(producer: Producer) -> list[tuple[str, int, str]]:
    return [(b["messageId"], b["index"], b["text"]) for b in (json.loads(v) for _, _, v in producer.sent)]


async def _ack_all(producer: Producer) -> None:
    for ack in producer.acks:
        if not ack.done():
            ack.set_result(None)
    await asyncio.sleep(0)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_first_piece_travels_alone_and_the_rest_as_one_record_rung_after_the_ack() -> None:
    producer, ringer = Producer(), Ringer()
    publisher = DeltaPublisher(producer, ringer)  # type: ignore[arg-type]
    for i, text in enumerate(["He", "ll", "o"]):
        publisher.offer("s1", "m1", i, text, 7)  # returns at once: nothing sent yet
    assert producer.sent == []
    task = asyncio.create_task(publisher.run())
    await _until(lambda: len(producer.sent) == 2)
    assert ringer.rung == []  # not before the broker has them
    await _ack_all(producer)
    await _until(lambda: ringer.rung)
    assert ringer.rung == [[("muster.deltas", b"s1")] * 2]
    assert _bodies(producer) == [("m1", 0, "He"), ("m1", 1, "llo")]
    assert all(json.loads(v)["afterVersion"] == 7 for _, _, v in producer.sent)
    assert all(topic == "muster.deltas" and key == b"s1" for topic, key, _ in producer.sent)
    await _stop(task)
    assert ringer.closed


async def test_pieces_after_the_first_gather_for_the_interval_and_count_without_a_gap() -> None:
    producer = Producer()
    publisher = DeltaPublisher(producer, None, interval_s=0.05)  # type: ignore[arg-type]
    task = asyncio.create_task(publisher.run())
    publisher.offer("s1", "m1", 0, "a")
    await _until(lambda: len(producer.sent) == 1)  # at once, not after the interval
    await _ack_all(producer)
    publisher.offer("s1", "m1", 1, "b")
    await asyncio.sleep(0.01)
    publisher.offer("s2", "m2", 0, "x")  # another message's first piece: sent now, with what waits
    publisher.offer("s1", "m1", 2, "c")
    await _until(lambda: len(producer.sent) == 3)  # m1's waiting pieces went with it, as one
    await _ack_all(producer)
    publisher.offer("s1", "m1", 3, "d")
    publisher.offer("s1", "m1", 4, "e")
    publisher.offer("s2", "m2", 1, "y")
    await asyncio.sleep(0.01)
    assert len(producer.sent) == 3  # within the interval: gathering
    await _until(lambda: len(producer.sent) == 5)
    assert _bodies(producer) == [("m1", 0, "a"), ("m1", 1, "bc"), ("m2", 0, "x"), ("m1", 2, "de"), ("m2", 1, "y")]
    await _stop(task)


async def test_a_full_buffer_or_a_failed_send_ends_that_message_preview() -> None:
    producer = Producer()
    publisher = DeltaPublisher(producer, None, buffer=2)  # type: ignore[arg-type]
    for i in range(5):
        publisher.offer("s1", "m1", i, "x")
    assert publisher.dropped == 3
    publisher.offer("s1", "m1", 5, "x")  # after a gap: dropped too, never sent
    assert publisher.dropped == 4
    producer.fail = True
    task = asyncio.create_task(publisher.run())
    await _until(lambda: publisher.dropped == 6)  # the two waiting pieces, not retried
    producer.fail = False
    publisher.offer("s1", "m1", 6, "y")  # its preview has a hole: it stays ended
    publisher.offer("s1", "m2", 3, "z")  # a message whose beginning this process never had
    publisher.offer("s1", "m3", 0, "w")
    await _until(lambda: producer.sent)
    assert _bodies(producer) == [("m3", 0, "w")]
    assert publisher.dropped == 8
    await _stop(task)


async def test_the_end_of_a_model_call_sends_what_waits_of_it_at_once_and_forgets_it() -> None:
    producer = Producer()
    publisher = DeltaPublisher(producer, None, interval_s=60)  # type: ignore[arg-type]
    task = asyncio.create_task(publisher.run())
    publisher.offer("s1", "m1", 0, "a")
    await _until(lambda: len(producer.sent) == 1)
    await _ack_all(producer)
    publisher.offer("s1", "m1", 1, "b")
    publisher.offer("s1", "m1", 2, "c")
    await asyncio.sleep(0.01)
    assert len(producer.sent) == 1  # gathering for the interval
    publisher.end("m1")
    await _until(lambda: len(producer.sent) == 2)  # not a minute later
    assert _bodies(producer) == [("m1", 0, "a"), ("m1", 1, "bc")]
    publisher.offer("s1", "m1", 3, "late")  # forgotten: dropped
    assert publisher.dropped == 1
    publisher.end("m1")  # again, or for a message never offered: nothing
    publisher.end("m9")
    await _stop(task)


async def test_a_batch_goes_out_while_the_one_before_awaits_its_ack_and_a_failed_ack_ends_the_preview() -> None:
    producer, ringer = Producer(), Ringer()
    publisher = DeltaPublisher(producer, ringer, interval_s=0)  # type: ignore[arg-type]
    task = asyncio.create_task(publisher.run())
    publisher.offer("s1", "m1", 0, "a")
    await _until(lambda: len(producer.sent) == 1)
    publisher.offer("s2", "m2", 0, "x")  # the first batch is not acknowledged yet
    await _until(lambda: len(producer.sent) == 2)
    assert ringer.rung == []
    producer.acks[1].set_result(None)
    await _until(lambda: ringer.rung == [[("muster.deltas", b"s2")]])
    producer.acks[0].set_exception(OSError("not written"))
    await _until(lambda: publisher.dropped == 1)
    assert ringer.rung == [[("muster.deltas", b"s2")]]  # nothing rung for what failed
    publisher.offer("s1", "m1", 1, "b")  # m1's preview has a hole now: ended
    publisher.offer("s2", "m2", 1, "y")
    await _until(lambda: len(producer.sent) == 3)
    assert _bodies(producer)[-1] == ("m2", 1, "y")
    assert publisher.dropped == 2
    await _stop(task)
