"""`make docs`: one AsyncAPI document per service, built from the services' own brokers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from muster_launcher import asyncapi

EXPECTED: dict[str, dict[str, Any]] = {
    "gateway": {
        "receives": ("muster.events", "gateway-<instance_id>"),
        "topics": {"muster.events", "muster.commands", "muster.deltas"},
        "schemas": {"RecordedEvent", "ProcessSession", "CancelSession", "AssistantDelta"},
    },
    "harness": {
        "receives": ("muster.commands", "harness"),
        "topics": {"muster.commands", "muster.events", "muster.delegations", "muster.dlq", "muster.deltas"},
        "schemas": {
            "ProcessSession",
            "ResumeSession",
            "CancelSession",
            "RunExecution",
            "RecordedEvent",
            "AssistantDelta",
        },
    },
    "subagent-worker": {
        "receives": ("muster.delegations", "subagent-worker"),
        "topics": {"muster.delegations", "muster.events", "muster.dlq", "muster.deltas"},
        "schemas": {"RunExecution", "CancelExecution", "RecordedEvent", "DeadLetter", "AssistantDelta"},
    },
    "recovery": {
        "receives": ("muster.events", "recovery"),
        "topics": {"muster.events", "muster.commands", "muster.delegations", "muster.dlq"},
        "schemas": {"RecordedEvent", "ResumeSession", "ProcessSession", "RunExecution", "CancelExecution"},
    },
}


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("asyncapi")
    assert asyncapi.main(["--out", str(out)]) == 0
    return {path.stem: json.loads(path.read_text()) for path in sorted(out.glob("*.json"))}


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["$ref"]} if isinstance(value.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_refs(v) for v in value))
    return set()


def test_one_document_per_service(documents: dict[str, dict[str, Any]]) -> None:
    assert set(documents) == set(EXPECTED)
    for name, document in documents.items():
        assert document["asyncapi"] == "3.0.0"
        assert document["info"]["title"] == f"muster {name}"


@pytest.mark.parametrize("service", sorted(EXPECTED))
def test_document_names_its_topics_and_payload_schemas(
    documents: dict[str, dict[str, Any]], service: str
) -> None:
    document, expected = documents[service], EXPECTED[service]
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == expected["topics"]
    schemas = document["components"]["schemas"]
    assert expected["schemas"] <= set(schemas)
    assert "EmptyPayload" not in schemas
    # Every message has a real payload and says what its record key is.
    for message in document["components"]["messages"].values():
        assert _refs(message["payload"]) and all(
            ref.startswith("#/components/schemas/") for ref in _refs(message["payload"])
        )
        assert message["bindings"]["kafka"]["key"]["type"] == "string"


@pytest.mark.parametrize("service", sorted(EXPECTED))
def test_every_reference_resolves(documents: dict[str, dict[str, Any]], service: str) -> None:
    document = documents[service]
    for ref in _refs(document):
        node: Any = document
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        assert node is not None, ref


@pytest.mark.parametrize("service", sorted(EXPECTED))
def test_the_subscriber_is_the_services_own(documents: dict[str, dict[str, Any]], service: str) -> None:
    topic, group = EXPECTED[service]["receives"]
    document = documents[service]
    (receive,) = [
        name
        for name, op in document["operations"].items()
        if op["action"] == "receive" and "deltas" not in name  # the gateway's previews: below
    ]
    assert document["channels"][receive]["address"] == topic
    group_id = document["operations"][receive]["bindings"]["kafka"]["groupId"]
    if "<" in group:
        assert group_id["pattern"] == "^gateway-.+$"
    else:
        assert group_id["enum"] == [group]


def test_the_gateway_receives_deltas_in_a_group_of_its_own(documents: dict[str, dict[str, Any]]) -> None:
    gateway = documents["gateway"]
    operation = gateway["operations"]["gateway-deltas"]
    assert operation["action"] == "receive"
    assert gateway["channels"]["gateway-deltas"]["address"] == "muster.deltas"
    assert operation["bindings"]["kafka"]["groupId"]["pattern"] == "^gateway-.+$"
    delta = gateway["components"]["schemas"]["AssistantDelta"]
    assert {"sessionId", "messageId", "index", "text"} <= set(delta["properties"])


def test_run_execution_schema_carries_the_contract_fields(documents: dict[str, dict[str, Any]]) -> None:
    run = documents["subagent-worker"]["components"]["schemas"]["RunExecution"]
    assert {"execution_id", "child_session_id", "parent_session_id", "message_id"} <= set(run["properties"])
    assert run["properties"]["type"]["const"] == "RunExecution"


def test_output_is_deterministic(tmp_path: Path, documents: dict[str, dict[str, Any]]) -> None:
    asyncapi.write_documents(tmp_path)
    again = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("*.json")}
    assert again == documents


def test_payloads_follow_the_contract_unions(documents: dict[str, dict[str, Any]]) -> None:
    """A command or event added to `muster_contracts` appears without being listed."""
    from muster_contracts.commands import SESSION_COMMANDS
    from muster_contracts.registry import EVENT_TYPES

    harness = documents["harness"]
    (receive,) = [m for name, m in harness["components"]["messages"].items() if "Subscribe" in name]
    commands = {ref.rsplit("/", 1)[-1] for ref in _refs(receive["payload"])}
    assert commands == {ref.rsplit("/", 1)[-1] for ref in _refs(SESSION_COMMANDS.json_schema())}
    assert "CompactSession" in commands
    for document in documents.values():
        recorded = document["components"]["schemas"]["RecordedEvent"]
        assert set(recorded["properties"]["type"]["enum"]) == set(EVENT_TYPES)
        assert {r.rsplit("/", 1)[-1] for r in _refs(recorded["properties"]["payload"])} == {
            cls.__name__ for cls in EVENT_TYPES.values()
        }


def test_the_gateway_serves_the_document_make_docs_writes(documents: dict[str, dict[str, Any]]) -> None:
    from muster_gateway.asyncapi import asyncapi_schema

    assert json.loads(json.dumps(asyncapi_schema())) == documents["gateway"]


def test_the_committed_documents_are_up_to_date(documents: dict[str, dict[str, Any]]) -> None:
    committed = Path(__file__).resolve().parents[3] / "docs" / "asyncapi"
    for service, document in documents.items():
        assert json.loads((committed / f"{service}.json").read_text()) == document, (
            f"docs/asyncapi/{service}.json is stale: run `make docs`"
        )
