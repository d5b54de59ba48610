"""Commands: imperative requests sent to exactly one consumer group.

`muster.commands` (harness) and `muster.delegations` (subagent workers) carry these,
keyed by the session (or execution) they concern so one partition orders them.
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, TypeAdapter

from muster_contracts.envelope import Envelope


class ProcessSession(Envelope):
    """Start the next turn of a session if it is idle and has queued input, or resume a
    turn whose owner died. Safe to send any number of times."""

    type: Literal["ProcessSession"] = "ProcessSession"
    session_id: UUID
    reason: str = "input"


class CancelSession(Envelope):
    """Stop the session's running turn: drop any in-flight model answer, end the loop."""

    type: Literal["CancelSession"] = "CancelSession"
    session_id: UUID


class ResumeSession(Envelope):
    """Continue a parent whose delegated results were all delivered (the barrier)."""

    type: Literal["ResumeSession"] = "ResumeSession"
    session_id: UUID
    after_message_id: UUID | None = None


class CompactSession(Envelope):
    """Compact an idle session now (`POST /v1/sessions/{id}/compact`): every turn but the
    latest is summarised. Does nothing if a turn started meanwhile."""

    type: Literal["CompactSession"] = "CompactSession"
    session_id: UUID


class RunExecution(Envelope):
    """Run (or resume) one subagent execution on its child session."""

    type: Literal["RunExecution"] = "RunExecution"
    execution_id: UUID
    child_session_id: UUID
    parent_session_id: UUID


class CancelExecution(Envelope):
    """Interrupt a running execution's child loop (its cancellation is already recorded)."""

    type: Literal["CancelExecution"] = "CancelExecution"
    execution_id: UUID
    child_session_id: UUID


AnySessionCommand = ProcessSession | CancelSession | ResumeSession | CompactSession
SessionCommand = Annotated[AnySessionCommand, Field(discriminator="type")]
SESSION_COMMANDS: TypeAdapter[AnySessionCommand] = TypeAdapter(SessionCommand)
DelegationCommand = Annotated[RunExecution | CancelExecution, Field(discriminator="type")]
DELEGATION_COMMANDS: TypeAdapter[RunExecution | CancelExecution] = TypeAdapter(DelegationCommand)
