"""The AsyncAPI generator: payloads from the contract types, the subscriber's own adapter."""

from __future__ import annotations

from typing import Any

import pytest
from muster_contracts.commands import DELEGATION_COMMANDS, CancelExecution, RunExecution
from muster_runtime.messaging import asyncapi, topics
from muster_runtime.messaging.edge import Edge
from muster_runtime.messaging.service import make_broker, received_payloads, subscribe_batch


def test_a_union_becomes_a_choice_and_its_models_become_schemas() -> None:
    schemas: dict[str, Any] = {}
    choice = asyncapi._schema_of(RunExecution | CancelExecution, schemas)
    assert [ref["$ref"] for ref in choice["oneOf"]] == [
        "#/components/schemas/RunExecution",
        "#/components/schemas/CancelExecution",
    ]
    assert {"RunExecution", "CancelExecution"} <= set(schemas)
    single = asyncapi._schema_of(asyncapi.DeadLetter, schemas)
    assert single == {"$ref": "#/components/schemas/DeadLetter"}
    assert schemas["DeadLetter"]["required"] == ["source_topic", "consumer", "error", "key", "raw"]


def test_a_discriminated_union_names_its_property_as_asyncapi_wants() -> None:
    choice = asyncapi._schema_of(DELEGATION_COMMANDS, {})
    assert choice["discriminator"] == "type"


def test_a_batch_subscriber_records_what_it_validates_with() -> None:
    settings = asyncapi.documentation_settings()
    broker = make_broker(settings, "test")

    async def dispatch(_: Any) -> None:
        return None

    subscribe_batch(
        broker,
        settings,
        Edge("test", topics.DELEGATIONS),
        group_id="test",
        adapter=DELEGATION_COMMANDS,
        dispatch=dispatch,
        title="test-delegations",
        description="",
    )
    assert received_payloads(broker) == {"test-delegations": DELEGATION_COMMANDS}


def test_a_contract_whose_subscriber_is_missing_is_refused() -> None:
    contract = asyncapi.Contract(
        service="nothing",
        description="",
        build=lambda settings: make_broker(settings, "nothing"),
        receives=asyncapi.Flow("absent", topics.EVENTS),
        sends=(),
    )
    with pytest.raises(RuntimeError, match="no subscriber titled 'absent'"):
        asyncapi.build_document(contract)
