"""Composition root of the recovery service, shared by production and tests."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import UUID

from faststream import FastStream
from faststream.kafka import KafkaBroker
from muster_contracts.published import RecordedEvent
from muster_runtime.messaging import topics
from muster_runtime.messaging.consuming import peek_event
from muster_runtime.messaging.edge import Edge
from muster_runtime.messaging.service import Resources, make_broker, resources, subscribe_batch
from muster_runtime.process import tracing
from muster_runtime.process.settings import Settings
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory
from pydantic import TypeAdapter

from muster_recovery import handlers, tree_status
from muster_recovery.placements import Placements
from muster_recovery.postgres_scans import PostgresScans
from muster_recovery.reconcile import housekeeping, reconcile_executions, reconcile_sessions
from muster_recovery.scan_port import RecoveryScans

log = logging.getLogger("muster.recovery")

EVENT_MESSAGE: TypeAdapter[RecordedEvent] = TypeAdapter(RecordedEvent)


@dataclass
class Recovery:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    held: Resources | None = None
    scans: RecoveryScans | None = None


HOUSEKEEPING_EVERY_S = 300.0
# Tree signals are kept by reacting to events; this repairs only those whose event was lost
# with the broker. Its query reads every root, so it runs seldom (at start, then this often).
TREE_REPAIR_EVERY_S = 30.0


async def reconcile_forever(uows: UnitOfWorkFactory, scans: RecoveryScans, settings: Settings) -> None:
    last_housekeeping = last_tree_repair = 0.0
    first = True
    while True:
        try:
            await reconcile_sessions(uows, scans, grace_s=settings.lease_ttl_s)
            if time.monotonic() - last_housekeeping > HOUSEKEEPING_EVERY_S:
                await housekeeping(scans)
                last_housekeeping = time.monotonic()
            await reconcile_executions(
                uows, scans, grace_s=settings.lease_ttl_s, cancel_grace_s=settings.cancel_grace_s
            )
            if first or time.monotonic() - last_tree_repair > TREE_REPAIR_EVERY_S:
                await tree_status.reconcile(uows, scans)
                last_tree_repair = time.monotonic()
            if first:
                # Reconciliation at start is done: what a crash left behind is re-issued.
                log.info("recovery_ready instance=%s", settings.instance_id)
                first = False
        except Exception:
            log.exception("reconcile_failed")
        await asyncio.sleep(settings.reconcile_interval_s)


def concerns(raw: bytes, placements: Placements | None = None) -> bool:
    """Most events need nothing from recovery: those are acknowledged unvalidated (a record
    that is not an event is validated, and dead-lettered, as before). A session's creation
    tells `placements` where it sits."""
    peeked = peek_event(raw)
    if peeked is None:
        return True
    if peeked.type == "SessionCreated" and placements is not None:
        placements.learn(peeked.payload)
    return handlers.reacts_to(peeked.type, peeked.payload, peeked.metadata) or tree_status.reacts_to(
        peeked.type
    )


def build(settings: Settings) -> Recovery:
    broker = make_broker(settings, "recovery")
    edge = Edge("recovery", topics.EVENTS)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with tracing.running("recovery", settings), resources(settings) as held:
            edge.producer = held.producer
            recovery.held = held
            recovery.scans = PostgresScans(held.pool)
            held.spawn(reconcile_forever(held.uow, recovery.scans, settings))
            yield

    placements = Placements()

    async def is_subagent(session_id: UUID) -> bool:
        assert recovery.scans is not None
        placed = await placements.of(recovery.scans, session_id)
        return placed is not None and placed.session_type == "SUBAGENT"

    async def dispatch(event: RecordedEvent) -> None:
        assert recovery.held is not None and recovery.scans is not None
        await handlers.on_event(event, recovery.held.uow, is_subagent)
        # Any change that can move a tree's signals, wherever it is in the tree.
        await tree_status.on_event(event, recovery.held.uow, recovery.scans, placements)

    subscribe_batch(
        broker,
        settings,
        edge,
        group_id="recovery",
        adapter=EVENT_MESSAGE,
        dispatch=dispatch,
        title="recovery-events",
        description="Every recorded event; drives the barrier's backstop and cancellation cascades.",
        # A backstop (the last child's worker settles the barrier, ADR 0011): polling the
        # broker every few ms for it would cost CPU on every turn for nothing.
        fetch_max_wait_ms=settings.recovery_fetch_max_wait_ms,
        concerns=functools.partial(concerns, placements=placements),
    )
    recovery = Recovery(settings=settings, broker=broker, app=FastStream(broker, lifespan=lifespan))
    return recovery
