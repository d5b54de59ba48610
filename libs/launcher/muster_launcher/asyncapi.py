"""`make docs`: the Kafka contract of every service as AsyncAPI 3.0, one JSON file each.

Each service's FastStream broker is built by the service's own bootstrap (the code it runs
with), so the documented subscriber (topic, title, description) is the real one. Nothing
connects: building a broker opens no socket, and no lifespan runs.

Two things FastStream cannot see are added here:
- the payloads of the subscribers: every handler takes the raw batch (so that a poison
  record is dead-lettered instead of failing the batch), which leaves FastStream nothing to
  infer a schema from; they are the contract models of `muster_contracts`;
- what a service sends: services never publish directly, they write the outbox in their
  decision's transaction and an outbox relay publishes it. Those flows are declared below
  as documentation-only publishers.

Usage: `python -m muster_launcher.asyncapi [--out docs/asyncapi]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI
from muster_contracts.commands import (
    CancelExecution,
    CancelSession,
    ProcessSession,
    ResumeSession,
    RunExecution,
)
from muster_contracts.published import RecordedEvent
from muster_runtime import topics
from muster_runtime.settings import Settings
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

VERSION = "0.1.0"
DEFAULT_OUT = Path("docs") / "asyncapi"
KAFKA_BINDING_VERSION = "0.4.0"
SCHEMA_REF = "#/components/schemas/{model}"

KEY_OF = {
    topics.COMMANDS: "The session id: one partition orders every command of a session.",
    topics.DELEGATIONS: "The child session id of the execution.",
    topics.EVENTS: "The stream id: a session id, or an execution id for execution events.",
    topics.DEAD_LETTERS: "The key of the parked record, unchanged.",
}


class DeadLetter(BaseModel):
    """A record parked on `muster.dlq` by a consumer's edge: it failed validation, or its
    handler failed 5 times in a row. The consumer then moves on."""

    source_topic: str
    consumer: str
    error: str  # the reason, at most 2000 characters
    key: str | None
    raw: str  # the record's value as text


@dataclass(frozen=True)
class Flow:
    """One documented channel of a service: its subscriber (receive) or an outbox flow (send)."""

    title: str
    topic: str
    models: tuple[type[BaseModel], ...]
    description: str
    group: str | None = None  # receive: the consumer group


@dataclass(frozen=True)
class Contract:
    service: str
    description: str
    build: Callable[[Settings], KafkaBroker]
    receives: Flow  # registered by the service's bootstrap under this title
    sends: tuple[Flow, ...]


def _gateway(settings: Settings) -> KafkaBroker:
    from muster_gateway.bootstrap import build_broker

    return build_broker(settings, lambda _session_id: None)


def _harness(settings: Settings) -> KafkaBroker:
    from muster_harness.bootstrap import build

    return build(settings).broker


def _worker(settings: Settings) -> KafkaBroker:
    from muster_subagent_worker.bootstrap import build

    return build(settings).broker


def _recovery(settings: Settings) -> KafkaBroker:
    from muster_recovery.bootstrap import build

    return build(settings).broker


def _events(title: str, what: str) -> Flow:
    return Flow(
        title,
        topics.EVENTS,
        (RecordedEvent,),
        f"{what} Each appended event is published once per append by the outbox relay, "
        "keyed by its stream id (at least once: consumers are idempotent).",
    )


def _dead_letters(title: str, source: str) -> Flow:
    return Flow(
        title,
        topics.DEAD_LETTERS,
        (DeadLetter,),
        f"A {source} record that failed validation, or whose handler failed 5 times, is parked "
        "here with the reason and the consumer moves on. Sent directly, not through the outbox.",
    )


CONTRACTS: tuple[Contract, ...] = (
    Contract(
        service="gateway",
        description="The edge: WebSocket and REST. Consumes muster.events only as a doorbell for "
        "live subscriptions (the events themselves are read from the event store); its "
        "decisions write commands and events through the outbox.",
        build=_gateway,
        receives=Flow(
            "gateway-live-events",
            topics.EVENTS,
            (RecordedEvent,),
            "",
            group="gateway-<instance_id>",
        ),
        sends=(
            Flow(
                "gateway-commands",
                topics.COMMANDS,
                (ProcessSession,),
                "ProcessSession after a user message is accepted (also a side task's first).",
            ),
            Flow(
                "gateway-cancel",
                topics.COMMANDS,
                (CancelSession,),
                "CancelSession when a running turn is cancelled (or its session deleted).",
            ),
            _events(
                "gateway-events",
                "SessionCreated, UserMessageQueued, SessionPhaseChanged (CANCELLED) and "
                "QueuedMessagesDropped, appended by create_session, send_message and cancel; "
                "SideSessionCreated (source) and SessionForked (side task) by "
                "create_side_session; SessionSettingsChanged, SessionArchived, "
                "SessionUnarchived, SessionDeleted, SessionPromoted and SessionRead by the "
                "session-management routes.",
            ),
        ),
    ),
    Contract(
        service="harness",
        description="Runs NORMAL and SIDE_TASK session loops: consumes session commands, appends the "
        "loop's events and sends RunExecution for every delegation.",
        build=_harness,
        receives=Flow(
            "harness-commands",
            topics.COMMANDS,
            (ProcessSession, ResumeSession, CancelSession),
            "",
            group="harness",
        ),
        sends=(
            _events(
                "harness-events",
                "The session loop's events (USER message and RUNNING at a turn start, ASSISTANT "
                "and TOOL messages, ToolCallStarted, COMPLETED/FAILED) and, in a delegation "
                "transaction, the child session's first events, ExecutionStarted, "
                "SubagentSessionCreated and ExecutionStatusChanged.",
            ),
            Flow(
                "harness-delegations",
                topics.DELEGATIONS,
                (RunExecution,),
                "One RunExecution per delegate or delegate_followup call, written in the "
                "transaction that creates the execution.",
            ),
            _dead_letters("harness-dead-letters", "muster.commands"),
        ),
    ),
    Contract(
        service="subagent-worker",
        description="Runs executions (SUBAGENT session loops) under a lease; interrupts them "
        "on CancelExecution.",
        build=_worker,
        receives=Flow(
            "subagent-worker-delegations",
            topics.DELEGATIONS,
            (RunExecution, CancelExecution),
            "",
            group="subagent-worker",
        ),
        sends=(
            _events(
                "subagent-worker-events",
                "The child session loop's events and, with the child's final answer, "
                "ExecutionFinished on the execution's stream and ExecutionStatusChanged on the "
                "parent's.",
            ),
            _dead_letters("subagent-worker-dead-letters", "muster.delegations"),
        ),
    ),
    Contract(
        service="recovery",
        description="The barrier, result delivery, the cancellation cascade, deadlines and "
        "reconciliation from the event store.",
        build=_recovery,
        receives=Flow(
            "recovery-events",
            topics.EVENTS,
            (RecordedEvent,),
            "",
            group="recovery",
        ),
        sends=(
            _events(
                "recovery-events-out",
                "Delivery (TOOL messages and ExecutionStatusChanged on the parent, "
                "ExecutionDelivered on the execution), suppression, stopped executions "
                "(child CANCELLED, ExecutionFinished), and SessionTreeStatusChanged on a "
                "root's stream when its tree's signals change.",
            ),
            Flow(
                "recovery-commands",
                topics.COMMANDS,
                (ResumeSession, ProcessSession),
                "ResumeSession when the barrier delivered a parent's results; ProcessSession "
                "(reason recovery or stale_input) when reconciliation finds a turn nobody runs "
                "or accepted input nobody started.",
            ),
            Flow(
                "recovery-delegations",
                topics.DELEGATIONS,
                (RunExecution, CancelExecution),
                "RunExecution for an open execution nobody holds a lease on; CancelExecution "
                "when an execution is cancelled (parent cancelled) or failed (deadline).",
            ),
            _dead_letters("recovery-dead-letters", "muster.events"),
        ),
    ),
)


def dummy_settings() -> Settings:
    """Enough for a bootstrap to build its broker; nothing is connected."""
    return Settings(database_url="", kafka_bootstrap_servers="localhost:9092", data_dir=Path("."))


def _channel_titles(broker: KafkaBroker) -> set[str]:
    spec = AsyncAPI(broker).to_specification().to_jsonable()
    return set(spec.get("channels", {}))


def build_document(contract: Contract, settings: Settings | None = None) -> dict[str, Any]:
    broker = contract.build(settings or dummy_settings())
    declared = _channel_titles(broker)
    if contract.receives.title not in declared:
        raise RuntimeError(f"{contract.service}: no subscriber titled {contract.receives.title!r}")
    for flow in contract.sends:
        if flow.title not in declared:  # documentation only: the outbox relay publishes
            broker.publisher(flow.topic, title=flow.title, description=flow.description)
    document: dict[str, Any] = (
        AsyncAPI(
            broker,
            title=f"muster {contract.service}",
            version=VERSION,
            description=contract.description,
        )
        .to_specification()
        .to_jsonable()
    )
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    for flow in (contract.receives, *contract.sends):
        _describe(document, flow)
        schemas.update(_schemas(flow.models))
    _drop_unused_schemas(document)
    return document


def _schemas(models: Sequence[type[BaseModel]]) -> dict[str, Any]:
    _, top = models_json_schema([(model, "validation") for model in models], ref_template=SCHEMA_REF)
    found: dict[str, Any] = top.get("$defs", {})
    return found


def _describe(document: dict[str, Any], flow: Flow) -> None:
    """Payload (one model or a choice), record key and consumer group of `flow`."""
    channel = document["channels"][flow.title]
    if flow.description and not channel.get("description"):
        channel["description"] = flow.description
    refs = [{"$ref": SCHEMA_REF.format(model=model.__name__)} for model in flow.models]
    payload = refs[0] if len(refs) == 1 else {"oneOf": refs}
    for ref in channel.get("messages", {}).values():
        name = ref["$ref"].rsplit("/", 1)[-1]
        message = document["components"]["messages"][name]
        message["payload"] = payload
        message["bindings"] = {
            "kafka": {
                "key": {"type": "string", "description": KEY_OF[flow.topic]},
                "bindingVersion": KAFKA_BINDING_VERSION,
            }
        }
    if flow.group is not None:
        group = (
            {"type": "string", "pattern": "^gateway-.+$", "description": "One group per gateway instance."}
            if "<" in flow.group
            else {"type": "string", "enum": [flow.group]}
        )
        document["operations"][flow.title]["bindings"] = {
            "kafka": {"groupId": group, "bindingVersion": KAFKA_BINDING_VERSION}
        }


def _drop_unused_schemas(document: dict[str, Any]) -> None:
    schemas: dict[str, Any] = document["components"]["schemas"]
    text = json.dumps({k: v for k, v in document.items() if k != "components"}) + json.dumps(
        document["components"].get("messages", {})
    )
    used: set[str] = set()

    def refers(text: str, name: str) -> bool:
        return json.dumps(SCHEMA_REF.format(model=name)) in text

    pending = [name for name in schemas if refers(text, name)]
    while pending:
        name = pending.pop()
        if name in used:
            continue
        used.add(name)
        body = json.dumps(schemas[name])
        pending += [other for other in schemas if refers(body, other)]
    for name in list(schemas):
        if name not in used:
            del schemas[name]


def write_documents(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for contract in CONTRACTS:
        path = out_dir / f"{contract.service}.json"
        path.write_text(json.dumps(build_document(contract), indent=2) + "\n")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m muster_launcher.asyncapi", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    args = parser.parse_args(argv)
    for path in write_documents(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
