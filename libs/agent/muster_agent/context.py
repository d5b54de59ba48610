"""What a session's next model call sends: the system prompt (the agent's, plus a summary
side task's background), the compaction summary if the session was compacted, and the
history after the compaction boundary in the OpenAI chat form. The loop and
`GET /v1/sessions/{id}/context` both call `model_messages`, so what users inspect is what
the model gets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from muster_agent.agents import DELEGATION_TOOLS, AgentDefinition
from muster_agent.session_store import SessionState

BACKGROUND_HEADER = (
    "Background: this is a side task branched from another conversation. Its results are not "
    "reported back to that conversation. The last messages of that conversation were:"
)


def system_prompt(
    agent: AgentDefinition, background: Sequence[tuple[str, str]] | None, session_type: str | None = None
) -> str:
    """The agent's prompt, with its delegation hints when the session gets `delegate` or
    `delegate_followup` (`session_type` given: a subagent never does); a summary side task's
    (`background` not None, perhaps empty: the source had no messages yet) adds the source's
    last messages after it."""
    prompt = agent.system_prompt
    if session_type is not None and DELEGATION_TOOLS & set(agent.tools_for(session_type)):
        prompt = "\n\n".join(part for part in (prompt, agent.delegation_hints) if part)
    if background is None:
        return prompt
    lines = [f"{role}: {content}" for role, content in background] or ["(none yet)"]
    return "\n\n".join(part for part in (prompt, BACKGROUND_HEADER, "\n".join(lines)) if part)


SUMMARY_HEADING = "Summary of the earlier conversation (its messages are no longer shown):\n"


def summary_message(summary: str) -> dict[str, Any]:
    return {"role": "system", "content": SUMMARY_HEADING + summary}


def model_messages(agent: AgentDefinition, state: SessionState) -> list[dict[str, Any]]:
    """The `messages` of the next chat-completions request, system prompt first."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(agent, state.background, state.session_type)}
    ]
    if state.compaction is not None:
        messages.append(summary_message(state.compaction.summary))
    messages.extend(state.chat)
    return messages
