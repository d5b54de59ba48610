"""Batch consumption: one offset commit per fetched batch instead of one per message, and
the messages of different keys handled concurrently (those of one key stay in order).

A failure nacks the whole batch and Kafka redelivers it; handlers are idempotent, so the
messages that had already succeeded are no-ops the second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson
from aiokafka.structs import ConsumerRecord

Record: TypeAlias = "ConsumerRecord[bytes, bytes]"

# Subscriber options for batch mode. A fetch that returns records is handed over at once;
# with the services' consumer (`consumer.ServiceConsumer`) `batch_timeout_ms` is only how
# often an idle consumer re-decides its fetch wait (FastStream's own consumer would also
# sleep this long after every empty poll).
BATCH_OPTIONS: dict[str, Any] = {"batch": True, "max_records": 500, "batch_timeout_ms": 200}


@dataclass(frozen=True)
class Peeked:
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]


def peek_event(raw: bytes) -> Peeked | None:
    """The type, payload and metadata of a `muster.events` record, read without validating
    it (a consumer that ignores most events filters them with this); None when it is not
    one."""
    try:
        record = orjson.loads(raw)
        peeked = Peeked(record["type"], record.get("payload") or {}, record.get("metadata") or {})
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    well_formed = isinstance(peeked.type, str) and isinstance(peeked.payload, dict)
    return peeked if well_formed and isinstance(peeked.metadata, dict) else None


def produced_since(records: Iterable[Any], since_ms: float) -> list[int]:
    """The producers' timestamps (wall-clock ms) of `records` made at or after `since_ms`:
    how late a consumer reads is judged on these, since what was produced before it started
    is history a new group reads first, not a consumer falling behind."""
    stamps = (int(r.timestamp) for r in records if r.timestamp is not None and r.timestamp > 0)
    return [stamp for stamp in stamps if stamp >= since_ms]


def records_of(raw_message: Any) -> list[Record]:
    if isinstance(raw_message, list | tuple):
        return list(raw_message)
    return [raw_message]


async def per_key(records: list[Record], handle: Callable[[Record], Awaitable[None]]) -> None:
    groups: dict[bytes | None, list[Record]] = {}
    for record in records:
        groups.setdefault(record.key, []).append(record)

    async def run(group: list[Record]) -> None:
        for record in group:
            await handle(record)

    outcomes = await asyncio.gather(*(run(group) for group in groups.values()), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
