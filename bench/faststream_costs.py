"""In-process costs of consuming through FastStream: the services' way (batch subscribers,
`apply_types=False`, records validated one by one at the edge) against FastStream's own
(typed handlers validated by `apply_types`, per message or per batch), per message.

Nothing connects: each arm builds a broker under `TestKafkaBroker` and hands its subscriber
pre-built records through `process_message`, the path FastStream's consume loop takes
(parser, decoder, middlewares, dependency injection, the handler). The handlers do nothing
else, so the figures are the consuming machinery's own. Arms alternate over several
rounds in one process; the report is the median per message and its ratio to today's way.
`python -m bench.faststream_costs [--messages N] [--rounds R]` (ADR 0036).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka.structs import ConsumerRecord
from faststream import AckPolicy
from faststream._internal.logger.logger_proxy import RealLoggerObject
from faststream._internal.testing.calls import CallRecorder
from faststream.kafka import KafkaBroker, TestKafkaBroker
from faststream.kafka.annotations import KafkaMessage
from muster_contracts.commands import SESSION_COMMANDS, ProcessSession, SessionCommand
from muster_runtime.messaging.consuming import BATCH_OPTIONS, per_key, records_of
from muster_runtime.messaging.edge import Edge
from muster_runtime.messaging.service import the_message

TOPIC = "muster.commands"
log = logging.getLogger("bench.faststream")
BATCH = 500
KEYS = 16  # sessions in one batch: per_key runs their records concurrently

# No automatic ack in any arm: under `TestKafkaBroker` the consumer's commit is a mock, whose
# cost would swamp the per-message arms. (For real, acking per message is an offset commit,
# a broker round trip, per message; a batch subscriber commits once per batch.)
ACK = AckPolicy.MANUAL

Arm = Callable[[list[ConsumerRecord[bytes, bytes]]], Awaitable[None]]


def records(n: int) -> list[ConsumerRecord[bytes, bytes]]:
    sessions = [uuid.uuid4() for _ in range(KEYS)]
    out = []
    for i in range(n):
        session = sessions[i % KEYS]
        value = ProcessSession(session_id=session).model_dump_json().encode()
        out.append(
            ConsumerRecord(
                TOPIC, i % 2, i, int(time.time() * 1000), 0, str(session).encode(), value,
                None, len(str(session)), len(value), [("content-type", b"application/json")],
            )
        )
    return out


async def nothing(command: object) -> None:
    return None


def edge_batches(broker: KafkaBroker) -> Any:
    """Today's subscriber (`service.subscribe_batch`): the batch, validated record by record."""
    edge = Edge("bench", TOPIC)

    @broker.subscriber(TOPIC, group_id="g", ack_policy=ACK, decoder=the_message, **BATCH_OPTIONS)  # type: ignore[untyped-decorator]
    async def consume(msg: KafkaMessage) -> None:
        await per_key(
            records_of(msg.raw_message),
            lambda record: edge.handle(record.value, record.key, SESSION_COMMANDS, nothing),
        )

    return consume


def edge_messages(broker: KafkaBroker) -> Any:
    """One message at a time, still validated at the edge."""
    edge = Edge("bench", TOPIC)

    @broker.subscriber(TOPIC, group_id="g", ack_policy=ACK, decoder=the_message)
    async def consume(msg: KafkaMessage) -> None:
        [record] = records_of(msg.raw_message)
        await edge.handle(record.value, record.key, SESSION_COMMANDS, nothing)

    return consume


def typed_messages(broker: KafkaBroker) -> Any:
    """FastStream as designed: a typed handler, one message at a time."""

    @broker.subscriber(TOPIC, group_id="g", ack_policy=ACK)
    async def consume(command: SessionCommand) -> None:
        await nothing(command)

    return consume


def typed_batches(broker: KafkaBroker) -> Any:
    """FastStream as designed for batches: the whole batch validated as one list (one poison
    record fails every record of the batch)."""

    @broker.subscriber(TOPIC, group_id="g", ack_policy=ACK, **BATCH_OPTIONS)  # type: ignore[untyped-decorator]
    async def consume(commands: list[SessionCommand]) -> None:
        for command in commands:
            await nothing(command)

    return consume


def bare_messages(broker: KafkaBroker) -> Any:
    """One message at a time, not validated: FastStream's own cost per message."""

    @broker.subscriber(TOPIC, group_id="g", ack_policy=ACK, decoder=the_message)
    async def consume(msg: KafkaMessage) -> None:
        await nothing(msg)

    return consume


ARMS: dict[str, tuple[Callable[[KafkaBroker], Any], bool, bool]] = {
    # name: (subscriber, apply_types, batch)
    "no validation, per message": (bare_messages, False, False),
    "edge, batches (today)": (edge_batches, False, True),
    "edge, per message": (edge_messages, False, False),
    "apply_types, per message": (typed_messages, True, False),
    "apply_types, batches": (typed_batches, True, True),
}


