"""The one AsyncAPI 3.0 generator of muster: a service's Kafka contract, built from the
FastStream broker its own bootstrap builds (nothing connects: no socket, no lifespan).

FastStream generates the document; payloads come from the contracts package, so a new
command or event appears in the documents without anyone listing it:
- what a service sends is declared as documentation-only publishers whose `schema` is the
  contract type (a model or a union); FastStream infers those payloads itself. Services
  never publish directly: the outbox relay does, after the decision's transaction.
- what a service receives is the type its batch subscriber validates records with
  (`subscribe_batch` records it per title). The handler takes the raw batch, so a poison
  record is dead-lettered instead of failing the batch, which leaves FastStream nothing to
  infer: the generator adds that payload.
- `RecordedEvent.payload` is documented as one of the domain events (`muster_contracts.events`).

`python -m muster_launcher.asyncapi` writes every service's document (`make docs`); the
gateway serves its own at `/asyncapi.json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI
from muster_contracts.published import RecordedEvent
from muster_contracts.registry import EVENTS
from pydantic import BaseModel, TypeAdapter

from muster_runtime.messaging import topics
from muster_runtime.messaging.service import received_payloads
from muster_runtime.process.settings import Settings

VERSION = "0.1.0"
KAFKA_BINDING_VERSION = "0.4.0"
SCHEMA_REF = "#/components/schemas/{model}"

KEY_OF = {
    topics.COMMANDS: "The session id: one partition orders every command of a session.",
    topics.DELEGATIONS: "The child session id of the execution.",
    topics.EVENTS: "The stream id: a session id, or an execution id for execution events.",
    topics.DEAD_LETTERS: "The key of the parked record, unchanged.",
    topics.DELTAS: "The session id: the pieces of one answer stay in order.",
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
    """One documented channel: a subscriber (receive) or an outbox flow (send). `payload`
    is a contract type; a receive's defaults to what its subscriber validates with."""

    title: str
    topic: str
    description: str = ""
    payload: Any = None
    group: str | None = None  # receive: the consumer group ("<…>" marks a pattern)


@dataclass(frozen=True)
class Contract:
    service: str
    description: str
    build: Callable[[Settings], KafkaBroker]
    receives: Flow  # registered by the service's bootstrap under this title
    sends: tuple[Flow, ...]
    # Further subscribers of the service's broker (the gateway's deltas), payload given.
    also_receives: tuple[Flow, ...] = ()


def events_flow(title: str, what: str) -> Flow:
    return Flow(
        title,
        topics.EVENTS,
        f"{what} Each appended event is published once per append by the outbox relay, "
        "keyed by its stream id (at least once: consumers are idempotent).",
        RecordedEvent,
    )


def dead_letters_flow(title: str, source: str) -> Flow:
    return Flow(
        title,
        topics.DEAD_LETTERS,
        f"A {source} record that failed validation, or whose handler failed 5 times, is parked "
        "here with the reason and the consumer moves on. Sent directly, not through the outbox.",
        DeadLetter,
    )


def documentation_settings() -> Settings:
    """Enough for a bootstrap to build its broker; nothing is connected."""
    return Settings(database_url="", kafka_bootstrap_servers="localhost:9092", data_dir=Path("."))


def build_document(contract: Contract) -> dict[str, Any]:
    broker = contract.build(documentation_settings())
    for flow in contract.sends:
        broker.publisher(flow.topic, title=flow.title, description=flow.description, schema=flow.payload)
    document: dict[str, Any] = (
        AsyncAPI(
            broker, title=f"muster {contract.service}", version=VERSION, description=contract.description
        )
        .to_specification()
        .to_jsonable()
    )
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    for receives in (contract.receives, *contract.also_receives):
        if receives.title not in document.get("channels", {}):
            raise RuntimeError(f"{contract.service}: no subscriber titled {receives.title!r}")
        payload = receives.payload or received_payloads(broker).get(receives.title)
        if payload is None:
            raise RuntimeError(f"{contract.service}: no payload known for {receives.title!r}")
        _set_payload(document, receives.title, _schema_of(payload, schemas))
    _describe_events(schemas)
    for flow in (contract.receives, *contract.also_receives, *contract.sends):
        _bind(document, flow)
    _drop_unused_schemas(document)
    return document


def _schema_of(payload: Any, schemas: dict[str, Any]) -> dict[str, Any]:
    """A reference to `payload`'s schema (a choice for a union), its models added to `schemas`."""
    adapter = payload if isinstance(payload, TypeAdapter) else TypeAdapter(payload)
    schema = dict(adapter.json_schema(ref_template=SCHEMA_REF))
    schemas.update(schema.pop("$defs", {}))
    if "anyOf" in schema:  # a plain union: its members differ by their `type` literal
        schema["oneOf"] = schema.pop("anyOf")
    if "oneOf" in schema:
        # AsyncAPI's schema object names the discriminating property with a string.
        if isinstance(schema.get("discriminator"), dict):
            schema["discriminator"] = schema["discriminator"]["propertyName"]
        return schema
    name = schema.get("title", "Payload")
    schemas[name] = schema
    return {"$ref": SCHEMA_REF.format(model=name)}


def _set_payload(document: dict[str, Any], title: str, payload: dict[str, Any]) -> None:
    for ref in document["channels"][title].get("messages", {}).values():
        name = ref["$ref"].rsplit("/", 1)[-1]
        document["components"]["messages"][name]["payload"] = payload


def _describe_events(schemas: dict[str, Any]) -> None:
    """`RecordedEvent.payload` is one of the domain events, named by its `type`."""
    recorded = schemas.get(RecordedEvent.__name__)
    if recorded is None:
        return
    choice = _schema_of(EVENTS, schemas)
    recorded["properties"]["payload"] = {
        "description": "The event's fields, as appended; `type` names the event.",
        "oneOf": choice["oneOf"],
    }
    names = sorted(ref["$ref"].rsplit("/", 1)[-1] for ref in choice["oneOf"])
    recorded["properties"]["type"] = {"type": "string", "enum": names, "description": "The event's type."}


def _bind(document: dict[str, Any], flow: Flow) -> None:
    """The record key of every message of `flow`, and a receive's consumer group."""
    channel = document["channels"][flow.title]
    if flow.description and not channel.get("description"):
        channel["description"] = flow.description
    for ref in channel.get("messages", {}).values():
        message = document["components"]["messages"][ref["$ref"].rsplit("/", 1)[-1]]
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
    """Keep the schemas some message reaches (FastStream's placeholder for an untyped
    handler, `EmptyPayload`, among the others goes)."""
    schemas: dict[str, Any] = document["components"]["schemas"]
    reachable = json.dumps(document["components"].get("messages", {}))
    used: set[str] = set()
    pending = [name for name in schemas if json.dumps(SCHEMA_REF.format(model=name)) in reachable]
    while pending:
        name = pending.pop()
        if name not in used:
            used.add(name)
            body = json.dumps(schemas[name])
            pending += [other for other in schemas if json.dumps(SCHEMA_REF.format(model=other)) in body]
    for name in set(schemas) - used:
        del schemas[name]
