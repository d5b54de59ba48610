from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from muster_agent.history import StoredMessage
from muster_agent.results import account, execution_result
from muster_runtime.uow.aggregates import Execution


def execution(**overrides: Any) -> Execution:
    row = {
        "execution_id": uuid4(), "parent_session_id": uuid4(), "parent_tool_call_id": "call-1",
        "user_id": "u1", "delivery_status": "PENDING", "start_message_id": uuid4(),
        "deadline_at": datetime.now(UTC), "recoveries": 0, "version": 2,
        "status": "COMPLETED", "agent_type": "coder", "child_session_id": uuid4(), "result": "ok",
        "rounds": 2, "tool_calls": 1, "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        "error": None, "invocation_type": "DELEGATE", "round": 1,
    }  # fmt: skip
    return Execution.of({**row, **overrides})


def test_completed_result_has_the_documented_shape() -> None:
    row = execution()
    body = json.loads(execution_result(row))
    assert body == {
        "success": True, "cancelled": False, "agent_type": "coder",
        "child_session_id": str(row.child_session_id), "result": "ok", "rounds": 2,
        "tool_calls": 1, "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def test_failure_and_cancel_carry_an_error() -> None:
    failed = json.loads(execution_result(execution(status="FAILED", error="boom", result=None)))
    # The reason in both `result` and `error` (DESIGN §4).
    assert (failed["success"], failed["cancelled"], failed["error"], failed["result"]) == (False, False, "boom", "boom")
    cancelled = json.loads(execution_result(execution(status="CANCELLED", error=None, result="partial")))
    assert (cancelled["success"], cancelled["cancelled"], cancelled["error"], cancelled["result"]) == (
        False, True, "cancelled", "cancelled")


def test_followup_result_names_its_round_and_the_completed_rounds() -> None:
    body = json.loads(execution_result(execution(invocation_type="FOLLOWUP", round=3), completed_rounds=2))
    assert (body["follow_up"], body["round"], body["completed_rounds"]) == (True, 3, 2)
    assert "follow_up" not in json.loads(execution_result(execution()))


def test_account_counts_only_this_runs_messages() -> None:
    old, task, a1, tool, a2 = (uuid4() for _ in range(5))
    messages = [
        StoredMessage(old, 2, "ASSISTANT", "earlier run", None, None),
        StoredMessage(task, 3, "USER", "task", None, None),
        StoredMessage(a1, 4, "ASSISTANT", "", [{"id": "c", "name": "x", "arguments": {}}], None),
        StoredMessage(tool, 5, "TOOL", "{}", None, "c"),
        StoredMessage(a2, 6, "ASSISTANT", "done", None, None),
    ]
    usages = {old: {"prompt_tokens": 100, "completion_tokens": 100}, a1: {"prompt_tokens": 4, "completion_tokens": 1},
              a2: {"prompt_tokens": 6, "completion_tokens": 2}}
    rounds, calls, usage = account(messages, usages, start_seq=3)
    assert (rounds, calls, usage.prompt_tokens, usage.completion_tokens) == (2, 1, 10, 3)
