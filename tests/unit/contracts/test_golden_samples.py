"""Golden JSON samples pin the wire format: a change that alters how a published message
serialises fails here, and must instead bump `schema_version` with an upcaster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from muster_contracts.commands import DELEGATION_COMMANDS, SESSION_COMMANDS
from muster_contracts.published import RecordedEvent
from muster_contracts.registry import EVENT_TYPES
from muster_contracts.upcasting import load_event
from pydantic import BaseModel

GOLDEN = Path(__file__).parent / "golden"
SAMPLES = sorted(GOLDEN.glob("*.json"))


def _parse(name: str, body: dict[str, object]) -> BaseModel:
    kind, type_ = name.split(".", 1)
    if kind == "command":
        adapter = DELEGATION_COMMANDS if type_ in ("RunExecution", "CancelExecution") else SESSION_COMMANDS
        return adapter.validate_python(body)
    if kind == "event":
        return EVENT_TYPES[type_].model_validate(body)
    return RecordedEvent.model_validate(body)


def test_every_event_type_has_a_sample() -> None:
    names = {path.stem for path in SAMPLES}
    assert {f"event.{t}" for t in EVENT_TYPES} <= names


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_sample_round_trips_unchanged(path: Path) -> None:
    body = json.loads(path.read_text())
    model = _parse(path.stem, body)
    assert model.model_dump(mode="json") == body
    assert type(model).__name__ == path.stem.split(".", 1)[1]


@pytest.mark.parametrize("path", [p for p in SAMPLES if p.stem.startswith("event.")], ids=lambda p: p.stem)
def test_stored_payload_loads_back(path: Path) -> None:
    body = json.loads(path.read_text())
    event = load_event(body.pop("type"), body.pop("schema_version"), body)
    assert event.payload() == body


def test_contracts_are_frozen_and_strict() -> None:
    sample = json.loads((GOLDEN / "command.ProcessSession.json").read_text())
    command = SESSION_COMMANDS.validate_python(sample)
    with pytest.raises(ValueError):
        command.session_id = command.message_id  # type: ignore[misc]
    with pytest.raises(ValueError):
        SESSION_COMMANDS.validate_python({**sample, "unexpected": 1})
