"""The gateway's Kafka contract as AsyncAPI, built from the same broker factory the service
runs (no connection is made). `python -m muster_gateway.asyncapi > asyncapi.json`."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from faststream.specification import AsyncAPI
from muster_contracts.published import RecordedEvent
from muster_runtime.settings import Settings

from muster_gateway.bootstrap import LIVE_EVENTS, build_broker


@functools.cache
def asyncapi_schema() -> dict[str, Any]:
    settings = Settings(
        database_url="",
        kafka_bootstrap_servers="localhost:9092",
        data_dir=Path("."),
        instance_id="{instance_id}",
    )
    broker = build_broker(settings, lambda session_id: None)
    spec = AsyncAPI(
        broker,
        title="muster gateway",
        version="0.1.0",
        description="Kafka side of the gateway: consumes muster.events, emits commands.",
    )
    schema: dict[str, Any] = spec.to_specification().to_jsonable()
    _document_payload(schema)
    return schema


def _document_payload(schema: dict[str, Any]) -> None:
    """The handler reads the raw body (to skip bad records instead of failing), so FastStream
    cannot infer the payload; describe it with the published contract model."""
    payload = RecordedEvent.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.setdefault("components", {}).setdefault("schemas", {})["RecordedEvent"] = payload
    for name, message in schema["components"].get("messages", {}).items():
        if name.startswith(f"{LIVE_EVENTS}:"):
            message["payload"] = {"$ref": "#/components/schemas/RecordedEvent"}
    schema["components"]["schemas"].pop("EmptyPayload", None)


if __name__ == "__main__":
    print(json.dumps(asyncapi_schema(), indent=2))
