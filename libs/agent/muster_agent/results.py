"""The delegate result the parent's model reads (DESIGN §4), and execution accounting."""

from __future__ import annotations

import json
from typing import Any

from muster_contracts import events as ev
from muster_runtime.uow.aggregates import Execution

from muster_agent.history import StoredMessage


def execution_result(execution: Execution, completed_rounds: int | None = None) -> str:
    """JSON string of a terminal execution, in the snake_case shape models read. A
    failure carries its reason in both `result` and `error`; a follow-up says which round
    of the child it was and how many of the child's rounds completed (`completed_rounds`)."""
    usage = execution.usage
    prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    body: dict[str, Any] = {
        "success": execution.status == "COMPLETED",
        "cancelled": execution.status == "CANCELLED",
        "agent_type": execution.agent_type,
        "child_session_id": str(execution.child_session_id),
        "result": execution.result or "",
        "rounds": execution.rounds,
        "tool_calls": execution.tool_calls,
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    if execution.status != "COMPLETED":
        body["error"] = execution.error or execution.status.lower()
        body["result"] = body["error"]
    if execution.follow_up:
        body["follow_up"] = True
        body["round"] = execution.round
        body["completed_rounds"] = completed_rounds if completed_rounds is not None else execution.round
    return json.dumps(body)


def account(
    messages: list[StoredMessage], usages: dict[Any, Any], start_seq: int
) -> tuple[int, int, ev.TokenUsage]:
    """Rounds, tool calls and token usage of the messages after `start_seq` (one run)."""
    rounds = tool_calls = prompt = completion = 0
    for message in messages:
        if message.seq <= start_seq or message.role != "ASSISTANT":
            continue
        rounds += 1
        tool_calls += len(message.tool_calls or [])
        usage = usages.get(message.message_id) or {}
        prompt += int(usage.get("prompt_tokens", 0))
        completion += int(usage.get("completion_tokens", 0))
    return rounds, tool_calls, ev.TokenUsage(prompt_tokens=prompt, completion_tokens=completion)