async def measure(name: str, given: list[ConsumerRecord[bytes, bytes]]) -> float:
    """Seconds per message of one arm over `given`."""
    build, apply_types, batch = ARMS[name]
    # The services' logging: FastStream's per-message lines at DEBUG, not emitted.
    broker = KafkaBroker(apply_types=apply_types, logger=log, log_level=logging.DEBUG)
    build(broker)
    async with TestKafkaBroker(broker) as started:
        # The test broker logs to a MagicMock; a service logs to a real logger (at INFO, so
        # FastStream's DEBUG lines are dropped by `isEnabledFor`).
        started.config.logger.logger = RealLoggerObject(log)
        [subscriber] = started.subscribers
        started_at = time.perf_counter()
        if batch:
            for i in range(0, len(given), BATCH):
                await subscriber.process_message(tuple(given[i : i + BATCH]))
        else:
            for record in given:
                await subscriber.process_message(record)
        return (time.perf_counter() - started_at) / len(given)


def validation_only(given: list[ConsumerRecord[bytes, bytes]]) -> dict[str, float]:
    """The validation step alone: the edge's `validate_json` of the bytes, against decoding
    to Python first and validating that (what a typed handler's injection does)."""
    raws = [record.value for record in given]
    started = time.perf_counter()
    for raw in raws:
        SESSION_COMMANDS.validate_json(raw)
    edge = (time.perf_counter() - started) / len(raws)
    started = time.perf_counter()
    for raw in raws:
        SESSION_COMMANDS.validate_python(json.loads(raw))
    decoded = (time.perf_counter() - started) / len(raws)
    return {"validate_json": edge * 1e6, "json.loads + validate_python": decoded * 1e6}


async def orderings(given: list[ConsumerRecord[bytes, bytes]], io_s: float = 0.001) -> dict[str, float]:
    """Wall time of one batch whose every record waits `io_s` (a database round trip), in
    milliseconds: today's `per_key` (keys concurrently, each key's records in order),
    FastStream's consume loop (one record at a time), and its `max_workers` over the manual
    commit (one consumer per partition: partitions concurrently)."""

    async def handle(record: ConsumerRecord[bytes, bytes]) -> None:
        await asyncio.sleep(io_s)

    async def in_order(part: list[ConsumerRecord[bytes, bytes]]) -> None:
        for record in part:
            await handle(record)

    async def by_partition(batch: list[ConsumerRecord[bytes, bytes]]) -> None:
        parts: dict[int, list[ConsumerRecord[bytes, bytes]]] = {}
        for record in batch:
            parts.setdefault(record.partition, []).append(record)
        await asyncio.gather(*(in_order(part) for part in parts.values()))

    batch = given[:BATCH]
    ways: dict[str, Callable[[], Awaitable[None]]] = {
        "per key (today)": lambda: per_key(batch, handle),
        "one at a time": lambda: in_order(batch),
        "per partition (max_workers)": lambda: by_partition(batch),
    }
    out = {}
    for name, run in ways.items():
        started = time.perf_counter()
        await run()
        out[name] = round((time.perf_counter() - started) * 1000, 1)
    return out


async def poison_in_a_typed_batch(given: list[ConsumerRecord[bytes, bytes]]) -> dict[str, Any]:
    """What a typed batch handler receives when one record of ten is poison: nothing (the
    list fails validation as a whole), so it cannot park that record and handle the rest."""
    reached: list[object] = []
    broker = KafkaBroker(apply_types=True, logger=log, log_level=logging.DEBUG)

    @broker.subscriber(TOPIC, group_id="g", ack_policy=ACK, **BATCH_OPTIONS)  # type: ignore[untyped-decorator]
    async def consume(commands: list[SessionCommand]) -> None:
        reached.extend(commands)

    batch = list(given[:10])
    batch[3] = dataclasses.replace(batch[3], value=b'{"type": "ProcessSession"}')  # no session_id
    async with TestKafkaBroker(broker) as started:
        started.config.logger.logger = RealLoggerObject(log)
        [subscriber] = started.subscribers
        try:
            await subscriber.process_message(tuple(batch))
            outcome = "handled"
        except Exception as exc:
            outcome = type(exc).__name__
    return {"records": len(batch), "poison": 1, "reached_the_handler": len(reached), "outcome": outcome}


async def _not_recorded(self: CallRecorder, message: Any) -> None:
    return None


async def main(messages: int, rounds: int) -> dict[str, Any]:
    # The test broker records every call for its assertions (a MagicMock call and the
    # decoded body per message): not part of consuming, so not measured.
    CallRecorder.record = _not_recorded  # type: ignore[method-assign]
    given = records(messages)
    seen: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(rounds):
        for name in ARMS:  # alternating arms: drift on a shared machine hits each alike
            seen[name].append(await measure(name, given))
    medians = {name: statistics.median(values) * 1e6 for name, values in seen.items()}
    today = medians["edge, batches (today)"]
    return {
        "messages": messages,
        "rounds": rounds,
        "us_per_message": {name: round(value, 2) for name, value in medians.items()},
        "ratio_to_today": {name: round(value / today, 2) for name, value in medians.items()},
        "validation_us": {k: round(v, 2) for k, v in validation_only(given).items()},
        f"batch_of_{BATCH}_with_1ms_io_ms": await orderings(given),
        "typed_batch_with_poison": await poison_in_a_typed_batch(given),
    }


def cli() -> None:
    logging.basicConfig(level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.messages, args.rounds)), indent=2))


if __name__ == "__main__":
    cli()
