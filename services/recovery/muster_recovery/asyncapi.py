"""The recovery service's Kafka contract (AsyncAPI), built by the one generator (`make docs`)."""

from __future__ import annotations

from faststream.kafka import KafkaBroker
from muster_contracts.commands import CancelExecution, ProcessSession, ResumeSession, RunExecution
from muster_runtime.messaging import topics
from muster_runtime.messaging.asyncapi import Contract, Flow, dead_letters_flow, events_flow
from muster_runtime.process.settings import Settings

from muster_recovery.bootstrap import build


def _broker(settings: Settings) -> KafkaBroker:
    return build(settings).broker


CONTRACT = Contract(
    service="recovery",
    description="The barrier, result delivery, the cancellation cascade, deadlines and "
    "reconciliation from the event store.",
    build=_broker,
    # The payload is the published event the subscriber validates with.
    receives=Flow("recovery-events", topics.EVENTS, group="recovery"),
    sends=(
        events_flow(
            "recovery-events-out",
            "Delivery (TOOL messages and ExecutionStatusChanged on the parent, "
            "ExecutionDelivered on the execution), suppression, stopped executions "
            "(child CANCELLED, ExecutionFinished), and SessionTreeStatusChanged on a "
            "root's stream when its tree's signals change.",
        ),
        Flow(
            "recovery-commands",
            topics.COMMANDS,
            "ResumeSession when the barrier delivered a parent's results; ProcessSession "
            "(reason recovery or stale_input) when reconciliation finds a turn nobody runs "
            "or accepted input nobody started.",
            ResumeSession | ProcessSession,
        ),
        Flow(
            "recovery-delegations",
            topics.DELEGATIONS,
            "RunExecution for an open execution nobody holds a lease on; CancelExecution "
            "when an execution is cancelled (parent cancelled) or failed (deadline).",
            RunExecution | CancelExecution,
        ),
        dead_letters_flow("recovery-dead-letters", "muster.events"),
    ),
)
