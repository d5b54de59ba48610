"""An execution as a decision reads it (`executions`): one run of a subagent child for a
tool call of its parent's round."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from muster_contracts.events import DeliveryStatus, ExecutionStatus, InvocationType

from muster_runtime.uow import phases


@dataclass(frozen=True)
class Execution:
    execution_id: UUID
    parent_session_id: UUID
    parent_tool_call_id: str
    child_session_id: UUID
    user_id: str
    agent_type: str
    invocation_type: InvocationType
    round: int  # the child's run this is (1 for a delegation, then one more per follow-up)
    status: ExecutionStatus
    delivery_status: DeliveryStatus
    result: str | None
    error: str | None
    start_message_id: UUID | None  # the child's USER message this run answers
    rounds: int
    tool_calls: int
    usage: Mapping[str, Any]
    deadline_at: datetime
    recoveries: int
    version: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Execution:
        return cls(
            execution_id=row["execution_id"],
            parent_session_id=row["parent_session_id"],
            parent_tool_call_id=row["parent_tool_call_id"],
            child_session_id=row["child_session_id"],
            user_id=row["user_id"],
            agent_type=row["agent_type"],
            invocation_type=row["invocation_type"],
            round=row["round"],
            status=row["status"],
            delivery_status=row["delivery_status"],
            result=row["result"],
            error=row["error"],
            start_message_id=row["start_message_id"],
            rounds=row["rounds"],
            tool_calls=row["tool_calls"],
            usage=row["usage"] or {},
            deadline_at=row["deadline_at"],
            recoveries=row["recoveries"],
            version=row["version"],
        )

    @property
    def open(self) -> bool:
        """A worker or a takeover still owes its result."""
        return self.status in phases.OPEN_STATUSES

    @property
    def terminal(self) -> bool:
        return self.status in phases.TERMINAL_STATUSES

    @property
    def follow_up(self) -> bool:
        return self.invocation_type == "FOLLOWUP"
