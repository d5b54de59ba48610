"""Correlation ids through the loop: a turn's events carry the id of the input that
started it, also when the loop starts the next queued turn itself."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

from muster_contracts import events as ev
from muster_runtime.store import lineage

from tests.unit.agent.memory_world import World


async def test_a_queued_turn_started_by_the_loop_has_its_own_correlation(tmp_path: Path) -> None:
    world = World(tmp_path)
    sid = await world.session("first")
    queued = ev.UserMessageQueued(message_id=uuid4(), content="second")
    await world.append(sid, queued)
    first, command = uuid4(), uuid4()
    with lineage.caused_by(lineage.Lineage(first, command)):
        await world.run(sid)
    stored = world.store.state.streams[str(sid)]
    answers = [
        e for e in stored if isinstance(e.event, ev.MessageRecorded) and e.event.role == "ASSISTANT"
    ]
    assert len(answers) == 2
    assert answers[0].metadata["correlation_id"] == str(first)
    assert answers[0].metadata["causation_id"] == str(command)
    assert answers[1].metadata["correlation_id"] == str(queued.message_id)
    assert lineage.current() is None
