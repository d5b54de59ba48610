"""One trace per turn across the processes (ADR 0017): the services export over OTLP/HTTP
to a receiver in this process; a delegating turn's spans, from the WebSocket frame through
the harness, the worker, recovery and back, all share one trace id."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from .otlp_receiver import Receiver, Span
from .wsclient import Client, call, script

pytestmark = pytest.mark.e2e

SERVICES = {"gateway", "harness", "subagent-worker", "recovery"}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def traced(launch, receiver: Receiver):  # type: ignore[no-untyped-def]
    # A short batch delay, so the spans of a turn arrive within a fraction of a second.
    launcher = launch(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="100")
    yield launcher
    launcher.stop()


@pytest.fixture
async def client(traced) -> AsyncIterator[Client]:  # type: ignore[no-untyped-def]
    c = await Client.connect(traced.ws_url, traced.tokens["alice"])
    yield c
    await c.close()


def delegating_turn() -> str:
    child = script({"tool_calls": [call("write_file", path="t.txt", content="x")]}, {"content": "child done"})
    return script({"tool_calls": [call("delegate", agent_type="coder", task=child)]}, {"content": "parent done"})


def frame_trace(spans: list[Span], session_id: str) -> str | None:
    """The trace of the turn started by `create_session` for `session_id`: the one its
    harness's first ProcessSession continues (the gateway span itself knows no session)."""
    for span in spans:
        if span.name == "process ProcessSession" and span.attributes.get("messaging.kafka.message.key") == session_id:
            return span.trace_id
    return None


def complete(spans: list[Span], session_id: str) -> bool:
    trace_id = frame_trace(spans, session_id)
    if trace_id is None:
        return False
    turn = [s for s in spans if s.trace_id == trace_id]
    names = {(s.service, s.name) for s in turn}
    return SERVICES <= {s.service for s in turn} and {
        ("gateway", "ws create_session"),
        ("subagent-worker", "process RunExecution"),
        ("harness", "process ResumeSession"),
    } <= names


async def test_a_turn_is_one_trace_across_gateway_harness_worker_and_recovery(
    client: Client, receiver: Receiver
) -> None:
    first = await client.run_turn(delegating_turn())
    assert client.phases(first)[-1] == "COMPLETED"
    spans = await receiver.wait_for(lambda spans: complete(spans, first))
    trace_id = frame_trace(spans, first)
    turn = [s for s in spans if s.trace_id == trace_id]
    assert {s.service for s in turn} >= SERVICES
    # One root: the WebSocket frame; every other span of the turn has a parent in it.
    roots = [s for s in turn if not s.parent_span_id]
    assert [(r.service, r.name) for r in roots] == [("gateway", "ws create_session")]
    # Every command hop of this session and its child continues the turn's trace.
    child_runs = [s for s in turn if s.name == "process RunExecution"]
    assert child_runs and all(s.service == "subagent-worker" for s in child_runs)
    for span in spans:
        if span.name in ("process ProcessSession", "process ResumeSession") and \
                span.attributes.get("messaging.kafka.message.key") == first:
            assert span.trace_id == trace_id, span
    # The model calls of both loops, the parent's and the child's, are in it too.
    assert {s.service for s in turn if s.name == "model call"} == {"harness", "subagent-worker"}

    second = await client.run_turn(delegating_turn())
    spans = await receiver.wait_for(lambda spans: complete(spans, second))
    second_trace = frame_trace(spans, second)
    assert second_trace != trace_id
    assert not [s for s in spans if s.trace_id == trace_id and s.attributes.get("messaging.kafka.message.key") == second]
