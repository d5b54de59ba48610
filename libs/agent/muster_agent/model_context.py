"""What the next model call of a session sends: the agent's system prompt, the summary of
what compaction folded away (if any), then the messages after the compaction boundary."""

from __future__ import annotations

from typing import Any

from muster_agent.agents import AgentDefinition
from muster_agent.session_store import SessionState

SUMMARY_HEADING = "Summary of the earlier conversation (its messages are no longer shown):\n"


def summary_message(summary: str) -> dict[str, Any]:
    return {"role": "system", "content": SUMMARY_HEADING + summary}


def model_messages(agent: AgentDefinition, state: SessionState) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": agent.system_prompt}]
    if state.compaction is not None:
        messages.append(summary_message(state.compaction.summary))
    messages.extend(state.chat)
    return messages
