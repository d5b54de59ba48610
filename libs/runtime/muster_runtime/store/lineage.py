"""Correlation and causation ids of every event and command (ADR 0017).

The correlation id is the turn's originating id (the accepted user input that started it);
the causation id is the message that caused this one: the command or event a consumer was
handling when it decided. Edges name the message they handle as the cause (`enter` /
`leave`, or `caused_by`), the gateway roots a turn at its input (`origin_metadata`), a turn
started from queued input switches to it (`begin_turn`), and writers fill what they send
from it: commands through `fill` (`stamp` in memory), events through `event_metadata`. A
message written with no cause in context (a reconciliation scan, a REST request) starts its
own lineage: its correlation and causation ids are its own id, the usual convention for a
first message.

The cause is kept as it came (a message, or a `Lineage`) and read only when something is
written: most consumed records (recovery reads every event) cause no write at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from muster_contracts.envelope import Envelope
from muster_contracts.published import RecordedEvent

from muster_runtime.process import tracing

CORRELATION = "correlation_id"
CAUSATION = "causation_id"

E = TypeVar("E", bound=Envelope)


@dataclass(frozen=True)
class Lineage:
    correlation_id: UUID
    causation_id: UUID


Cause = Lineage | Envelope | RecordedEvent | None
_cause: ContextVar[Cause] = ContextVar("muster_cause", default=None)


def enter(cause: Cause) -> Token[Cause]:
    """From here on (child tasks included), what is written is caused by `cause`."""
    return _cause.set(cause)


def leave(token: Token[Cause]) -> None:
    _cause.reset(token)


@contextlib.contextmanager
def caused_by(cause: Cause) -> Iterator[None]:
    token = _cause.set(cause)
    try:
        yield
    finally:
        _cause.reset(token)


def of_message(message: Cause) -> Lineage | None:
    """The lineage of what is decided because of `message`: same correlation, caused by it."""
    if message is None or type(message) is Lineage:
        return message
    if type(message) is RecordedEvent:
        correlation = _uuid(message.metadata.get(CORRELATION))
        return Lineage(correlation or message.event_id, message.event_id)
    assert isinstance(message, Envelope)
    return Lineage(message.correlation_id or message.message_id, message.message_id)


def current() -> Lineage | None:
    return of_message(_cause.get())


def _ids() -> tuple[str, str] | None:
    """The current correlation and causation ids as text (None: no cause)."""
    cause = _cause.get()
    if cause is None:
        return None
    if type(cause) is RecordedEvent:
        own = str(cause.event_id)
        return str(cause.metadata.get(CORRELATION) or own), own
    lineage = of_message(cause)
    assert lineage is not None
    return str(lineage.correlation_id), str(lineage.causation_id)


def root(origin: UUID) -> Lineage:
    """The lineage of a turn started by `origin` (its input message id)."""
    return Lineage(origin, origin)


def origin_metadata(origin: UUID) -> dict[str, str]:
    """Event metadata naming `origin` (a turn's input) as correlation and cause."""
    return {CORRELATION: str(origin), CAUSATION: str(origin)}


def begin_turn(origin: UUID) -> None:
    """A turn started from the input `origin`: what this task writes from now on belongs to
    it (a loop that starts the next queued turn itself goes on under the new correlation)."""
    lineage = current()
    if lineage is None or lineage.correlation_id != origin:
        _cause.set(root(origin))


def stamp(message: E) -> E:
    """`message` with its correlation and causation ids filled (those it has are kept)."""
    if message.correlation_id is not None and message.causation_id is not None:
        return message
    lineage = current() or root(message.message_id)
    return message.model_copy(
        update={
            CORRELATION: message.correlation_id or lineage.correlation_id,
            CAUSATION: message.causation_id or lineage.causation_id,
        }
    )


def fill(body: dict[str, Any]) -> dict[str, Any]:
    """`stamp` on a command's JSON body (cheaper than copying the model), in place."""
    if body.get(CORRELATION) is None or body.get(CAUSATION) is None:
        own = body["message_id"]
        correlation, causation = _ids() or (own, own)
        if body.get(CORRELATION) is None:
            body[CORRELATION] = correlation
        if body.get(CAUSATION) is None:
            body[CAUSATION] = causation
    return body


def event_metadata(metadata: dict[str, Any] | None, first_event_id: UUID) -> dict[str, Any]:
    """The metadata of an append: the writer's own keys, the lineage (rooted at the first
    event when there is none) and, when tracing, the trace context."""
    ids = _ids()
    if ids is None:
        own = str(first_event_id)
        ids = own, own
    filled: dict[str, Any] = {CORRELATION: ids[0], CAUSATION: ids[1]}
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
