"""Correlation and causation ids of every event and command (ADR 0017).

The correlation id is the turn's originating id (the accepted user input that started it);
the causation id is the message that caused this one: the command or event a consumer was
handling when it decided. Edges set the lineage of what they handle (`caused_by`), the
gateway roots a turn at its input (`origin_metadata`), a turn started from queued input
switches to it (`begin_turn`), and writers fill what they send from it: commands through
`fill` (`stamp` in memory), events through `event_metadata`. A message written with no
lineage in context (a reconciliation scan, a REST request) starts its own: its correlation
and causation ids are its own id, the usual convention for a first message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from muster_contracts.envelope import Envelope
from muster_contracts.published import RecordedEvent

from muster_runtime import tracing

CORRELATION = "correlation_id"
CAUSATION = "causation_id"

E = TypeVar("E", bound=Envelope)


@dataclass(frozen=True)
class Lineage:
    correlation_id: UUID
    causation_id: UUID


_current: ContextVar[Lineage | None] = ContextVar("muster_lineage", default=None)


def current() -> Lineage | None:
    return _current.get()


def root(origin: UUID) -> Lineage:
    """The lineage of a turn started by `origin` (its input message id)."""
    return Lineage(origin, origin)


def origin_metadata(origin: UUID) -> dict[str, str]:
    """Event metadata naming `origin` (a turn's input) as correlation and cause."""
    return {CORRELATION: str(origin), CAUSATION: str(origin)}


def begin_turn(origin: UUID) -> None:
    """A turn started from the input `origin`: what this task writes from now on belongs to
    it (a loop that starts the next queued turn itself goes on under the new correlation)."""
    lineage = _current.get()
    if lineage is None or lineage.correlation_id != origin:
        _current.set(root(origin))


def of_message(message: object) -> Lineage | None:
    """The lineage of what a handler of `message` decides: same correlation, caused by it."""
    if isinstance(message, Envelope):
        return Lineage(message.correlation_id or message.message_id, message.message_id)
    if isinstance(message, RecordedEvent):
        correlation = _uuid(message.metadata.get(CORRELATION))
        return Lineage(correlation or message.event_id, message.event_id)
    return None


@contextlib.contextmanager
def caused_by(lineage: Lineage | None) -> Iterator[None]:
    """Messages written in this context (child tasks included) carry `lineage`."""
    token = _current.set(lineage)
    try:
        yield
    finally:
        _current.reset(token)


def stamp(message: E) -> E:
    """`message` with its correlation and causation ids filled (those it has are kept)."""
    if message.correlation_id is not None and message.causation_id is not None:
        return message
    lineage = _current.get() or root(message.message_id)
    return message.model_copy(
        update={
            CORRELATION: message.correlation_id or lineage.correlation_id,
            CAUSATION: message.causation_id or lineage.causation_id,
        }
    )


def fill(body: dict[str, Any]) -> dict[str, Any]:
    """`stamp` on a command's JSON body (cheaper than copying the model), in place."""
    if body.get(CORRELATION) is None or body.get(CAUSATION) is None:
        lineage = _current.get()
        own = body["message_id"]
        if body.get(CORRELATION) is None:
            body[CORRELATION] = str(lineage.correlation_id) if lineage else own
        if body.get(CAUSATION) is None:
            body[CAUSATION] = str(lineage.causation_id) if lineage else own
    return body


def event_metadata(metadata: dict[str, Any] | None, first_event_id: UUID) -> dict[str, Any]:
    """The metadata of an append: the writer's own keys, the lineage (rooted at the first
    event when there is none) and, when tracing, the trace context."""
    lineage = _current.get() or root(first_event_id)
    filled: dict[str, Any] = {
        CORRELATION: str(lineage.correlation_id),
        CAUSATION: str(lineage.causation_id),
    }
    context = tracing.traceparent()
    if context is not None:
        filled[tracing.TRACEPARENT] = context
    if metadata:
        filled.update(metadata)
    return filled


def _uuid(value: Any) -> UUID | None:
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None
