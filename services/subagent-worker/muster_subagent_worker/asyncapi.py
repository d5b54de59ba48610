"""The subagent worker's Kafka contract (AsyncAPI), built by the one generator (`make docs`)."""

from __future__ import annotations

from faststream.kafka import KafkaBroker
from muster_contracts.deltas import AssistantDelta
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
        Flow(
            "subagent-worker-deltas",
            topics.DELTAS,
            "Pieces of an answer as the model streams it (SUBAGENT sessions), published straight to "
            "Kafka, fire-and-forget (never through the event store or the outbox; dropped "
            "under load): a preview of the ASSISTANT message recorded next with the same "
            "messageId. The topic keeps records one minute (ADR 0039).",
            AssistantDelta,
        ),
        dead_letters_flow("subagent-worker-dead-letters", "muster.delegations"),
    ),
)
