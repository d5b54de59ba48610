"""The harness's Kafka contract (AsyncAPI), built by the one generator (`make docs`)."""

from __future__ import annotations

from faststream.kafka import KafkaBroker
from muster_contracts.commands import RunExecution
from muster_contracts.deltas import AssistantDelta
from muster_runtime.messaging import topics
from muster_runtime.messaging.asyncapi import Contract, Flow, dead_letters_flow, events_flow
from muster_runtime.process.settings import Settings

from muster_harness.bootstrap import build


def _broker(settings: Settings) -> KafkaBroker:
    return build(settings).broker


CONTRACT = Contract(
    service="harness",
    description="Runs NORMAL and SIDE_TASK session loops: consumes session commands, appends the "
    "loop's events and sends RunExecution for every delegation.",
    build=_broker,
    # The payload is every session command the subscriber validates with.
    receives=Flow("harness-commands", topics.COMMANDS, group="harness"),
    sends=(
        events_flow(
            "harness-events",
            "The session loop's events (USER message and RUNNING at a turn start, ASSISTANT "
            "and TOOL messages, ToolCallStarted, COMPLETED/FAILED, CompactionRecorded) and, in "
            "a delegation transaction, the child session's first events, ExecutionStarted, "
            "SubagentSessionCreated and ExecutionStatusChanged.",
        ),
        Flow(
            "harness-delegations",
            topics.DELEGATIONS,
            "One RunExecution per delegate or delegate_followup call, written in the "
            "transaction that creates the execution.",
            RunExecution,
        ),
        Flow(
            "harness-deltas",
            topics.DELTAS,
            "Pieces of an answer as the model streams it (NORMAL and SIDE_TASK sessions), "
            "published straight to "
            "Kafka, fire-and-forget (never through the event store or the outbox; dropped "
            "under load): a preview of the ASSISTANT message recorded next with the same "
            "messageId. The topic keeps records one minute (ADR 0039).",
            AssistantDelta,
        ),
        dead_letters_flow("harness-dead-letters", "muster.commands"),
    ),
)
