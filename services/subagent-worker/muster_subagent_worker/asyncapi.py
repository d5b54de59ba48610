"""The subagent worker's Kafka contract (AsyncAPI), built by the one generator (`make docs`)."""

from __future__ import annotations

from faststream.kafka import KafkaBroker
from muster_runtime.messaging import topics
from muster_runtime.messaging.asyncapi import Contract, Flow, dead_letters_flow, events_flow
from muster_runtime.process.settings import Settings

from muster_subagent_worker.bootstrap import build


def _broker(settings: Settings) -> KafkaBroker:
    return build(settings).broker


CONTRACT = Contract(
    service="subagent-worker",
    description="Runs executions (SUBAGENT session loops) under a lease; interrupts them on CancelExecution.",
    build=_broker,
    # The payload is every delegation command the subscriber validates with.
    receives=Flow("subagent-worker-delegations", topics.DELEGATIONS, group="subagent-worker"),
    sends=(
        events_flow(
            "subagent-worker-events",
            "The child session loop's events and, with the child's final answer, "
            "ExecutionFinished on the execution's stream and ExecutionStatusChanged on the "
            "parent's.",
        ),
        dead_letters_flow("subagent-worker-dead-letters", "muster.delegations"),
    ),
)
